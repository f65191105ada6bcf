//! The fleet harness's scenario (B13), shared by `cargo xtask fleet` and the bench's B13:
//! N nodes ([`Client`]: Outpost's hollow nodes or the kubelet-shaped model, both behind
//! [`Nodes`]) on one test API server, P API pods each, then
//!
//! 1. an idle window: requests per second, by verb and resource, bytes, watches, memory;
//! 2. whole-fleet outages ([`outage`]): the server is cut, every API pod's container exits
//!    once on its node meanwhile, the server comes back, and the reconnect is measured
//!    per second from the restore until everything is synced.
//!
//! Flow control (`throttle`) applies from the idle window on: the fleet's start-up is
//! not throttled. The scenario fails only when the fleet does not come up (a node never
//! Ready, a pod never running); what it measures are figures, not pass/fail.

mod count;
mod limits;
pub mod outage;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::kubelet::KubeletModel;
use super::{Fleet, Nodes};
use crate::apiserver::{TestApiServer, Throttle, Transferred};
pub use count::PerSecond;
pub use outage::Outage;

/// How long the fleet may take to come up before the scenario fails.
const START_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot start the test API server: {0}")]
    Server(#[source] crate::apiserver::Error),
    #[error("cannot start the hollow nodes: {0}")]
    Fleet(#[source] super::Error),
    #[error("cannot start the kubelet-shaped client model: {0}")]
    Kubelet(#[source] super::kubelet::Error),
    #[error(transparent)]
    Limits(#[from] limits::Error),
    #[error(
        "{what}: {got} of {want} after {waited:?}; run with OUTPOST_LOG=warn to see the nodes' logs"
    )]
    Timeout { what: &'static str, got: usize, want: usize, waited: Duration },
    #[error("cannot create the API pod {pod}: {reason}")]
    CreatePod { pod: String, reason: String },
    #[error("cannot restore the test API server after an outage: {0}")]
    Restore(#[source] std::io::Error),
    #[error("node {0} ended before the scenario did; run with OUTPOST_LOG=warn to see why")]
    Ended(String),
    #[error("node {node} runs no container main of pod default/{pod} to make exit")]
    Exit { node: String, pod: String },
    #[error("nodes failed when stopped: {0}")]
    Stopped(String),
    #[error("the per-second request counter failed: {0}")]
    Counter(String),
}

/// Which nodes the scenario drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// Outpost's hollow nodes ([`Fleet`]).
    Outpost,
    /// The kubelet-shaped client model (`fleet::kubelet`).
    Kubelet,
}

impl Client {
    pub fn name(self) -> &'static str {
        match self {
            Client::Outpost => "outpost",
            Client::Kubelet => "kubelet model",
        }
    }

    /// The cap of the backoff a node's first write after an outage waits out: Outpost's
    /// Lease probe (`sync::lease`: from 1 s, doubling, up to the renew interval);
    /// kubelet's lease controller retries up to 7 s (`maxBackoff`).
    pub fn backoff_cap(self) -> Duration {
        match self {
            Client::Outpost => outpost::sync::lease::RENEW_INTERVAL,
            Client::Kubelet => Duration::from_secs(7),
        }
    }

    /// `nodes` nodes; Outpost's with `lease_duration_seconds` when given (the model
    /// keeps kubelet's default, 40 s).
    async fn start(
        self,
        server: &TestApiServer,
        nodes: usize,
        lease_duration_seconds: Option<i32>,
    ) -> Result<Box<dyn Nodes>, Error> {
        match self {
            Client::Outpost => {
                let tune = |settings: &mut outpost::config::Settings| {
                    settings.node_lease_duration_seconds = lease_duration_seconds;
                };
                let fleet =
                    Fleet::start_with(server, nodes, "warn", tune).await.map_err(Error::Fleet)?;
                Ok(Box::new(fleet))
            }
            Client::Kubelet => {
                let model = KubeletModel::start(server, nodes).map_err(Error::Kubelet)?;
                Ok(Box::new(model))
            }
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub client: Client,
    pub nodes: usize,
    pub pods_per_node: usize,
    /// After every pod runs, before the idle window: the start-up's last writes.
    pub settle: Duration,
    pub idle: Duration,
    /// Each outage's length, one after the other.
    pub outages: Vec<Duration>,
    /// After everything is synced following an outage, how long the count goes on.
    pub tail: Duration,
    /// Flow control's rate (QPS), from the idle window on.
    pub throttle: Option<f64>,
    /// The test API server's watch history, in events ([`WATCH_CACHE_EVENTS`] when
    /// `None`). One history for every resource: a short one holds only seconds at a
    /// fleet's write rate, and watches that resume later get 410 and list again.
    pub history: Option<usize>,
    /// Outpost's `nodeLeaseDurationSeconds` (kubelet's 40 when `None`): a lever on the
    /// idle rate, the Lease renewed every quarter of it.
    pub lease_duration_seconds: Option<i32>,
}

impl Scenario {
    /// `nodes` nodes of `client`, no pods, a 1-minute idle window, no outage.
    pub fn new(client: Client, nodes: usize) -> Scenario {
        Scenario {
            client,
            nodes,
            pods_per_node: 0,
            settle: Duration::from_secs(15),
            idle: Duration::from_secs(60),
            outages: Vec::new(),
            tail: Duration::from_secs(10),
            throttle: None,
            history: None,
            lease_duration_seconds: None,
        }
    }
}

/// The idle window's figures.
#[derive(Debug, Clone)]
pub struct Idle {
    pub seconds: f64,
    pub requests: BTreeMap<(String, String), u64>,
    pub bytes: BTreeMap<(String, String), Transferred>,
    pub per_second: Vec<u64>,
    /// Open watches by resource at the end.
    pub watches: BTreeMap<String, usize>,
    pub throttled: u64,
}

impl Idle {
    pub fn total(&self) -> u64 {
        self.requests.values().sum()
    }

    /// The whole fleet's requests per second.
    pub fn qps(&self) -> f64 {
        self.total() as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

/// What a scenario measured.
#[derive(Debug, Clone)]
pub struct Figures {
    pub client: Client,
    pub nodes: usize,
    pub pods_per_node: usize,
    pub throttle: Option<f64>,
    /// The test API server's watch history, when not its default.
    pub history: Option<usize>,
    /// Outpost's `nodeLeaseDurationSeconds`, when not kubelet's 40.
    pub lease_duration_seconds: Option<i32>,
    pub ready_after: Duration,
    pub running_after: Duration,
    /// The process's RSS growth over the nodes' start, per node (KiB).
    pub memory_per_node_kib: f64,
    /// What the kernel-watch limits check raised (root only), to say.
    pub raised: Vec<String>,
    pub idle: Idle,
    pub outages: Vec<Outage>,
}

impl Figures {
    pub fn requests_per_node_minute(&self) -> f64 {
        self.idle.total() as f64 / (self.nodes as f64 * self.idle.seconds / 60.0)
    }
}

/// Runs `scenario` on a test API server of its own; `say` is told the progress.
/// The fleet's watch history: kube-apiserver's watch cache grows to hold its
/// resource's events of the last 75 s, up to 102,400 events (`defaultUpperBoundCapacity`);
/// the fleet's server holds as many events of all resources together, the Leases' and
/// Events' among them (the test server's own default, 1,000, is seconds at 1,000 nodes:
/// a watch resumed 20 s after a restore found its version gone and listed again).
pub const WATCH_CACHE_EVENTS: usize = 100 * 1024;

/// How often the fleet's API server sends each watch a BOOKMARK.
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

pub async fn run(scenario: &Scenario, say: &(dyn Fn(String) + Sync)) -> Result<Figures, Error> {
    // Held until the scenario ends: the limits go back to what they were.
    let mut raised = limits::check(scenario.nodes, scenario.client == Client::Outpost)?;
    for line in &raised.lines {
        say(line.clone());
    }
    // kube-apiserver's watch cache sends a watch a BOOKMARK about once a minute (the test
    // server's default of once a second would be 4,000 events a second at 1,000 nodes).
    // HTTPS, as a cluster's: the nodes' clients choose HTTP/2 (one connection a node).
    let builder = TestApiServer::builder()
        .tls()
        .bookmark_interval(BOOKMARK_INTERVAL)
        .history_limit(scenario.history.unwrap_or(WATCH_CACHE_EVENTS));
    let server = builder.start().await.map_err(Error::Server)?;
    let rss_before = count::rss_kib();
    let started = Instant::now();
    let nodes =
        scenario.client.start(&server, scenario.nodes, scenario.lease_duration_seconds).await?;
    let measured = measure(scenario, &server, nodes.as_ref(), started, rss_before, say).await;
    let failures: Vec<String> = nodes.stop().await.into_iter().filter_map(Result::err).collect();
    let mut figures = measured?;
    if !failures.is_empty() {
        return Err(Error::Stopped(failures.join("; ")));
    }
    figures.raised = std::mem::take(&mut raised.lines);
    Ok(figures)
}

async fn measure(
    scenario: &Scenario,
    server: &TestApiServer,
    nodes: &dyn Nodes,
    started: Instant,
    rss_before: u64,
    say: &(dyn Fn(String) + Sync),
) -> Result<Figures, Error> {
    let n = scenario.nodes;
    let client = scenario.client.name();
    let ready =
        || server.list("nodes", None).unwrap_or_default().iter().filter(|n| is_ready(n)).count();
    until("nodes Ready", n, ready, say).await?;
    let ready_after = started.elapsed();
    say(format!("{n} {client} nodes Ready in {:.1} s", ready_after.as_secs_f64()));
    let names = nodes.names();
    for node in &names {
        for pod in pod_names(node, scenario.pods_per_node) {
            server
                .create(api_pod(&pod, node))
                .map_err(|error| Error::CreatePod { pod, reason: error.to_string() })?;
        }
    }
    let pods = n * scenario.pods_per_node;
    until("pods running", pods, || running_pods(server), say).await?;
    let running_after = started.elapsed();
    say(format!("{pods} API pods running {:.1} s after the start", running_after.as_secs_f64()));
    tokio::time::sleep(scenario.settle).await;
    let rss_after = count::rss_kib();
    if let Some(name) = nodes.ended() {
        return Err(Error::Ended(name));
    }
    if let Some(qps) = scenario.throttle {
        server.set_throttle(Some(Throttle::per_second(qps)));
    }

    server.reset_requests();
    let mut counter = PerSecond::start(server.request_counts());
    let begin = Instant::now();
    while begin.elapsed() < scenario.idle {
        counter.tick().await;
    }
    let idle = Idle {
        seconds: begin.elapsed().as_secs_f64(),
        requests: server.requests(),
        bytes: server.bytes(),
        per_second: counter.totals(),
        watches: server.all_watchers().into_iter().filter(|(_, open)| *open > 0).collect(),
        throttled: server.throttled_requests(),
    };
    say(format!(
        "idle window: {:.2} requests per node-minute",
        idle.total() as f64 / (n as f64 * idle.seconds / 60.0)
    ));

    let mut outages = Vec::new();
    for length in &scenario.outages {
        let outage = outage::run(scenario, server, nodes, &names, *length, idle.qps(), say).await?;
        outages.push(outage);
    }
    Ok(Figures {
        client: scenario.client,
        nodes: n,
        pods_per_node: scenario.pods_per_node,
        throttle: scenario.throttle,
        history: scenario.history,
        lease_duration_seconds: scenario.lease_duration_seconds,
        ready_after,
        running_after,
        memory_per_node_kib: rss_after.saturating_sub(rss_before) as f64 / n as f64,
        raised: Vec::new(),
        idle,
        outages,
    })
}

/// The API pods of `node`: `NODE-pod-0`, ...
pub fn pod_names(node: &str, pods_per_node: usize) -> impl Iterator<Item = String> + '_ {
    (0..pods_per_node).map(move |pod| format!("{node}-pod-{pod}"))
}

/// The API pod `name` bound to `node`, as the scenario creates them (one container of
/// an image the hollow runtime and the model take as there).
pub fn api_pod(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": "default" },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Always",
            "containers": [{ "name": "main", "image": "registry.example/app:1" }],
        },
    })
}

fn is_ready(node: &Value) -> bool {
    node.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|conditions| {
        conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn is_running(pod: &Value) -> bool {
    pod.pointer("/status/containerStatuses/0/ready") == Some(&json!(true))
}

fn running_pods(server: &TestApiServer) -> usize {
    server
        .list("pods", Some("default"))
        .unwrap_or_default()
        .iter()
        .filter(|p| is_running(p))
        .count()
}

/// Waits until `count()` reaches `want`, or fails saying `what`; says how far it got
/// every 10 s.
async fn until(
    what: &'static str,
    want: usize,
    count: impl Fn() -> usize,
    say: &(dyn Fn(String) + Sync),
) -> Result<(), Error> {
    let start = Instant::now();
    let mut said = start;
    loop {
        let got = count();
        if got >= want {
            return Ok(());
        }
        if start.elapsed() > START_TIMEOUT {
            return Err(Error::Timeout { what, got, want, waited: START_TIMEOUT });
        }
        if said.elapsed() >= Duration::from_secs(10) {
            say(format!("{what}: {got} of {want} after {:.0} s", start.elapsed().as_secs_f64()));
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests;
