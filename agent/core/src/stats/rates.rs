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
mod tests;
