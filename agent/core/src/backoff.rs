//! Jittered exponential backoff, as a value: the caller supplies the randomness and does
//! the sleeping, so the policy is a pure function that tests can walk exhaustively.
//!
//! Each delay is drawn from `[base / 2, base]` ("equal jitter"): never less than half
//! the nominal delay, so retries stay spaced, and spread over the other half, so nodes
//! that lost the API server together do not come back in lockstep (O3). The nominal
//! delay starts at `initial`, doubles after every failure and stops at `max`.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    /// The nominal delay of the next retry.
    base: Duration,
}

impl Backoff {
    /// client-go's reflector and kube-rs's watcher back off from 800 ms to 30 s.
    pub const WATCH: Backoff = Backoff::new(Duration::from_millis(800), Duration::from_secs(30));

    /// `max` below `initial` is raised to `initial`.
    pub const fn new(initial: Duration, max: Duration) -> Backoff {
        let max = if max.as_nanos() < initial.as_nanos() { initial } else { max };
        Backoff { initial, max, base: initial }
    }

    /// The delay before the next retry, given `random` uniform in `[0, 1)` (values out of
    /// range are clamped); doubles the nominal delay for the retry after it.
    pub fn next_delay(&mut self, random: f64) -> Duration {
        let base = self.base;
        self.base = base.saturating_mul(2).min(self.max);
        let half = base / 2;
        half + (base - half).mul_f64(random.clamp(0.0, 1.0))
    }

    /// The nominal delay of the next retry (before jitter).
    pub fn nominal(&self) -> Duration {
        self.base
    }

    /// After a success: the next failure waits `initial` again.
    pub fn reset(&mut self) {
        self.base = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn doubles_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let top: Vec<_> = (0..5).map(|_| b.next_delay(1.0)).collect();
        assert_eq!(top, [1, 2, 4, 5, 5].map(Duration::from_secs));
        b.reset();
        assert_eq!(b.next_delay(0.0), Duration::from_millis(500), "the low end is half");
    }

    #[test]
    fn watch_backoff_matches_client_go() {
        let mut b = Backoff::WATCH;
        assert_eq!(b.nominal(), Duration::from_millis(800));
        for _ in 0..10 {
            b.next_delay(0.5);
        }
        assert_eq!(b.nominal(), Duration::from_secs(30));
    }

    #[test]
    fn max_below_initial_is_raised() {
        let mut b = Backoff::new(Duration::from_secs(3), Duration::from_secs(1));
        assert_eq!(b.next_delay(1.0), Duration::from_secs(3));
        assert_eq!(b.next_delay(1.0), Duration::from_secs(3));
    }

    proptest! {
        /// Every delay lies in [nominal/2, nominal], the nominal delay never shrinks
        /// without a reset and never passes the cap, whatever the randomness.
        #[test]
        fn delays_stay_in_their_band(
            initial_ms in 1u64..10_000,
            max_ms in 1u64..1_000_000,
            randoms in prop::collection::vec(-1.0f64..2.0, 1..64),
            reset_at in prop::option::of(0usize..64),
        ) {
            let mut b = Backoff::new(Duration::from_millis(initial_ms), Duration::from_millis(max_ms));
            let cap = Duration::from_millis(max_ms.max(initial_ms));
            for (i, r) in randoms.into_iter().enumerate() {
                if reset_at == Some(i) {
                    b.reset();
                    prop_assert_eq!(b.nominal(), Duration::from_millis(initial_ms));
                }
                let nominal = b.nominal();
                let delay = b.next_delay(r);
                prop_assert!(delay >= nominal / 2 && delay <= nominal, "{:?} vs {:?}", delay, nominal);
                prop_assert!(b.nominal() >= nominal && b.nominal() <= cap);
            }
        }
    }
}
