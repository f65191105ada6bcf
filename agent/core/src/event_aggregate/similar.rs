//! client-go's `EventAggregator`: events about one object with the same type and reason
//! but different messages (a probe's output, an exit code) are each an Event of their
//! own until [`SIMILAR_MAX`] different messages came within [`SIMILAR_INTERVAL`] of
//! each other. From then on a new message is recorded as one Event per group, its
//! message prefixed [`COMBINED_PREFIX`], whose `count` grows; a message already among
//! the group's recent ones goes on as its own series. A group quiet for longer than the
//! interval starts over.
//!
//! The group is client-go's aggregate key less what is the same for every event of one
//! node (source, reporting controller and instance): the involved object (not its field
//! path), the type and the reason.

use std::collections::VecDeque;
use std::time::Duration;

use super::lru::Lru;
use super::{EventKey, EventType, ObjectKey};

/// Different messages in one group before a new one is combined
/// (client-go's `defaultAggregateMaxEvents`).
pub const SIMILAR_MAX: usize = 10;
/// How long a group remembers its messages after its last event
/// (`defaultAggregateIntervalInSeconds`).
pub const SIMILAR_INTERVAL: Duration = Duration::from_secs(600);
/// The message prefix of a combined Event (client-go's `EventAggregatorByReasonMessageFunc`).
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Group {
    object: ObjectKey,
    kind: EventType,
    reason: String,
}

#[derive(Debug)]
struct Record {
    /// The group's recent different messages, oldest first (fewer than [`SIMILAR_MAX`]).
    messages: VecDeque<String>,
    /// When the group last saw an event (monotonic).
    last: Duration,
    /// The combined Event's key, once the group combined (fixed until it starts over,
    /// so that later combined events repeat the same Event).
    combined: Option<EventKey>,
}

/// The groups of the most recently seen events (an LRU of `capacity`).
#[derive(Debug)]
pub struct SimilarEvents {
    records: Lru<Group, Record>,
}

impl SimilarEvents {
    pub fn new(capacity: usize) -> SimilarEvents {
        SimilarEvents { records: Lru::new(capacity) }
    }

    /// The key `key` is recorded under at `now` (a monotonic reading): itself, or its
    /// group's combined Event.
    pub fn aggregate(&mut self, key: EventKey, now: Duration) -> EventKey {
        let group =
            Group { object: key.object.clone(), kind: key.kind, reason: key.reason.clone() };
        let record = self.records.touch(group, || Record {
            messages: VecDeque::new(),
            last: now,
            combined: None,
        });
        if now.saturating_sub(record.last) > SIMILAR_INTERVAL {
            record.messages.clear();
            record.combined = None;
        }
        record.last = record.last.max(now);
        let known = record.messages.contains(&key.message);
        if known || record.messages.len() + 1 < SIMILAR_MAX {
            if !known {
                record.messages.push_back(key.message.clone());
            }
            key
        } else {
            // The tenth different message: combined, and the oldest forgotten so the
            // group keeps fewer than the maximum (client-go pops one too).
            record.messages.pop_front();
            record.messages.push_back(key.message.clone());
            record
                .combined
                .get_or_insert_with(|| {
                    let message = format!("{COMBINED_PREFIX}{}", key.message);
                    EventKey::new(key.object, key.field_path, key.kind, &key.reason, message)
                })
                .clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    fn key(name: &str, reason: &str, message: &str) -> EventKey {
        let object = ObjectKey {
            kind: "Pod".into(),
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        };
        EventKey::new(object, String::new(), EventType::Warning, reason, message.into())
    }

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn the_tenth_different_message_is_combined_and_later_ones_repeat_it() {
        let mut similar = SimilarEvents::new(100);
        for i in 0..9 {
            let k = key("web", "Unhealthy", &format!("Liveness probe failed: {i}"));
            assert_eq!(similar.aggregate(k.clone(), S(i)), k, "message {i} is its own");
        }
        let tenth = similar.aggregate(key("web", "Unhealthy", "Liveness probe failed: 9"), S(9));
        assert_eq!(tenth.message, "(combined from similar events): Liveness probe failed: 9");
        let eleventh =
            similar.aggregate(key("web", "Unhealthy", "Liveness probe failed: x"), S(10));
        assert_eq!(eleventh, tenth, "one combined Event per group");
        // A message still among the recent ones goes on as its own series.
        let recent = key("web", "Unhealthy", "Liveness probe failed: 8");
        assert_eq!(similar.aggregate(recent.clone(), S(11)), recent);
        // Another reason, or another object, is another group.
        let other = key("web", "BackOff", "Liveness probe failed: y");
        assert_eq!(similar.aggregate(other.clone(), S(12)), other);
        let other = key("db", "Unhealthy", "Liveness probe failed: y");
        assert_eq!(similar.aggregate(other.clone(), S(12)), other);
    }

    #[test]
    fn a_group_quiet_past_the_interval_starts_over() {
        let mut similar = SimilarEvents::new(100);
        for i in 0..9 {
            similar.aggregate(key("web", "Unhealthy", &format!("{i}")), S(i));
        }
        let later = S(8) + SIMILAR_INTERVAL + S(1);
        let k = key("web", "Unhealthy", "new");
        assert_eq!(similar.aggregate(k.clone(), later), k);
    }

    #[test]
    fn forgotten_groups_start_over() {
        let mut similar = SimilarEvents::new(2);
        for i in 0..9 {
            similar.aggregate(key("web", "Unhealthy", &format!("{i}")), S(i));
        }
        similar.aggregate(key("a", "Unhealthy", "x"), S(9));
        similar.aggregate(key("b", "Unhealthy", "x"), S(9));
        let k = key("web", "Unhealthy", "new");
        assert_eq!(similar.aggregate(k.clone(), S(10)), k, "web was forgotten");
        assert!(similar.records.len() <= 2);
    }

    proptest! {
        /// Within one interval (no group resets), nothing of a group is combined before
        /// nine different messages came, and every combined event of a group is the
        /// same Event, about the same object, type and reason.
        #[test]
        fn a_group_combines_after_nine_messages_into_one_event(
            events in proptest::collection::vec((0u8..3, 0u8..30, 0u64..2_000), 1..300),
        ) {
            let mut similar = SimilarEvents::new(100);
            let mut now = Duration::ZERO;
            let mut first_nine: HashMap<String, Vec<String>> = HashMap::new();
            let mut combined: HashMap<String, EventKey> = HashMap::new();
            for (object, message, step) in events {
                // 300 steps of under 2 s: within one interval.
                now += Duration::from_millis(step);
                let name = format!("pod-{object}");
                let k = key(&name, "Unhealthy", &format!("m{message}"));
                let out = similar.aggregate(k.clone(), now);
                prop_assert_eq!((&out.object, &out.reason, out.kind), (&k.object, &k.reason, k.kind));
                let firsts = first_nine.entry(name.clone()).or_default();
                if firsts.len() < SIMILAR_MAX - 1 && !firsts.contains(&k.message) {
                    firsts.push(k.message.clone());
                }
                if out.message.starts_with(COMBINED_PREFIX) {
                    prop_assert_eq!(firsts.len(), SIMILAR_MAX - 1, "combined before nine messages");
                    prop_assert_eq!(combined.entry(name).or_insert_with(|| out.clone()), &out);
                } else {
                    prop_assert_eq!(out, k);
                }
            }
        }
    }
}
