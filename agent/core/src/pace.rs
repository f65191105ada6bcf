//! A token bucket, as a value: the caller supplies the clock, so the policy is a pure
//! function. It paces the agent's writes to the API server (kubelet's client QPS and
//! burst), so that a backlog sent after a reconnect is spread out instead of a burst.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    /// Tokens added per second.
    rate: f64,
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
        TokenBucket { rate, burst, tokens: burst, last: now }
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

    proptest! {
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
