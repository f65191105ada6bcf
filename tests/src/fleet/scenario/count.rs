//! Counting a fleet's requests second by second: the test API server's counts by verb
//! and resource, sampled on a one-second tick and diffed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::apiserver::TestApiServer;

const SECOND: Duration = Duration::from_secs(1);

/// Requests by (verb, resource), as [`TestApiServer::requests`] keys them.
pub type ByVerb = BTreeMap<(String, String), u64>;

/// The requests of each second since [`PerSecond::start`], by verb and resource.
#[derive(Debug)]
pub struct PerSecond {
    /// When the next second ends.
    next: Instant,
    last: ByVerb,
    seconds: Vec<ByVerb>,
}

impl PerSecond {
    /// Starts counting now (the server's counts so far are the baseline).
    pub fn start(server: &TestApiServer) -> PerSecond {
        let next = Instant::now() + SECOND;
        PerSecond { next, last: server.requests(), seconds: Vec::new() }
    }

    /// Records the seconds that ended since the last call (call it more often than once
    /// a second: a late call puts a missed second's requests in the next).
    pub fn sample(&mut self, server: &TestApiServer) {
        while Instant::now() >= self.next {
            self.record(server);
            self.next += SECOND;
        }
    }

    /// Waits until the next second ends and records it.
    pub async fn tick(&mut self, server: &TestApiServer) {
        tokio::time::sleep_until(self.next.into()).await;
        self.sample(server);
    }

    fn record(&mut self, server: &TestApiServer) {
        let now = server.requests();
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
