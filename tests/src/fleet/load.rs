//! The test API server's capacity (B13's harness): how many requests a second it serves
//! on this machine when many nodes write at once, as a fleet does after an outage. The
//! fleet's figures mean something only while the server keeps up with the nodes; at
//! 1,000 nodes the debug build served about 290 a second and the Leases timed out.
//!
//! `nodes` nodes, each with its Node, its Lease and `pods_per_node` bound pods, and two
//! watches open (its pods, by `spec.nodeName`, and its Node, by `metadata.name`) that
//! every write is matched against; then `clients` connections, each writing for its
//! share of the nodes in turn what a returning node writes: its Lease (an update from
//! the copy it holds), its Node's status (a merge patch), each pod's status (a merge
//! patch) and an Event per pod. The requests are the model's client's (client-go's
//! shape, JSON), over plain HTTP, in the same process: what the clients cost counts
//! against the figure, so it is a floor of the server's own rate.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::kubelet::client::{self, Client};
use super::node_name;
use super::scenario::{BOOKMARK_INTERVAL, api_pod, pod_names};
use crate::apiserver::TestApiServer;

/// What to load the server with.
#[derive(Debug, Clone)]
pub struct Load {
    pub nodes: usize,
    pub pods_per_node: usize,
    /// Connections writing at once.
    pub clients: usize,
    /// How long the rate is measured, after a warm-up of a tenth of it.
    pub duration: Duration,
}

/// Why the capacity could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot start the test API server: {0}")]
    Server(#[source] crate::apiserver::Error),
    #[error("cannot set up node {node}: {source}")]
    Setup {
        node: String,
        #[source]
        source: Box<client::Error>,
    },
    #[error("cannot create the API pod {pod}: {reason}")]
    CreatePod { pod: String, reason: String },
}

/// What the server served.
#[derive(Debug, Clone, Default)]
pub struct Capacity {
    pub seconds: f64,
    /// Answered requests by what they were ("update leases", ...).
    pub served: BTreeMap<&'static str, u64>,
    /// Requests that failed (any error; a conflict is the only expected one).
    pub failed: u64,
    /// Watches open during the load.
    pub watches: usize,
}

impl Capacity {
    pub fn total(&self) -> u64 {
        self.served.values().sum()
    }

    /// Requests served per second.
    pub fn per_second(&self) -> f64 {
        self.total() as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

const KINDS: [&str; 4] =
    ["update leases", "patch nodes/status", "patch pods/status", "create events"];

/// Measures the capacity of a test API server of its own, set up as the fleet's.
pub async fn measure(load: &Load) -> Result<Capacity, Error> {
    let server = TestApiServer::builder()
        .tls()
        .bookmark_interval(BOOKMARK_INTERVAL)
        .start()
        .await
        .map_err(Error::Server)?;
    let stop = CancellationToken::new();
    let result = run(&server, load, &stop).await;
    stop.cancel();
    result
}

async fn run(
    server: &TestApiServer,
    load: &Load,
    stop: &CancellationToken,
) -> Result<Capacity, Error> {
    let config = server.client_config().map_err(Error::Server)?;
    let setup =
        |node: &str, source| Error::Setup { node: node.to_owned(), source: Box::new(source) };
    let mut leases = Vec::with_capacity(load.nodes);
    let admin = Client::new(&config, stop.clone()).map_err(|e| setup("(admin)", e))?;
    for index in 1..=load.nodes {
        let name = node_name(index);
        let node = json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": name } });
        admin.create("/api/v1/nodes", &node).await.map_err(|e| setup(&name, e))?;
        leases.push(admin.create(LEASES, &lease(&name)).await.map_err(|e| setup(&name, e))?);
        for pod in pod_names(&name, load.pods_per_node) {
            server
                .create(api_pod(&pod, &name))
                .map_err(|error| Error::CreatePod { pod, reason: error.to_string() })?;
        }
    }
    let watches = open_watches(&config, load.nodes, stop)?;
    server.wait_for_watchers("pods", load.nodes).await;

    let counts: Arc<[AtomicU64; 4]> = Arc::new(Default::default());
    let failed = Arc::new(AtomicU64::new(0));
    let clients = load.clients.clamp(1, load.nodes.max(1));
    let mut shares: Vec<Vec<(String, Value)>> = vec![Vec::new(); clients];
    for (index, lease) in leases.into_iter().enumerate() {
        shares[index % clients].push((node_name(index + 1), lease));
    }
    let mut tasks = Vec::new();
    for share in shares {
        let client = Client::new(&config, stop.clone()).map_err(|e| setup("(writer)", e))?;
        let writer = Writer {
            client,
            nodes: share,
            pods_per_node: load.pods_per_node,
            counts: counts.clone(),
            failed: failed.clone(),
        };
        tasks.push(tokio::spawn(writer.run(stop.clone())));
    }
    tokio::time::sleep(load.duration / 10).await;
    let before = snapshot(&counts, &failed);
    let start = Instant::now();
    tokio::time::sleep(load.duration).await;
    let after = snapshot(&counts, &failed);
    let seconds = start.elapsed().as_secs_f64();
    stop.cancel();
    for task in tasks.into_iter().chain(watches) {
        let _ = task.await;
    }
    let served = KINDS.iter().zip(after.0.iter().zip(before.0)).map(|(k, (a, b))| (*k, a - b));
    Ok(Capacity {
        seconds,
        served: served.collect(),
        failed: after.1 - before.1,
        watches: 2 * load.nodes,
    })
}

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

fn lease(node: &str) -> Value {
    let (_, micro) = client::now();
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": { "name": node, "namespace": "kube-node-lease" },
        "spec": { "holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": micro },
    })
}

