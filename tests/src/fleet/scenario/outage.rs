//! A whole-fleet outage (issue 37, B13): the test API server is cut (every connection
//! aborted, new ones refused), every API pod's container exits once on its node while
//! the server is away (so every pod has a status to write, as in a real outage where
//! things go on at the nodes), and the server comes back after the outage's length.
//!
//! From the restore, per second: the requests by verb and resource, until everything is
//! synced and the last Event written, and a tail after it. Synced: every node's Lease
//! written after the restore and its Ready condition True, and every pod's status in the
//! API showing the restart (its restartCount past the one before the outage, its
//! container ready). The first write of each node after the restore is its Lease's; the
//! slowest node's is set against its backoff's cap ([`super::Client::backoff_cap`]).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::count::{ByVerb, PerSecond};
use super::{Error, Nodes, Scenario, is_ready, pod_names};
use crate::apiserver::TestApiServer;

/// How long after the restore the fleet may take to sync before the count stops (the
/// figures then say what was not synced).
const SYNC_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the sync state is read from the server.
const POLL: Duration = Duration::from_millis(250);
const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The figures of one outage.
#[derive(Debug, Clone)]
pub struct Outage {
    /// How long the server was away.
    pub length: Duration,
    pub nodes: usize,
    pub pods: usize,
    /// The fleet's idle requests per second, measured before.
    pub idle_qps: f64,
    /// Each second's requests from the restore, by verb and resource.
    pub seconds: Vec<ByVerb>,
    /// The whole window's requests (from the restore to the end of the tail).
    pub requests: ByVerb,
    /// 429s from flow control in the window.
    pub throttled: u64,
    /// From the restore until every Lease was written again.
    pub leases_after: Option<Duration>,
    /// From the restore until every node was Ready and its Lease written again.
    pub nodes_after: Option<Duration>,
    /// From the restore until every pod's status showed its restart.
    pub pods_after: Option<Duration>,
    /// The node whose first write after the restore came last, and when.
    pub slowest_first_write: Option<(String, Duration)>,
    pub backoff_cap: Duration,
    /// Nodes whose Node object was written after the restore (its status, mostly).
    pub node_writes: usize,
    /// What was not synced when the count stopped (0 and 0 when all was).
    pub unsynced_nodes: usize,
    pub unsynced_pods: usize,
}

impl Outage {
    /// From the restore until everything was synced.
    pub fn synced_after(&self) -> Option<Duration> {
        Some(self.nodes_after?.max(self.pods_after?))
    }

    pub fn window_seconds(&self) -> f64 {
        self.seconds.len() as f64
    }

    pub fn total(&self) -> u64 {
        self.requests.values().sum()
    }

    /// The busiest second: (seconds after the restore, requests).
    pub fn peak(&self) -> (usize, u64) {
        let totals = self.seconds.iter().map(|second| second.values().sum::<u64>());
        totals
            .enumerate()
            .max_by_key(|(at, count)| (*count, std::cmp::Reverse(*at)))
            .unwrap_or_default()
    }

    /// The requests beyond what the fleet would have sent idle in the same window.
    pub fn beyond_idle(&self) -> f64 {
        (self.total() as f64 - self.idle_qps * self.window_seconds()).max(0.0)
    }

    /// [`Outage::beyond_idle`] without the requests on `resource` (e.g. `events`, which
    /// the kubelet model does not post), as if idle had none of them either.
    pub fn beyond_idle_except(&self, resource: &str) -> f64 {
        let on = |key: &(String, String)| {
            key.1 == resource || key.1.starts_with(&format!("{resource}/"))
        };
        let those: u64 =
            self.requests.iter().filter(|(key, _)| on(key)).map(|(_, count)| count).sum();
        (self.beyond_idle() - those as f64).max(0.0)
    }

    /// The reconnect target: at most 2 requests per pod and 5 per node beyond idle.
    pub fn budget(&self) -> f64 {
        (2 * self.pods + 5 * self.nodes) as f64
    }
}

