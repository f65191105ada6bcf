//! B6 reconnect: 100 API pods, 1,000 status changes while the API server is cut off →
//! the requests sent after the reconnect, and how long until every pod's status in the
//! server is the latest.
//!
//! The agent's library runs in-process: an [`ApiClient`] to the test API server, the
//! API source (its list and watch are what notice the server is back, as in the agent)
//! and every sync task ([`sync::spawn`]), over a snapshot of the 100 pods and a
//! [`StatusStore`] the benchmark writes as the pod workers would. Per sample: statuses
//! are set and synced, the server is cut, 10 rounds of changes are made to every pod
//! (1,000 changes), the server stays cut off for 2 s in all, the counts are reset and
//! the server restored. Reported: the
//! `pods/status` requests per pod after the reconnect (max and mean), the time from the
//! restore to every pod's status being the latest, and its two parts: restore → the
//! reconnect detected (the API source's watch or the lease's probe back), detection →
//! all synced. The 2 s target is held against the second: "synced after reconnect" is
//! the sync's work; how soon a node notices a server that came back is the reconnect
//! backoff's trade-off (a fleet must not probe a recovering server in lockstep), and
//! is reported beside it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodStatus,
};
use outpost::apiserver::{ApiClient, Connectivity, MirrorView, Recorder};
use outpost::checkpoint::Checkpoints;
use outpost::podconfig::{Snapshot, SnapshotHandle};
use outpost::source::api::{self, ApiSource};
use outpost::status::StatusStore;
use outpost::sync;
use outpost_core::pod::{CONFIG_SOURCE, Source};
use outpost_tests::apiserver::TestApiServer;
use serde_json::json;

use crate::Options;
use crate::report::{Entry, Stats};

const PODS: usize = 100;
const ROUNDS: i32 = 10;
const NODE: &str = "edge-1";
/// Targets (BENCHMARKS.md).
const TARGET_REQUESTS_PER_POD: u64 = 2;
const TARGET_SYNCED_MS: f64 = 2000.0;
/// How long the server stays cut off: a short outage. (The client's token bucket, 50
/// requests/s after a burst of 100, refills during any outage this long or longer; the
/// statuses sent before the cut spent it.)
const OUTAGE: Duration = Duration::from_secs(2);
/// A hang is an error, not a slow sample.
const PATIENCE: Duration = Duration::from_secs(60);

struct Sample {
    max_per_pod: u64,
    mean_per_pod: f64,
    other_requests: u64,
    detected: Duration,
    synced_after_detection: Duration,
    synced: Duration,
}

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let rt = tokio::runtime::Runtime::new().context("cannot start a tokio runtime")?;
    let reps = if options.quick { 3 } else { 10 };
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        samples.push(rt.block_on(sample())?);
    }
    let max = samples.iter().map(|s| s.max_per_pod).max().unwrap_or_default();
    let mean = samples.iter().map(|s| s.mean_per_pod).sum::<f64>() / samples.len() as f64;
    let others = samples.iter().map(|s| s.other_requests).max().unwrap_or_default();
    let per_pod = Stats::of(samples.iter().map(|s| s.max_per_pod as f64).collect());
    let ms = |f: fn(&Sample) -> Duration| Stats::millis(&samples.iter().map(f).collect::<Vec<_>>());
    let synced = ms(|s| s.synced);
    let name = "reconnect: 100 pods, 1,000 status changes offline";
    Ok(vec![
        Entry::new("B6", format!("{name}: pods/status requests per pod (max)"), "req/pod", per_pod)
            .target("<= 2 requests per pod", max <= TARGET_REQUESTS_PER_POD)
            .detail("mean_per_pod", (mean * 1000.0).round() / 1000.0)
            .detail("other_requests_after_reconnect_max", others)
            .detail("outage_s", OUTAGE.as_secs()),
        Entry::new(
            "B6",
            format!("{name}: reconnect detected → all synced"),
            "ms",
            ms(|s| s.synced_after_detection),
        )
        .p99_below(TARGET_SYNCED_MS, "p99 < 2 s"),
        Entry::new("B6", format!("{name}: restore → reconnect detected"), "ms", ms(|s| s.detected))
            .target("(not part of the target: the watch's and lease's reconnect backoff)", true),
        Entry::new("B6", format!("{name}: restore → all synced"), "ms", synced)
            .target("(detection + sync)", true),
    ])
}

