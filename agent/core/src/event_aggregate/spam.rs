//! client-go's event spam filter: a token bucket per involved object, so that one object
//! flapping cannot flood the API server with its events while others still get theirs.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::ObjectKey;
use crate::pace::TokenBucket;

/// Events an object may record at once (client-go's `defaultSpamBurst`).
pub const SPAM_BURST: u32 = 25;
/// One more event per object every 5 minutes after the burst (`defaultSpamQPS` 1/300).
pub const SPAM_REFILL: Duration = Duration::from_secs(300);

/// The buckets of the most recently seen objects (an LRU of `capacity`): an object
/// forgotten starts again with a full burst, as in client-go.
#[derive(Debug)]
pub struct SpamFilter {
    capacity: usize,
    buckets: HashMap<ObjectKey, (TokenBucket, u64)>,
    recency: BTreeMap<u64, ObjectKey>,
    clock: u64,
}

impl SpamFilter {
    pub fn new(capacity: usize) -> SpamFilter {
        SpamFilter {
            capacity: capacity.max(1),
            buckets: HashMap::new(),
            recency: BTreeMap::new(),
            clock: 0,
        }
    }

    /// Whether `object` may record an event at `now` (a monotonic clock reading).
    pub fn allow(&mut self, object: &ObjectKey, now: Duration) -> bool {
        self.clock += 1;
        let rate = 1.0 / SPAM_REFILL.as_secs_f64();
        let (bucket, touched) = self
            .buckets
            .entry(object.clone())
            .or_insert_with(|| (TokenBucket::new(rate, SPAM_BURST, now), 0));
        self.recency.remove(touched);
        *touched = self.clock;
        let allowed = bucket.try_take(now);
        self.recency.insert(self.clock, object.clone());
        while self.buckets.len() > self.capacity {
            let Some((_, oldest)) = self.recency.pop_first() else { break };
            self.buckets.remove(&oldest);
        }
        allowed
    }

    /// Objects remembered.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}
