//! Flow control as a client sees kube-apiserver's API Priority and Fairness: past a
//! configured rate the server answers 429 `TooManyRequests`, a `metav1.Status` with
//! `details.retryAfterSeconds` and a `Retry-After` header, and serves nothing. The rate
//! is a token bucket ([`Throttle`]: requests per second and a burst) over every
//! authenticated request, watches included (APF charges a watch for its start).
//!
//! Simplified, on purpose: one bucket for every user (no priority levels, flow schemas,
//! queues or shuffle sharding: a request past the rate is refused at once rather than
//! queued), and `Retry-After` is the whole seconds until the next token (at least 1; the
//! real server says 1 unless configured otherwise).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A rate the server serves at most: `rate` requests per second on average, up to
/// `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttle {
    rate: f64,
    burst: f64,
}

impl Throttle {
    /// `rate` requests per second, with a burst of one second's worth (at least 1).
    pub fn per_second(rate: f64) -> Throttle {
        let rate = rate.max(f64::MIN_POSITIVE);
        Throttle { rate, burst: rate.max(1.0) }
    }

    /// Up to `burst` requests at once (at least 1) before the rate applies.
    pub fn burst(mut self, burst: u32) -> Throttle {
        self.burst = f64::from(burst.max(1));
        self
    }

    /// Requests per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }
}

/// A token bucket: full at the start, one token per request, refilled at the rate.
#[derive(Debug, Clone)]
pub struct Bucket {
    throttle: Throttle,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub fn new(throttle: Throttle, now: Instant) -> Bucket {
        Bucket { throttle, tokens: throttle.burst, at: now }
    }

    /// Takes a token for a request at `now`; refused, how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.throttle.rate).min(self.throttle.burst);
        self.at = self.at.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.throttle.rate))
        }
    }
}

/// The server's flow control: a bucket when throttling, and how many were refused.
#[derive(Debug, Default)]
pub struct FlowControl {
    bucket: Mutex<Option<Bucket>>,
    rejected: std::sync::atomic::AtomicU64,
}

impl FlowControl {
    /// Throttles at `throttle` from now on (a full bucket), or not at all.
    pub fn set(&self, throttle: Option<Throttle>) {
        let bucket = throttle.map(|throttle| Bucket::new(throttle, Instant::now()));
        *self.bucket.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = bucket;
    }

    /// The rate throttled at, if any.
    pub fn throttle(&self) -> Option<Throttle> {
        let bucket = self.bucket.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        bucket.as_ref().map(|bucket| bucket.throttle)
    }

    /// Admits a request now, or says after how many whole seconds (at least 1) to retry.
    pub fn admit(&self) -> Result<(), u64> {
        let mut bucket = self.bucket.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(bucket) = bucket.as_mut() else { return Ok(()) };
        bucket.take(Instant::now()).map_err(|wait| {
            self.rejected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            wait.as_secs_f64().ceil().max(1.0) as u64
        })
    }

    /// Requests refused with 429 since the start (or the last reset).
    pub fn rejected(&self) -> u64 {
        self.rejected.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn reset(&self) {
        self.rejected.store(0, std::sync::atomic::Ordering::Relaxed);
    }
}