async fn sample() -> anyhow::Result<Sample> {
    let server = TestApiServer::start().await.context("test API server")?;
    let dir = tempfile::tempdir().context("temp dir")?;
    let kubeconfig = server.kubeconfig(dir.path())?;
    let mut pods = Vec::with_capacity(PODS);
    for i in 0..PODS {
        let created = server.create_pod(&pod(&format!("app-{i:03}"))).context("create pod")?;
        pods.push(Arc::new(created));
    }
    let connectivity = Connectivity::default();
    let client = ApiClient::from_kubeconfig(&kubeconfig, connectivity.clone()).await?;
    let mirrors = MirrorView::default();
    let source = ApiSource::new(api::Config {
        client: client.clone(),
        node_name: NODE.to_owned(),
        checkpoints: Checkpoints::new(&dir.path().join("state")),
        mirrors: mirrors.clone(),
    });
    let drain = tokio::spawn(source.into_stream().for_each(|_| async {}));
    let snapshot = Snapshot {
        pods: pods.iter().map(|p| (Source::Api, stamped(p))).collect(),
        ..Snapshot::default()
    };
    let statuses = StatusStore::default();
    let tasks = sync::spawn(sync::Context {
        client,
        node_name: NODE.to_owned(),
        snapshot: SnapshotHandle::from(snapshot),
        statuses: statuses.clone(),
        mirrors,
        node: tokio::sync::watch::Sender::new(None),
        events: Recorder::default(),
        node_config: sync::node::Config {
            labels: Default::default(),
            taints: Vec::new(),
            node_ip: None,
            kubelet_port: None,
            state_dir: dir.path().join("state"),
            runtime: Arc::new(true.into()),
            runtime_version: Arc::default(),
            shutdown: tokio_util::sync::CancellationToken::new(),
            pressure: tokio::sync::watch::channel(Default::default()).1,
            reservation: Default::default(),
        },
        status_backlog: tokio::sync::watch::Sender::default(),
    });
    let result = measure(&server, &pods, &statuses, &connectivity).await;
    drop(tasks);
    drain.abort();
    result
}

async fn measure(
    server: &TestApiServer,
    pods: &[Arc<Pod>],
    statuses: &StatusStore,
    connectivity: &Connectivity,
) -> anyhow::Result<Sample> {
    let uids: Vec<&str> = pods.iter().filter_map(|p| p.metadata.uid.as_deref()).collect();
    for uid in &uids {
        statuses.set(uid, status(0));
    }
    within(connectivity.wait_reachable(), "the API source's first list").await?;
    within(all_synced(server, 0), "the statuses before the cut").await?;

    server.cut().await;
    let cut = Instant::now();
    within(connectivity.wait_unreachable(), "noticing the cut").await?;
    for round in 1..=ROUNDS {
        for uid in &uids {
            statuses.set(uid, status(round));
        }
    }
    tokio::time::sleep(OUTAGE.saturating_sub(cut.elapsed())).await;
    server.reset_requests();
    server.restore().await?;
    let restored = Instant::now();
    within(connectivity.wait_reachable(), "the reconnect").await?;
    let detected = restored.elapsed();
    within(all_synced(server, ROUNDS), "every pod's latest status").await?;
    let synced = restored.elapsed();

    let per_pod: Vec<u64> = pods
        .iter()
        .map(|p| {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            server.count_object("patch", "pods/status", &format!("default/{name}"))
        })
        .collect();
    let total: u64 = per_pod.iter().sum();
    let all = server.total_requests();
    Ok(Sample {
        max_per_pod: per_pod.iter().copied().max().unwrap_or_default(),
        mean_per_pod: total as f64 / PODS as f64,
        other_requests: all.saturating_sub(total),
        detected,
        synced_after_detection: synced - detected,
        synced,
    })
}

async fn within<F: Future>(future: F, what: &str) -> anyhow::Result<F::Output> {
    match tokio::time::timeout(PATIENCE, future).await {
        Ok(output) => Ok(output),
        Err(_) => bail!("timed out waiting for {what}"),
    }
}

/// Polls the server (in-process, no HTTP) until every pod has the status of `round`.
async fn all_synced(server: &TestApiServer, round: i32) {
    loop {
        let done = server.pods().is_ok_and(|pods| {
            pods.len() == PODS
                && pods.iter().all(|p| {
                    let restarts = p.status.as_ref().and_then(|s| s.container_statuses.as_ref());
                    restarts.and_then(|c| c.first()).is_some_and(|c| c.restart_count == round)
                })
        });
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The status a worker would publish after `round` restarts.
fn status(round: i32) -> PodStatus {
    PodStatus {
        phase: Some("Running".to_owned()),
        container_statuses: Some(vec![ContainerStatus {
            name: "main".to_owned(),
            image: "busybox".to_owned(),
            ready: true,
            restart_count: round,
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]),
        ..PodStatus::default()
    }
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default" },
        "spec": { "nodeName": NODE, "containers": [{ "name": "main", "image": "busybox" }] },
    }))
    .unwrap_or_default()
}

/// The pod as the merge hands it on (source stamped).
fn stamped(pod: &Arc<Pod>) -> Arc<Pod> {
    let mut pod = Pod::clone(pod);
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CONFIG_SOURCE.to_owned(), "api".to_owned());
    Arc::new(pod)
}