fn snapshot(counts: &[AtomicU64; 4], failed: &AtomicU64) -> ([u64; 4], u64) {
    (counts.each_ref().map(|c| c.load(Ordering::Relaxed)), failed.load(Ordering::Relaxed))
}

/// Each node's pods and Node watches, drained until stopped (their own connections).
fn open_watches(
    config: &kube::Config,
    nodes: usize,
    stop: &CancellationToken,
) -> Result<Vec<tokio::task::JoinHandle<()>>, Error> {
    let mut tasks = Vec::with_capacity(2 * nodes);
    for index in 1..=nodes {
        let name = node_name(index);
        let client = Client::new(config, stop.clone())
            .map_err(|source| Error::Setup { node: name.clone(), source: Box::new(source) })?;
        let paths = [
            ("/api/v1/pods", format!("spec.nodeName={name}")),
            ("/api/v1/nodes", format!("metadata.name={name}")),
        ];
        for (path, selector) in paths {
            let query = [
                ("watch", "true"),
                ("fieldSelector", selector.as_str()),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", "3600"),
            ];
            let path = client::with_query(path, &query);
            let (client, stop) = (client.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let Ok(events) = client.watch(&path).await else { return };
                let mut events = std::pin::pin!(events.take_until(stop.cancelled_owned()));
                while events.next().await.is_some() {}
            }));
        }
    }
    Ok(tasks)
}

/// One connection writing for its nodes in turn.
struct Writer {
    client: Client,
    /// Each node's name and the Lease it last wrote.
    nodes: Vec<(String, Value)>,
    pods_per_node: usize,
    counts: Arc<[AtomicU64; 4]>,
    failed: Arc<AtomicU64>,
}

impl Writer {
    async fn run(mut self, stop: CancellationToken) {
        let mut round = 0u64;
        while !stop.is_cancelled() {
            round += 1;
            for at in 0..self.nodes.len() {
                self.node(at, round).await;
            }
        }
    }

    /// What node `at` writes when it returns, in its order.
    async fn node(&mut self, at: usize, round: u64) {
        let (heartbeat, micro) = client::now();
        let (name, held) = &mut self.nodes[at];
        let name = name.clone();
        held["spec"]["renewTime"] = json!(micro);
        let path = format!("{LEASES}/{name}");
        match self.client.update(&path, held).await {
            Ok(lease) => {
                *held = lease;
                self.served(0);
            }
            Err(_) => self.fail(),
        }
        let status = json!({ "status": { "conditions": [
            { "type": "Ready", "status": "True", "reason": "KubeletReady",
              "lastHeartbeatTime": heartbeat, "lastTransitionTime": heartbeat },
        ] } });
        let path = format!("/api/v1/nodes/{name}/status");
        let answer = self.client.merge_patch(&path, &status).await;
        self.count(1, answer);
        for pod in pod_names(&name, self.pods_per_node) {
            let status = json!({ "status": {
                "phase": "Running",
                "containerStatuses": [{
                    "name": "main", "image": "registry.example/app:1", "imageID": "",
                    "ready": true, "started": true, "restartCount": round,
                    "state": { "running": { "startedAt": heartbeat } },
                }],
            } });
            let path = format!("/api/v1/namespaces/default/pods/{pod}/status");
            let answer = self.client.merge_patch(&path, &status).await;
            self.count(2, answer);
            let event = json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": { "name": format!("{pod}.{round:x}"), "namespace": "default" },
                "involvedObject": { "kind": "Pod", "namespace": "default", "name": pod },
                "reason": "Started", "message": "Started container main", "type": "Normal",
                "source": { "component": "kubelet", "host": name },
                "firstTimestamp": heartbeat, "lastTimestamp": heartbeat, "count": 1,
            });
            let answer = self.client.create("/api/v1/namespaces/default/events", &event).await;
            self.count(3, answer);
        }
    }

    fn count(&self, kind: usize, answer: Result<Value, client::Error>) {
        match answer {
            Ok(_) => self.served(kind),
            Err(_) => self.fail(),
        }
    }

    fn served(&self, kind: usize) {
        self.counts[kind].fetch_add(1, Ordering::Relaxed);
    }

    fn fail(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }
}
