//! Counting a fleet's requests second by second: the test API server's counts by verb
//! and resource, sampled on a one-second tick and diffed. The tick runs in a task of
//! its own ([`PerSecond::spawn`]) where the caller's task is busy between samples (an
//! outage's sync check lists 10,000 pods): a late sample would put two seconds'
//! requests in one and none in the next.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::apiserver::RequestCounts;

const SECOND: Duration = Duration::from_secs(1);

/// Requests by (verb, resource), as [`TestApiServer::requests`] keys them.
pub type ByVerb = BTreeMap<(String, String), u64>;

/// The requests of each second since [`PerSecond::start`], by verb and resource.
#[derive(Debug)]
pub struct PerSecond {
    counts: RequestCounts,
    /// When the next second ends.
    next: Instant,
    last: ByVerb,
    seconds: Vec<ByVerb>,
}

impl PerSecond {
    /// Starts counting now (the server's counts so far are the baseline).
    pub fn start(counts: RequestCounts) -> PerSecond {
        let next = Instant::now() + SECOND;
        let last = counts.requests();
        PerSecond { counts, next, last, seconds: Vec::new() }
    }

    /// Counts from now in a task of its own, until `stop`; the task's result is the
    /// counter, with the seconds that ended before `stop`.
    pub fn spawn(counts: RequestCounts, stop: CancellationToken) -> JoinHandle<PerSecond> {
        let mut counter = PerSecond::start(counts);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return counter,
                    () = counter.tick() => {}
                }
            }
        })
    }

    /// Waits until the next second ends and records the seconds that ended (more than
    /// one only when this tick came late: the first of them then holds their requests).
    pub async fn tick(&mut self) {
        tokio::time::sleep_until(self.next.into()).await;
        while Instant::now() >= self.next {
            self.record();
            self.next += SECOND;
        }
    }

    fn record(&mut self) {
        let now = self.counts.requests();
        let second = now
            .iter()
            .map(|(key, count)| (key.clone(), count - self.last.get(key).copied().unwrap_or(0)))
            .filter(|(_, count)| *count > 0)
            .collect();
        self.seconds.push(second);
        self.last = now;
    }

    /// Each second's total.
    pub fn totals(&self) -> Vec<u64> {
        self.seconds.iter().map(|second| second.values().sum()).collect()
    }

    /// Each second's requests by verb and resource.
    pub fn seconds(&self) -> &[ByVerb] {
        &self.seconds
    }
}

/// This process's resident memory, in KiB (`VmRSS`; 0 when it cannot be read).
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or_default()
}