/// Runs one outage of `length` on the fleet `nodes` (named `names`) on `server`.
pub async fn run(
    scenario: &Scenario,
    server: &TestApiServer,
    nodes: &dyn Nodes,
    names: &[String],
    length: Duration,
    idle_qps: f64,
    say: &(dyn Fn(String) + Sync),
) -> Result<Outage, Error> {
    let restarts_before = restart_counts(server);
    say(format!("outage of {} s: cutting the API server", length.as_secs()));
    server.cut().await;
    let cut = Instant::now();
    for (index, node) in names.iter().enumerate() {
        for pod in pod_names(node, scenario.pods_per_node) {
            if !nodes.exit(index, "default", &pod, "main", 1) {
                return Err(Error::Exit { node: node.clone(), pod });
            }
        }
    }
    tokio::time::sleep(length.saturating_sub(cut.elapsed())).await;

    let version = server.resource_version();
    server.reset_requests();
    server.restore().await.map_err(Error::Restore)?;
    let restored = Instant::now();
    say("API server restored".to_owned());
    let counting = CancellationToken::new();
    let counter = PerSecond::spawn(server.request_counts(), counting.clone());
    let mut first_writes: HashMap<String, Duration> = HashMap::new();
    let (mut leases_after, mut nodes_after, mut pods_after) = (None, None, None);
    let mut said = restored;
    // Events come after the statuses, spread after a long outage: the count goes on
    // until they are in too.
    let events_written = || server.count("create", "events") + server.count("patch", "events");
    let (mut events, mut events_at) = (0, Duration::ZERO);
    let last = loop {
        tokio::time::sleep(POLL).await;
        let since = restored.elapsed();
        let written = events_written();
        if written != events {
            (events, events_at) = (written, since);
        }
        let now = Observed::read(server, names, version, &restarts_before);
        for node in &now.leases {
            first_writes.entry(node.clone()).or_insert(since);
        }
        if leases_after.is_none() && now.leases.len() >= names.len() {
            leases_after = Some(since);
        }
        if nodes_after.is_none() && now.unsynced_nodes == 0 {
            nodes_after = Some(since);
        }
        if pods_after.is_none() && now.unsynced_pods == 0 {
            pods_after = Some(since);
        }
        let synced = nodes_after.zip(pods_after).map(|(n, p)| n.max(p));
        let quiet = synced.map(|at| at.max(events_at) + scenario.tail);
        if quiet.is_some_and(|at| since >= at) || since >= SYNC_TIMEOUT {
            break now;
        }
        if synced.is_none() && said.elapsed() >= Duration::from_secs(10) {
            say(format!(
                "{:.0} s after the restore: {} nodes and {} pods not synced yet",
                since.as_secs_f64(),
                now.unsynced_nodes,
                now.unsynced_pods,
            ));
            said = Instant::now();
        }
    };
    counting.cancel();
    let counter = counter.await.map_err(|e| Error::Counter(e.to_string()))?;
    let slowest_first_write = first_writes.into_iter().max_by_key(|(_, at)| *at);
    Ok(Outage {
        length,
        nodes: names.len(),
        pods: restarts_before.len(),
        idle_qps,
        seconds: counter.seconds().to_vec(),
        requests: server.requests(),
        throttled: server.throttled_requests(),
        leases_after,
        nodes_after,
        pods_after,
        slowest_first_write,
        backoff_cap: scenario.client.backoff_cap(),
        node_writes: last.node_writes,
        unsynced_nodes: last.unsynced_nodes,
        unsynced_pods: last.unsynced_pods,
    })
}

/// The sync state as the server shows it after a restore.
struct Observed {
    /// The nodes whose Lease was written after the restore.
    leases: Vec<String>,
    /// Nodes whose Lease was not written yet or that are not Ready.
    unsynced_nodes: usize,
    /// Pods whose status does not show the restart yet.
    unsynced_pods: usize,
    /// Nodes whose Node object was written after the restore.
    node_writes: usize,
}

impl Observed {
    fn read(
        server: &TestApiServer,
        names: &[String],
        version: u64,
        restarts_before: &BTreeMap<String, (u64, bool)>,
    ) -> Observed {
        let leases = written_since(server.list("leases", Some(LEASE_NAMESPACE)), version);
        let nodes = server.list("nodes", None).unwrap_or_default();
        let node_writes = nodes.iter().filter(|node| version_of(node) > version).count();
        let ready: Vec<&str> =
            nodes.iter().filter(|node| is_ready(node)).filter_map(name_of).collect();
        let unsynced_nodes = names
            .iter()
            .filter(|name| !(leases.contains(*name) && ready.contains(&name.as_str())))
            .count();
        let restarts_now = restart_counts(server);
        let unsynced_pods = restarts_before
            .iter()
            .filter(|(pod, before)| {
                restarts_now.get(*pod).is_none_or(|(count, ready)| *count <= before.0 || !ready)
            })
            .count();
        Observed { leases, unsynced_nodes, unsynced_pods, node_writes }
    }
}

fn name_of(object: &Value) -> Option<&str> {
    object.pointer("/metadata/name").and_then(Value::as_str)
}

fn version_of(object: &Value) -> u64 {
    let version = object.pointer("/metadata/resourceVersion").and_then(Value::as_str);
    version.and_then(|v| v.parse().ok()).unwrap_or_default()
}

/// The names of the objects written after resourceVersion `version`.
fn written_since(
    objects: Result<Vec<Value>, crate::apiserver::ApiError>,
    version: u64,
) -> Vec<String> {
    let objects = objects.unwrap_or_default();
    let written = objects.iter().filter(|object| version_of(object) > version);
    written.filter_map(name_of).map(str::to_owned).collect()
}

/// Each API pod's (restartCount, ready) in the API.
fn restart_counts(server: &TestApiServer) -> BTreeMap<String, (u64, bool)> {
    let pods = server.list("pods", Some("default")).unwrap_or_default();
    pods.iter()
        .filter_map(|pod| {
            let status = pod.pointer("/status/containerStatuses/0");
            let count = status.and_then(|s| s["restartCount"].as_u64()).unwrap_or_default();
            let ready = status.is_some_and(|s| s["ready"] == true);
            Some((name_of(pod)?.to_owned(), (count, ready)))
        })
        .collect()
}
