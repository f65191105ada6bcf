//! The least-recently-used map client-go's correlator keeps its per-object and per-group
//! state in (`golang-lru` of a fixed size): what is forgotten starts over when seen again.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Arc;

/// Each key is kept once, shared by the map and the recency order (B5: the keys are the
/// involved objects' names, per pod).
#[derive(Debug)]
pub(super) struct Lru<K, V> {
    capacity: usize,
    entries: HashMap<Arc<K>, (V, u64)>,
    recency: BTreeMap<u64, Arc<K>>,
    clock: u64,
}

impl<K: Eq + Hash, V> Lru<K, V> {
    /// At least one entry.
    pub(super) fn new(capacity: usize) -> Lru<K, V> {
        Lru {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            recency: BTreeMap::new(),
            clock: 0,
        }
    }

    /// The value of `key` (made by `make` if it is not there), now the most recently
    /// used; the least recently used beyond the capacity are forgotten.
    pub(super) fn touch(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        self.clock += 1;
        let key = match self.entries.get_key_value(&key) {
            Some((kept, _)) => kept.clone(),
            None => {
                while self.entries.len() >= self.capacity {
                    let Some((_, oldest)) = self.recency.pop_first() else { break };
                    self.entries.remove(&oldest);
                }
                Arc::new(key)
            }
        };
        self.recency.insert(self.clock, key.clone());
        let (value, touched) = self.entries.entry(key).or_insert_with(|| (make(), 0));
        self.recency.remove(touched);
        *touched = self.clock;
        value
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_is_forgotten_first() {
        let mut lru = Lru::new(2);
        *lru.touch("a", || 0) += 1;
        *lru.touch("b", || 0) += 1;
        *lru.touch("a", || 0) += 1;
        *lru.touch("c", || 0) += 1;
        assert_eq!(lru.len(), 2);
        assert_eq!(*lru.touch("a", || 0), 2, "a was used last but one: kept");
        assert_eq!(*lru.touch("b", || 0), 0, "b was the least recent: forgotten");
    }
}
