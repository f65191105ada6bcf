//! B9 pressure: memory use crosses the eviction threshold → the eviction starts. The
//! real `outpost` binary (against the external test containerd) with a test API server;
//! per sample, an agent started with `--eviction-hard memory.available<T`, T set 256 MiB
//! below what is available when the sample starts (the machine is shared: a fixed T
//! would drift), and a BestEffort API pod that, once told to, writes into an emptyDir
//! `medium: Memory` until it is evicted.
//!
//! The crossing is observed by the bench, reading memory.available as kubelet computes
//! it (MemTotal less the root memory cgroup's working set) every millisecond; the
//! eviction's start is the agent's `evicting pod` log line (its timestamp). Target
//! (BENCHMARKS.md): p99 < 1 s (kubelet's housekeeping polls every 10 s).

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use outpost_tests::agent::Agent;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::pod as local_pod;
use serde_json::{Value, json};

use crate::Options;
use crate::report::{Entry, Stats};

const NODE: &str = "edge-1";
const TARGET_P99_MS: f64 = 1000.0;
/// How far below the memory available at the start of a sample the threshold sits.
const MARGIN: u64 = 256 << 20;
/// A hang is an error, not a slow sample.
const PATIENCE: Duration = Duration::from_secs(60);
/// Samples whose threshold was crossed before the pod wrote (other sessions' memory)
/// are taken again, this many times at most.
const RETRIES: usize = 5;

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let samples = if options.quick { 3 } else { 10 };
    let api = ApiNode::try_new().map_err(|what| anyhow::anyhow!("B9 needs {what}"))?;
    if !Path::new(ROOT).join("memory.usage_in_bytes").exists() {
        bail!("B9 needs the cgroup v1 memory controller at {ROOT} (to observe the crossing)");
    }
    let mut latencies = Vec::with_capacity(samples);
    let mut retried = 0;
    let mut i = 0;
    while latencies.len() < samples {
        i += 1;
        match sample(&api, i)? {
            Some(latency) => latencies.push(latency),
            None if retried < RETRIES => retried += 1,
            None => bail!(
                "memory kept moving under the threshold before the pod wrote ({RETRIES} retries)"
            ),
        }
    }
    let stats = Stats::millis(&latencies);
    Ok(vec![
        Entry::new(
            "B9",
            "pressure: memory.available crosses the threshold → eviction started",
            "ms",
            stats,
        )
        .p99_below(TARGET_P99_MS, "p99 < 1 s")
        .detail("samples", latencies.len())
        .detail("retried", retried)
        .detail("detection", "cgroup v1 memory threshold eventfd + PSI"),
    ])
}

/// One agent, one hog: the latency, or `None` when the threshold was met before the
/// hog began to write.
fn sample(api: &ApiNode, i: usize) -> anyhow::Result<Option<Duration>> {
    let threshold = available()?.saturating_sub(MARGIN);
    let flag = format!("memory.available<{threshold}");
    let agent = api.start(&["--eviction-hard", &flag]);
    let name = format!("b9-hog-{i}");
    let go = api.node.path(&format!("{name}-go"));
    std::fs::create_dir_all(&go)?;
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(hog(&name, &go))?;
    let uid =
        api.server.create_pod(&pod).context("create the hog")?.metadata.uid.unwrap_or_default();
    let result = (|| -> anyhow::Result<Option<Duration>> {
        wait_running(&agent, &name)?;
        if available()? < threshold {
            return Ok(None);
        }
        std::fs::write(go.join("go"), "")?;
        let crossed = crossing(threshold)?;
        let started = eviction_started(&agent)?;
        Ok(Some(started.duration_since(crossed).unwrap_or_default()))
    })();
    let teardown = teardown(api, &agent, &name, &uid);
    agent.stop();
    let latency = result?;
    teardown?;
    Ok(latency)
}

fn hog(name: &str, go: &Path) -> Value {
    let script = "while [ ! -e /w/go ]; do sleep 0.05; done; i=0; while [ $i -lt 48 ]; do \
                  dd if=/dev/zero of=/data/f$i bs=1M count=32 2>/dev/null; i=$((i+1)); done; \
                  sleep 3600";
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "hog",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", script],
                "volumeMounts": [
                    {"name": "data", "mountPath": "/data"},
                    {"name": "w", "mountPath": "/w"},
                ],
            }],
            "volumes": [
                {"name": "data", "emptyDir": {"medium": "Memory"}},
                {"name": "w", "hostPath": {"path": go.to_string_lossy(), "type": "Directory"}},
            ],
        },
    })
}

/// The root memory cgroup (v1).
const ROOT: &str = "/sys/fs/cgroup/memory";

/// memory.available as kubelet computes it: MemTotal less the root cgroup's working set.
fn available() -> anyhow::Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    let total = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
        .context("MemTotal")?
        * 1024;
    let root = Path::new(ROOT);
    let usage: u64 = std::fs::read_to_string(root.join("memory.usage_in_bytes"))?.trim().parse()?;
    let stat = std::fs::read_to_string(root.join("memory.stat"))?;
    let inactive = stat
        .lines()
        .find_map(|l| l.strip_prefix("total_inactive_file "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    Ok(total.saturating_sub(usage.saturating_sub(inactive)))
}

/// Reads memory.available every millisecond until it is below `threshold`; when.
fn crossing(threshold: u64) -> anyhow::Result<SystemTime> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if available()? < threshold {
            return Ok(SystemTime::now());
        }
        if Instant::now() > deadline {
            bail!("memory.available never went below {threshold}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn wait_running(agent: &Agent, name: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let pod = local_pod(agent, name);
        if pod
            .as_ref()
            .is_some_and(|p| p["status"]["containerStatuses"][0]["state"]["running"].is_object())
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the hog never ran: {pod:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// When the agent logged `evicting pod` (its log line's timestamp).
fn eviction_started(agent: &Agent) -> anyhow::Result<SystemTime> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(line) = agent.log().lines().find(|l| l.contains("evicting pod")) {
            let stamp = line.split_whitespace().next().unwrap_or_default();
            let at: jiff::Timestamp =
                stamp.parse().with_context(|| format!("log time {stamp:?}"))?;
            return Ok(SystemTime::from(at));
        }
        if Instant::now() > deadline {
            bail!("the agent never evicted the hog");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Deletes the hog in the server and waits until the agent removed it (its memory-backed
/// emptyDir with it).
fn teardown(api: &ApiNode, agent: &Agent, name: &str, uid: &str) -> anyhow::Result<()> {
    api.server.delete_pod("default", name).context("delete the hog")?;
    let deadline = Instant::now() + PATIENCE;
    while local_pod(agent, name).is_some() || !api.node.leftovers(uid).is_empty() {
        if Instant::now() > deadline {
            bail!("the hog was not removed: {:?}", api.node.leftovers(uid));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
