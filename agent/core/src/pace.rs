//! A token bucket, as a value: the caller supplies the clock, so the policy is a pure
//! function. It paces the agent's writes to the API server (kubelet's client QPS and
//! burst), so that a backlog sent after a reconnect is spread out instead of a burst.
//!
//! When the API server refuses a request for load (429, its flow control), the rate is
//! halved down to [`FLOOR`] and the tokens on hand dropped, and it grows back by
//! [`RECOVERY`] per second while the server answers (additive increase, multiplicative
//! decrease, as TCP backs off): a fleet that reconnects into a throttled server offers
//! it what it serves instead of retrying every request together after `Retry-After`
//! (B13: 9,288 of 14,483 requests refused at a 50 QPS throttle before this).

use std::time::Duration;

/// Outages up to this long are short: a node found back after one sends its backlog at
/// once (B6: one node's whole sync within a fraction of a second).
pub const SHORT_OUTAGE: Duration = Duration::from_secs(30);
/// The longest window a node spreads its backlog over for the time it was away.
pub const MAX_SPREAD: Duration = Duration::from_secs(60);
/// The longest window at all, with the refusals for load the node met.
pub const MAX_SPREAD_REFUSED: Duration = Duration::from_secs(300);

/// The window a node spreads its backlog (pod statuses, Events) over after being away
/// from its API server for `away`, having met `refusals` 429s since it was last found
/// back (B13). Every node of a fleet cut off together finds the server back within a
/// few seconds, each with the backlog of its outage: sent at once, the fleet's first
/// seconds were 34 to 159 × its idle rate. Zero after a short outage; then a second
/// per second past [`SHORT_OUTAGE`], up to [`MAX_SPREAD`]; each refusal for load adds
/// the window again, up to [`MAX_SPREAD_REFUSED`].
pub fn spread_window(away: Duration, refusals: u32) -> Duration {
    let base = away.saturating_sub(SHORT_OUTAGE).min(MAX_SPREAD);
    base.saturating_mul(refusals.saturating_add(1)).min(MAX_SPREAD_REFUSED)
}

/// The lowest rate refusals take the bucket to at first, per second.
pub const FLOOR: f64 = 1.0;
/// The floor itself halves on each refusal met at it (a server that refuses even one
/// request a second from each node is told so), down to this; it is back at [`FLOOR`]
/// once the rate is back at its ceiling.
pub const MIN_FLOOR: f64 = 0.05;
/// How fast the rate grows back after a refusal, per second of answers.
pub const RECOVERY: f64 = 1.0;
/// The longest a refusal's `Retry-After` holds the bucket. A server's flow control asks
/// for a second or so; a proxy that answers 429 with an hour must not stop every write
/// of the node (its Lease lapses after 40 s), so the hold is capped and the request
/// tried again, paced by the halved rate.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    /// Tokens added per second.
    rate: f64,
    /// The rate without refusals.
    ceiling: f64,
    /// The lowest the rate goes on refusals, now ([`FLOOR`], adapting down to
    /// [`MIN_FLOOR`]).
    floor: f64,
    /// Refusals for load since the bucket was made.
    refusals: u64,
    /// When the rate last changed (a refusal, or growing back).
    adjusted: Duration,
    burst: f64,
    tokens: f64,
    /// The clock reading of the last refill (any monotonic origin).
    last: Duration,
}

impl TokenBucket {
    /// kubelet's defaults for its API client (`kubeAPIQPS` 50, `kubeAPIBurst` 100).
    pub const KUBELET: (f64, u32) = (50.0, 100);

