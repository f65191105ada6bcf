//! The model's clocks, pure: client-go's jittered periods and its reflector's backoff
//! manager, the node lease controller's ensure-lease backoff. Random numbers come in as
//! arguments (`random` in `[0, 1)`), so each rule is a plain function of its inputs.

use std::time::{Duration, Instant};

/// `wait.Jitter`: `period` stretched by up to `factor` of itself (`factor` 0.04 for the
/// Lease and node status loops: 10 s to 10.4 s).
pub fn jitter(period: Duration, factor: f64, random: f64) -> Duration {
    period.mul_f64(1.0 + factor * random.clamp(0.0, 1.0))
}

/// kubelet's node lease period: `renewInterval` = 0.25 × `nodeLeaseDurationSeconds`
/// (40 s by default, so 10 s).
pub fn lease_renew_interval(lease_duration: Duration) -> Duration {
    lease_duration.mul_f64(0.25)
}

/// The lease controller's `backoffEnsureLease`: 100 ms doubled before each wait (so the
/// first wait is 200 ms), at most 7 s, no jitter. Returns the next wait and the new base.
pub fn ensure_lease_wait(previous: Duration) -> Duration {
    (previous * 2).min(Duration::from_secs(7))
}

/// client-go's reflector backoff (`NewExponentialBackoffManager(800ms, 30s, 2min, 2.0,
/// 1.0)`, a `wait.Backoff` behind `DelayWithReset`): each wait is the base stretched by
/// up to 100 % (jitter 1.0), the base doubles up to 30 s, and the whole backoff goes back
/// to 800 ms when 2 minutes passed since it last did (the first wait ever resets too).
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    cap: Duration,
    reset: Duration,
    base: Duration,
    last_reset: Option<Instant>,
}

impl Backoff {
    /// The reflector's: 800 ms, doubling, cap 30 s, reset after 2 minutes, jitter 1.0.
    pub fn reflector() -> Backoff {
        let initial = Duration::from_millis(800);
        Backoff {
            initial,
            cap: Duration::from_secs(30),
            reset: Duration::from_secs(120),
            base: initial,
            last_reset: None,
        }
    }

    /// The next wait at `now`, with `random` in `[0, 1)` for its jitter.
    pub fn next(&mut self, now: Instant, random: f64) -> Duration {
        let due = self.last_reset.is_none_or(|at| now.saturating_duration_since(at) > self.reset);
        if due {
            self.base = self.initial;
            self.last_reset = Some(now);
        }
        let wait = jitter(self.base, 1.0, random);
        self.base = (self.base * 2).min(self.cap);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b13_jitter_stretches_by_at_most_the_factor() {
        let period = Duration::from_secs(10);
        assert_eq!(jitter(period, 0.04, 0.0), period);
        assert_eq!(jitter(period, 0.04, 0.5), Duration::from_millis(10_200));
        assert!(jitter(period, 0.04, 0.999_999) < Duration::from_millis(10_400));
        assert_eq!(jitter(period, 0.04, 7.0), Duration::from_millis(10_400));
    }

    #[test]
    fn b13_lease_renews_every_quarter_of_its_duration() {
        assert_eq!(lease_renew_interval(Duration::from_secs(40)), Duration::from_secs(10));
    }

    #[test]
    fn b13_ensure_lease_backoff_doubles_to_seven_seconds() {
        let mut wait = Duration::from_millis(100);
        let mut waits = Vec::new();
        for _ in 0..8 {
            wait = ensure_lease_wait(wait);
            waits.push(wait.as_millis());
        }
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
    }

    #[test]
    fn b13_reflector_backoff_doubles_to_its_cap_with_full_jitter() {
        let start = Instant::now();
        let mut backoff = Backoff::reflector();
        let bases: Vec<u128> =
            (0..9).map(|i| backoff.next(start + Duration::from_secs(i), 0.0).as_millis()).collect();
        assert_eq!(bases, [800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000, 30_000]);
        let mut backoff = Backoff::reflector();
        let most = backoff.next(start, 0.999_999);
        assert!(most > Duration::from_millis(1599) && most < Duration::from_millis(1600));
    }

    #[test]
    fn b13_reflector_backoff_resets_two_minutes_after_its_last_reset() {
        let start = Instant::now();
        let mut backoff = Backoff::reflector();
        for i in 0..5 {
            backoff.next(start + Duration::from_secs(i * 20), 0.0);
        }
        // 100 s after the first wait: still doubling; past 120 s: back to 800 ms.
        assert_eq!(backoff.next(start + Duration::from_secs(110), 0.0).as_millis(), 25_600);
        assert_eq!(backoff.next(start + Duration::from_secs(121), 0.0).as_millis(), 800);
        assert_eq!(backoff.next(start + Duration::from_secs(122), 0.0).as_millis(), 1600);
    }
}
