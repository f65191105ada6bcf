//! CPU rates from cumulative readings, as cAdvisor's housekeeping derives
//! `usageNanoCores`: a rate needs two readings of a cgroup's CPU time. Outpost takes no
//! readings on a timer (an idle node with no scraper spends no CPU on it): the reading
//! each scrape takes is kept per cgroup, and the next scrape at least [`MIN_WINDOW`]
//! later computes the rate over the window between them. A scrape sooner than that
//! (two scrapers close together) gets the last rate computed. The first scrape of a
//! cgroup has no rate. The cache is bounded: a cgroup not read for [`TTL`] is dropped,
//! and past [`MAX_ENTRIES`] the least recently read goes first. Pure: times are given.

use std::collections::HashMap;
use std::time::Duration;

/// The shortest window a rate is computed over: shorter ones are mostly noise (the
/// kernel's CPU time moves in scheduler ticks).
pub const MIN_WINDOW: Duration = Duration::from_secs(1);
/// A cgroup not read for this long is forgotten (its container is gone, or nobody
/// scrapes); its next reading starts anew.
pub const TTL: Duration = Duration::from_secs(10 * 60);
/// The most cgroups remembered: a few hundred containers fit many times over, at some
/// 80 bytes each plus the key.
pub const MAX_ENTRIES: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The reading the next rate is computed from: (when, cumulative nanoseconds).
    base: (Duration, u64),
    /// The last rate computed, in nanocores.
    rate: Option<u64>,
    /// When the cgroup was last read.
    seen: Duration,
}

/// The previous reading of each cgroup, by key (its cgroup path).
#[derive(Debug, Default)]
pub struct CpuRates {
    entries: HashMap<String, Entry>,
}

impl CpuRates {
    /// Records that cgroup `key` had used `cumulative_ns` of CPU at `now` (a monotonic
    /// time) and returns its rate in nanocores, if one is known.
    pub fn observe(&mut self, key: &str, cumulative_ns: u64, now: Duration) -> Option<u64> {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.seen = now.max(entry.seen);
            let (at, base) = entry.base;
            if cumulative_ns < base || now < at {
                // The counter went back (a new cgroup under the same name): start anew.
                *entry = Entry { base: (now, cumulative_ns), rate: None, seen: now };
                return None;
            }
            let window = now - at;
            if window >= MIN_WINDOW {
                let used = u128::from(cumulative_ns - base);
                let rate = used * 1_000_000_000 / window.as_nanos();
                entry.rate = Some(u64::try_from(rate).unwrap_or(u64::MAX));
                entry.base = (now, cumulative_ns);
            }
            return entry.rate;
        }
        if self.entries.len() >= MAX_ENTRIES
            && let Some(oldest) =
                self.entries.iter().min_by_key(|(_, e)| e.seen).map(|(k, _)| k.clone())
        {
            self.entries.remove(&oldest);
        }
        let entry = Entry { base: (now, cumulative_ns), rate: None, seen: now };
        self.entries.insert(key.to_owned(), entry);
        None
    }

    /// Forgets the cgroups not read within [`TTL`] before `now`.
    pub fn prune(&mut self, now: Duration) {
        self.entries.retain(|_, e| now.saturating_sub(e.seen) < TTL);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn n2_first_reading_has_no_rate_the_second_has_the_windows() {
        let mut rates = CpuRates::default();
        assert_eq!(rates.observe("a", 1_000_000_000, 10 * S), None);
        // Half a core over two seconds.
        assert_eq!(rates.observe("a", 2_000_000_000, 12 * S), Some(500_000_000));
        // Too soon: the last rate, the base kept.
        assert_eq!(rates.observe("a", 2_100_000_000, 12 * S + S / 10), Some(500_000_000));
        // Two cores over one second from the base at 12 s.
        assert_eq!(rates.observe("a", 4_000_000_000, 13 * S), Some(2_000_000_000));
    }

    #[test]
    fn n2_a_counter_that_goes_back_starts_anew() {
        let mut rates = CpuRates::default();
        rates.observe("a", 5_000, Duration::ZERO);
        assert_eq!(rates.observe("a", 1_000, 5 * S), None);
        assert_eq!(rates.observe("a", 1_000 + 2_000_000_000, 7 * S), Some(1_000_000_000));
    }

    #[test]
    fn n2_unread_cgroups_are_forgotten_and_the_cache_is_bounded() {
        let mut rates = CpuRates::default();
        rates.observe("old", 1, Duration::ZERO);
        rates.observe("new", 1, TTL);
        rates.prune(TTL);
        assert_eq!(rates.len(), 1);
        for i in 0..MAX_ENTRIES + 10 {
            rates.observe(&format!("c{i}"), 1, TTL + Duration::from_millis(i as u64));
        }
        assert_eq!(rates.len(), MAX_ENTRIES);
        // The least recently read went first: "new" was read before all of them.
        assert!(rates.observe("new", 2, 2 * TTL).is_none());
    }

    proptest! {
        /// N2: whatever the readings, a rate is the CPU used over a window of at least
        /// MIN_WINDOW, never more than the time since the first reading allows.
        #[test]
        fn n2_rates_match_some_window(
            steps in proptest::collection::vec((0u64..4_000_000_000, 0u64..3_000), 1..40)
        ) {
            let mut rates = CpuRates::default();
            let (mut ns, mut ms) = (0u64, 0u64);
            let mut readings = vec![(0u64, 0u64)];
            rates.observe("k", 0, Duration::ZERO);
            for (used, elapsed) in steps {
                ns += used;
                ms += elapsed;
                readings.push((ms, ns));
                if let Some(rate) = rates.observe("k", ns, Duration::from_millis(ms)) {
                    let fits = readings.iter().any(|(a_ms, a_ns)| {
                        readings.iter().any(|(b_ms, b_ns)| {
                            b_ms >= a_ms && b_ms - a_ms >= 1_000 && {
                                let r = u128::from(b_ns - a_ns) * 1_000_000_000
                                    / (u128::from(b_ms - a_ms) * 1_000_000);
                                r == u128::from(rate)
                            }
                        })
                    });
                    prop_assert!(fits, "rate {rate} matches no window");
                }
            }
        }
    }
}