    /// A full bucket of `burst` tokens, refilled at `rate` per second (at least one
    /// token, and a rate above zero).
    pub fn new(rate: f64, burst: u32, now: Duration) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        let rate = if rate.is_finite() && rate > 0.0 { rate } else { 1.0 };
        let floor = FLOOR.min(rate);
        TokenBucket {
            rate,
            ceiling: rate,
            floor,
            refusals: 0,
            adjusted: now,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// The current rate, per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Refusals for load so far.
    pub fn refusals(&self) -> u64 {
        self.refusals
    }

    /// The server refused a request for load at `now`, to be retried after
    /// `retry_after`: half the rate (not below the floor, which halves itself when the
    /// rate is there already), and no token before `retry_after`, so that every request
    /// of the bucket honours the server's `Retry-After`, not only the refused one (up
    /// to [`MAX_RETRY_AFTER`]).
    pub fn refused(&mut self, now: Duration, retry_after: Duration) {
        self.refill(now);
        self.refusals += 1;
        if self.rate <= self.floor {
            self.floor = (self.floor / 2.0).max(MIN_FLOOR.min(self.ceiling));
        }
        self.rate = (self.rate / 2.0).max(self.floor);
        let owed = retry_after.min(MAX_RETRY_AFTER).as_secs_f64() * self.rate;
        self.tokens = self.tokens.min(0.0).min(-owed);
        self.adjusted = self.adjusted.max(now);
    }

    /// The server answered at `now` (anything but a refusal for load): the rate grows
    /// back by [`RECOVERY`] per second since it last changed, up to its ceiling.
    pub fn answered(&mut self, now: Duration) {
        if self.rate >= self.ceiling || now <= self.adjusted {
            return;
        }
        self.refill(now);
        let grown = (now - self.adjusted).as_secs_f64() * RECOVERY;
        self.rate = (self.rate + grown).min(self.ceiling);
        self.adjusted = now;
        if self.rate >= self.ceiling {
            self.floor = FLOOR.min(self.ceiling);
        }
    }

    /// Takes one token at `now`: `None` if one was there, else how long to wait before
    /// the token taken (on credit) is due. A clock going backwards adds nothing.
    pub fn take(&mut self, now: Duration) -> Option<Duration> {
        self.refill(now);
        self.tokens -= 1.0;
        (self.tokens < 0.0).then(|| Duration::from_secs_f64(-self.tokens / self.rate))
    }

    fn refill(&mut self, now: Duration) {
        if now > self.last {
            let added = (now - self.last).as_secs_f64() * self.rate;
            self.tokens = (self.tokens + added).min(self.burst);
            self.last = now;
        }
    }

    /// Takes one token at `now` if one is there (client-go's `TryAccept`): a refusal
    /// takes nothing, so a caller that keeps asking is not pushed further into debt.
    pub fn try_take(&mut self, now: Duration) -> bool {
        self.refill(now);
        let available = self.tokens >= 1.0;
        if available {
            self.tokens -= 1.0;
        }
        available
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_spread_window_grows_with_the_time_away_and_the_refusals() {
        let s = Duration::from_secs;
        assert_eq!(spread_window(s(2), 0), Duration::ZERO, "short: at once");
        assert_eq!(spread_window(SHORT_OUTAGE, 5), Duration::ZERO);
        assert_eq!(spread_window(s(40), 0), s(10));
        assert_eq!(spread_window(s(60), 0), s(30));
        assert_eq!(spread_window(s(600), 0), MAX_SPREAD);
        assert_eq!(spread_window(s(60), 1), s(60));
        assert_eq!(spread_window(s(600), 1_000), MAX_SPREAD_REFUSED);
        assert_eq!(spread_window(Duration::MAX, u32::MAX), MAX_SPREAD_REFUSED);
    }

    #[test]
    fn burst_then_rate() {
        let mut bucket = TokenBucket::new(10.0, 3, Duration::ZERO);
        assert_eq!(bucket.take(Duration::ZERO), None);
        assert_eq!(bucket.take(Duration::ZERO), None);
        assert_eq!(bucket.take(Duration::ZERO), None);
        let wait = bucket.take(Duration::ZERO).unwrap_or_default();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        let wait = bucket.take(Duration::ZERO).unwrap_or_default();
        assert!((wait.as_secs_f64() - 0.2).abs() < 1e-9, "{wait:?}");
        // After a long idle time the bucket is full again, not fuller.
        assert_eq!(bucket.take(Duration::from_secs(100)), None);
        assert_eq!(bucket.take(Duration::from_secs(100)), None);
        assert_eq!(bucket.take(Duration::from_secs(100)), None);
        assert!(bucket.take(Duration::from_secs(100)).is_some());
    }

    #[test]
    fn try_take_refuses_without_debt() {
        let mut bucket = TokenBucket::new(1.0, 2, Duration::ZERO);
        assert!(bucket.try_take(Duration::ZERO));
        assert!(bucket.try_take(Duration::ZERO));
        for _ in 0..10 {
            assert!(!bucket.try_take(Duration::ZERO), "refusals take nothing");
        }
        // One second refills one token, whatever was refused before.
        assert!(bucket.try_take(Duration::from_secs(1)));
        assert!(!bucket.try_take(Duration::from_secs(1)));
    }

    #[test]
    fn refusals_halve_the_rate_to_the_floor_and_answers_grow_it_back() {
        let mut bucket = TokenBucket::new(50.0, 100, Duration::ZERO);
        bucket.refused(Duration::ZERO, Duration::ZERO);
        assert_eq!(bucket.rate(), 25.0);
        // The burst on hand is gone: the next request waits for a token.
        let wait = bucket.take(Duration::ZERO).unwrap_or_default();
        assert!((wait.as_secs_f64() - 1.0 / 25.0).abs() < 1e-9, "{wait:?}");
        for _ in 0..5 {
            bucket.refused(Duration::ZERO, Duration::ZERO);
        }
        assert_eq!(bucket.rate(), FLOOR);
        // One answer a second later: one more per second; then to the ceiling, not past.
        bucket.answered(Duration::from_secs(1));
        assert_eq!(bucket.rate(), 2.0);
        bucket.answered(Duration::from_secs(11));
        assert_eq!(bucket.rate(), 12.0);
        bucket.answered(Duration::from_secs(1000));
        assert_eq!(bucket.rate(), 50.0);
        // Answers at the ceiling change nothing; a clock going backwards adds nothing.
        bucket.answered(Duration::from_secs(2000));
        assert_eq!(bucket.rate(), 50.0);
        bucket.refused(Duration::from_secs(2000), Duration::ZERO);
        bucket.answered(Duration::from_secs(1500));
        assert_eq!(bucket.rate(), 25.0);
        assert_eq!(bucket.refusals(), 7);
    }

    #[test]
    fn a_bucket_slower_than_the_floor_has_its_own_rate_as_its_floor() {
        let mut bucket = TokenBucket::new(0.5, 1, Duration::ZERO);
        bucket.refused(Duration::ZERO, Duration::ZERO);
        assert_eq!(bucket.rate(), 0.25, "refused at its floor: the floor halves");
    }

    #[test]
    fn retry_after_holds_every_request_of_the_bucket() {
        let mut bucket = TokenBucket::new(50.0, 100, Duration::ZERO);
        bucket.refused(Duration::ZERO, Duration::from_secs(3));
        // Half the rate, and the next token only after three seconds.
        let wait = bucket.take(Duration::ZERO).unwrap_or_default();
        assert!((wait.as_secs_f64() - (3.0 + 1.0 / 25.0)).abs() < 1e-9, "{wait:?}");
    }

    #[test]
    fn a_retry_after_of_an_hour_holds_the_bucket_for_the_cap_only() {
        let mut bucket = TokenBucket::new(50.0, 100, Duration::ZERO);
        bucket.refused(Duration::ZERO, Duration::from_secs(3_600));
        let wait = bucket.take(Duration::ZERO).unwrap_or_default();
        let capped = MAX_RETRY_AFTER.as_secs_f64() + 1.0 / 25.0;
        assert!((wait.as_secs_f64() - capped).abs() < 1e-9, "{wait:?}");
    }

    #[test]
    fn the_floor_halves_on_refusals_at_it_and_comes_back_with_the_ceiling() {
        let mut bucket = TokenBucket::new(4.0, 10, Duration::ZERO);
        let refuse = |b: &mut TokenBucket| b.refused(Duration::ZERO, Duration::ZERO);
        refuse(&mut bucket);
        refuse(&mut bucket);
        assert_eq!(bucket.rate(), FLOOR);
        refuse(&mut bucket);
        assert_eq!(bucket.rate(), FLOOR / 2.0, "refused at the floor: it halves");
        for _ in 0..20 {
            refuse(&mut bucket);
        }
        assert_eq!(bucket.rate(), MIN_FLOOR);
        bucket.answered(Duration::from_secs(100));
        assert_eq!(bucket.rate(), 4.0);
        refuse(&mut bucket);
        refuse(&mut bucket);
        assert_eq!(bucket.rate(), FLOOR, "the floor is back once the ceiling was");
    }

    proptest! {
        /// The window never shrinks as the outage or the refusals grow, and stays within
        /// its bounds.
        #[test]
        fn the_spread_window_is_monotonic_and_bounded(
            away in 0u64..100_000, more in 0u64..1_000, refusals in 0u32..20, extra in 0u32..5,
        ) {
            let away = Duration::from_millis(away * 10);
            let w = spread_window(away, refusals);
            prop_assert!(w <= MAX_SPREAD_REFUSED);
            prop_assert!(spread_window(away + Duration::from_millis(more), refusals) >= w);
            prop_assert!(spread_window(away, refusals + extra) >= w);
            prop_assert_eq!(away <= SHORT_OUTAGE, w.is_zero());
        }

        /// Whatever refusals and answers come, the rate stays between the lowest floor
        /// (or the bucket's own rate, if lower) and its ceiling.
        #[test]
        fn the_rate_stays_between_floor_and_ceiling(
            rate in 0.1f64..200.0,
            events in proptest::collection::vec((any::<bool>(), 0u64..5_000), 1..200),
        ) {
            let mut bucket = TokenBucket::new(rate, 10, Duration::ZERO);
            let mut now = Duration::ZERO;
            for (refused, step) in events {
                now += Duration::from_millis(step);
                if refused { bucket.refused(now, Duration::ZERO) } else { bucket.answered(now) }
                prop_assert!(bucket.rate() <= rate + 1e-9);
                prop_assert!(bucket.rate() >= MIN_FLOOR.min(rate) - 1e-9);
            }
        }

        /// However the calls are spread, no more than burst + rate × elapsed tokens are
        /// handed out without waiting, and waits never exceed the queue's length / rate.
        #[test]
        fn never_exceeds_rate(
            rate in 1.0f64..200.0,
            burst in 1u32..50,
            steps in proptest::collection::vec(0u64..50_000, 1..300),
        ) {
            let mut bucket = TokenBucket::new(rate, burst, Duration::ZERO);
            let mut now = Duration::ZERO;
            let mut due = Vec::new();
            for (i, step) in steps.iter().enumerate() {
                now += Duration::from_micros(*step);
                let at = now + bucket.take(now).unwrap_or_default();
                due.push(at);
                let tokens = f64::from(burst) + at.as_secs_f64() * rate;
                prop_assert!((i + 1) as f64 <= tokens + 1e-6);
            }
            prop_assert!(due.windows(2).all(|w| w[0] <= w[1] + Duration::from_nanos(1)));
        }
    }
}
