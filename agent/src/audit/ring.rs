//! A bounded log: the newest `capacity` items, oldest first. No IO, no locking; the
//! [`super::ManifestAudit`] handle puts it behind a mutex.

use std::collections::VecDeque;

/// The newest `capacity` items pushed, in push order, and how many older ones were dropped.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    capacity: usize,
    items: VecDeque<T>,
    dropped: u64,
}

impl<T> Ring<T> {
    /// A ring keeping at most `capacity` items (at least one).
    pub fn new(capacity: usize) -> Ring<T> {
        let capacity = capacity.max(1);
        Ring { capacity, items: VecDeque::with_capacity(capacity.min(64)), dropped: 0 }
    }

    /// Appends `item`, dropping the oldest one when full.
    pub fn push(&mut self, item: T) {
        if self.items.len() == self.capacity {
            self.items.pop_front();
            self.dropped += 1;
        }
        self.items.push_back(item);
    }

    /// Oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator + '_ {
        self.items.iter()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many items were pushed out to make room.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Ring;

    #[test]
    fn a_zero_capacity_still_keeps_the_newest_item() {
        let mut ring = Ring::new(0);
        ring.push(1);
        ring.push(2);
        assert_eq!(ring.iter().copied().collect::<Vec<_>>(), [2]);
        assert_eq!((ring.capacity(), ring.dropped()), (1, 1));
    }

    proptest! {
        /// Whatever is pushed, the ring holds exactly the last `capacity` items in push
        /// order, and counts the rest as dropped.
        #[test]
        fn keeps_the_newest_in_order(capacity in 1usize..20, pushes in proptest::collection::vec(any::<u16>(), 0..100)) {
            let mut ring = Ring::new(capacity);
            for (i, item) in pushes.iter().enumerate() {
                ring.push(*item);
                prop_assert!(ring.len() <= capacity);
                prop_assert_eq!(ring.len(), (i + 1).min(capacity));
            }
            let kept: Vec<u16> = ring.iter().copied().collect();
            let start = pushes.len().saturating_sub(capacity);
            prop_assert_eq!(&kept[..], &pushes[start..]);
            prop_assert_eq!(ring.dropped(), start as u64);
            prop_assert_eq!(ring.is_empty(), pushes.is_empty());
        }
    }
}
