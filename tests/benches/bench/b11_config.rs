//! B11 config: the real `outpost` binary (against the external test containerd) with a
//! test API server, one API pod mounting a ConfigMap. Each sample updates the ConfigMap
//! in the server and times until the file in the container (read through the
//! container's root, `/proc/<pid>/root`, every millisecond) holds the new value: the
//! watch's event, the volume's rewrite (kubelet's atomic writer) and the symlink swap.
//!
//! Target (BENCHMARKS.md): p99 < 5 ms (kubelet: up to its sync period plus its cache TTL,
//! about a minute). The pod is deleted at the end, and the agent must leave nothing of it.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::pod as local_pod;
use serde_json::{Value, json};

use crate::Options;
use crate::report::{Entry, Stats};

const NODE: &str = "edge-1";
const TARGET_P99_MS: f64 = 5.0;
/// A hang is an error, not a slow sample.
const PATIENCE: Duration = Duration::from_secs(60);

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let reps = if options.quick { 10 } else { 30 };
    let api = ApiNode::try_new().map_err(|what| anyhow::anyhow!("B11 needs {what}"))?;
    let agent = api.start(&[]);
    let server = &api.server;
    server.create(config_map("v0")).context("create the ConfigMap")?;
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod())?;
    let uid = server.create_pod(&pod).context("create the pod")?.metadata.uid.unwrap_or_default();
    let result = (|| {
        let pid = wait_for_pid(&api, &agent)?;
        let file = format!("/proc/{pid}/root/etc/config/value");
        wait_for(&file, "v0")?;
        let mut samples = Vec::with_capacity(reps);
        for i in 1..=reps {
            let value = format!("v{i}");
            let mut edited = server.get("configmaps", Some("default"), "bench-config")?;
            edited["data"]["value"] = json!(value);
            let began = Instant::now();
            server.update(edited).context("update the ConfigMap")?;
            wait_for(&file, &value)?;
            samples.push(began.elapsed());
        }
        Ok::<_, anyhow::Error>(samples)
    })();
    let teardown = teardown(&api, &agent, &uid);
    agent.stop();
    let samples = result?;
    teardown?;
    let stats = Stats::millis(&samples);
    let met = stats.p99 < TARGET_P99_MS;
    Ok(vec![
        Entry::new(
            "B11",
            "config: a referenced ConfigMap changes → the file in the container",
            "ms",
            stats,
        )
        .target("p99 < 5 ms", met)
        .detail("samples", samples.len()),
    ])
}

fn config_map(value: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bench-config", "namespace": "default"},
        "data": {"value": value},
    })
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "config-reader", "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
                "volumeMounts": [{"name": "config", "mountPath": "/etc/config"}],
            }],
            "volumes": [{"name": "config", "configMap": {"name": "bench-config"}}],
        },
    })
}

/// The host PID of the pod's container, once it runs.
fn wait_for_pid(api: &ApiNode, agent: &outpost_tests::agent::Agent) -> anyhow::Result<i32> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let status = local_pod(agent, "config-reader");
        let container = status.as_ref().map(|p| &p["status"]["containerStatuses"][0]);
        if let Some(container) = container.filter(|c| c["state"]["running"].is_object()) {
            let id = outpost_tests::workload::container_id(container);
            if let Some(pid) = outpost_tests::workload::task_pid(&api.node, &id) {
                return Ok(pid);
            }
        }
        if Instant::now() > deadline {
            bail!("the pod never ran: {status:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `file` every millisecond until it holds `value`.
fn wait_for(file: &str, value: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + PATIENCE;
    while std::fs::read_to_string(file).ok().as_deref() != Some(value) {
        if Instant::now() > deadline {
            bail!("{file} never held {value:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Deletes the pod in the server and waits until the agent removed it and left nothing.
fn teardown(api: &ApiNode, agent: &outpost_tests::agent::Agent, uid: &str) -> anyhow::Result<()> {
    api.server.delete_pod("default", "config-reader").context("delete the pod")?;
    let deadline = Instant::now() + PATIENCE;
    while local_pod(agent, "config-reader").is_some() || !api.node.leftovers(uid).is_empty() {
        if Instant::now() > deadline {
            bail!("the pod was not removed: {:?}", api.node.leftovers(uid));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
