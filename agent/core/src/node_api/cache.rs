//! A cache of review answers: each entry is fresh for its own time-to-live and then
//! stale, and a stale entry is still returned as such ([`Lookup::Stale`]), for the caller
//! to use when the API server cannot be asked. The cache holds at most `capacity`
//! entries: inserting into a full cache drops the stale entries, and if none is stale,
//! the one that expires first. Times are offsets from any fixed origin (a monotonic
//! clock's), so the cache does no IO and a test drives it with plain values.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

/// What the cache knows of a key at a given time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup<V> {
    /// Within its time-to-live.
    Fresh(V),
    /// Past its time-to-live: usable only when a new answer cannot be had.
    Stale(V),
    Missing,
}

/// Answers by key, each with the time it expires.
#[derive(Debug, Clone)]
pub struct Cache<K, V> {
    capacity: usize,
    entries: HashMap<K, (V, Duration)>,
}

impl<K: Eq + Hash + Clone, V: Clone> Cache<K, V> {
    /// An empty cache of at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Cache<K, V> {
        Cache { capacity: capacity.max(1), entries: HashMap::new() }
    }

    /// What is known of `key` at `now`.
    pub fn get(&self, key: &K, now: Duration) -> Lookup<V> {
        match self.entries.get(key) {
            Some((value, expires)) if now < *expires => Lookup::Fresh(value.clone()),
            Some((value, _)) => Lookup::Stale(value.clone()),
            None => Lookup::Missing,
        }
    }

    /// Keeps `value` for `key`, fresh from `now` for `ttl` (a zero `ttl`: not kept).
    pub fn insert(&mut self, key: K, value: V, ttl: Duration, now: Duration) {
        if ttl.is_zero() {
            return;
        }
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, expires)| now < *expires);
            if self.entries.len() >= self.capacity {
                let first = self.entries.iter().min_by_key(|(_, (_, expires))| *expires);
                if let Some(first) = first.map(|(key, _)| key.clone()) {
                    self.entries.remove(&first);
                }
            }
        }
        self.entries.insert(key, (value, now.saturating_add(ttl)));
    }

    /// Entries held (fresh and stale).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
