//! O2 restart: the agent restarts with 50 API pods checkpointed and the API server
//! unreachable → all 50 merged again (dry run: the merge's ADD deltas printed).
//!
//! Each sample spawns `outpost run --dry-run` afresh and times from the spawn to the
//! 50th ADD on its stdout: process start, kubeconfig, checkpoint read and checksum,
//! decode, merge. The checkpoint is made by a real first run against the test API
//! server, which is then cut, so the agent's list fails while it replays. Not a
//! BENCHMARKS.md figure with a target: the sources issue asks for it in its closing note.
//! (With containerd, "until all are running" waits for the runtime issue.)

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Pod;
use outpost_tests::agent::Agent;
use outpost_tests::apiserver::TestApiServer;

use crate::Options;
use crate::report::{Entry, Stats};

const PODS: usize = 50;
const NODE: &str = "edge-1";

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let rt = tokio::runtime::Runtime::new().context("cannot start a tokio runtime")?;
    let server = rt.block_on(TestApiServer::start()).context("test API server")?;
    let dir = tempfile::tempdir().context("temp dir")?;
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests)?;
    let kubeconfig = server.node_kubeconfig(dir.path(), "edge-1")?;
    let state = dir.path().join("state");
    for i in 0..PODS {
        server.create_pod(&pod(&format!("app-{i:02}"))).context("create pod")?;
    }
    let args = [
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
        "--state-dir".as_ref(),
        state.as_os_str(),
    ];
    let first = Agent::start_args(&manifests, &args);
    adds(&first).context("first run")?;
    first.stop();
    rt.block_on(server.cut());

    let samples = if options.quick { 5 } else { 20 };
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        let agent = Agent::start_args(&manifests, &args);
        adds(&agent)?;
        times.push(start.elapsed());
        agent.stop();
    }
    Ok(vec![
        Entry::new(
            "O2",
            "restart: 50 checkpointed API pods, API server unreachable → all merged (dry run)",
            "ms",
            Stats::millis(&times),
        )
        .target("reported (no target)", true)
        .detail("pods", PODS),
    ])
}

/// Waits for the 50 ADDs of one run.
fn adds(agent: &Agent) -> anyhow::Result<()> {
    for n in 0..PODS {
        let delta = agent
            .delta_within(Duration::from_secs(60))
            .with_context(|| format!("only {n} of {PODS} pods came back"))?;
        ensure!(delta["op"] == "ADD" && delta["source"] == "api", "unexpected delta {delta}");
    }
    Ok(())
}

fn pod(name: &str) -> Pod {
    let value = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default" },
        "spec": { "nodeName": NODE, "containers": [{ "name": "main", "image": "busybox:1" }] },
    });
    serde_json::from_value(value).unwrap_or_default()
}
