//! client-go's event spam filter: a token bucket per involved object, so that one object
//! flapping cannot flood the API server with its events while others still get theirs.

use std::time::Duration;

use super::ObjectKey;
use super::lru::Lru;
use crate::pace::TokenBucket;

/// Events an object may record at once (client-go's `defaultSpamBurst`).
pub const SPAM_BURST: u32 = 25;
/// One more event per object every 5 minutes after the burst (`defaultSpamQPS` 1/300).
pub const SPAM_REFILL: Duration = Duration::from_secs(300);

/// The buckets of the most recently seen objects (an LRU of `capacity`): an object
/// forgotten starts again with a full burst, as in client-go.
#[derive(Debug)]
pub struct SpamFilter {
    buckets: Lru<ObjectKey, TokenBucket>,
}

impl SpamFilter {
    pub fn new(capacity: usize) -> SpamFilter {
        SpamFilter { buckets: Lru::new(capacity) }
    }

    /// Whether `object` may record an event at `now` (a monotonic clock reading).
    pub fn allow(&mut self, object: &ObjectKey, now: Duration) -> bool {
        let rate = 1.0 / SPAM_REFILL.as_secs_f64();
        let bucket = self.buckets.touch(object.clone(), || TokenBucket::new(rate, SPAM_BURST, now));
        bucket.try_take(now)
    }

    /// Objects remembered.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.len() == 0
    }
}
