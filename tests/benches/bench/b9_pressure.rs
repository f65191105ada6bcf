//! B9 pressure: memory use crosses the eviction threshold → the eviction starts. The
//! real `outpost` binary (against the external test containerd) with a test API server.
//! The test node's pods get 1 GiB (all the rest `--system-reserved`, node allocatable
//! enforced on its pods cgroup) and `--eviction-hard memory.available<256Mi`, so the
//! threshold is kubelet's `allocatableMemory.available<256Mi` on the node's own pods
//! cgroup, whatever else the machine runs. Per sample, a BestEffort API pod that, once
//! told to, writes into an emptyDir `medium: Memory` 32 MiB at a time until evicted.
//!
//! The crossing is observed by the bench, reading the pods cgroup's working set (usage
//! less inactive file cache) every millisecond; the eviction's start is the agent's
//! `evicting pod` log line (its timestamp). Target (BENCHMARKS.md): p99 < 5 ms (kubelet's
//! housekeeping polls every 10 s).

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
const TARGET_P99_MS: f64 = 5.0;
/// What the test node's pods may use (its node allocatable memory).
const PODS_MEMORY: u64 = 1 << 30;
/// The hard threshold (`allocatableMemory.available<256Mi`).
const THRESHOLD: u64 = 256 << 20;
/// A hang is an error, not a slow sample.
const PATIENCE: Duration = Duration::from_secs(60);

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let samples = if options.quick { 3 } else { 10 };
    let api = ApiNode::try_new().map_err(|what| anyhow::anyhow!("B9 needs {what}"))?;
    let pods_cgroup = Path::new(ROOT).join(api.node.kubepods().trim_start_matches('/'));
    if !Path::new(ROOT).join("memory.usage_in_bytes").exists() {
        bail!("B9 needs the cgroup v1 memory controller at {ROOT} (to observe the crossing)");
    }
    let reserved = format!("memory={}", mem_total()?.saturating_sub(PODS_MEMORY));
    let threshold = format!("memory.available<{THRESHOLD}");
    let agent = api.start(&[
        "--system-reserved",
        &reserved,
        "--enforce-node-allocatable",
        "pods",
        "--eviction-hard",
        &threshold,
    ]);
    let result = (|| -> anyhow::Result<Vec<Duration>> {
        let mut latencies = Vec::with_capacity(samples);
        for i in 0..samples {
            latencies.push(sample(&api, &agent, &pods_cgroup, i)?);
        }
        Ok(latencies)
    })();
    agent.stop();
    let latencies = result?;
    let stats = Stats::millis(&latencies);
    Ok(vec![
        Entry::new(
            "B9",
            "pressure: the pods' memory crosses the eviction threshold → eviction started",
            "ms",
            stats,
        )
        .p99_below(TARGET_P99_MS, "p99 < 5 ms")
        .detail("samples", latencies.len())
        .detail("signal", "allocatableMemory.available<256Mi of 1Gi")
        .detail("detection", "cgroup v1 memory threshold eventfd"),
    ])
}

/// One hog: from its pods cgroup crossing the threshold to the eviction's start.
fn sample(api: &ApiNode, agent: &Agent, pods_cgroup: &Path, i: usize) -> anyhow::Result<Duration> {
    let name = format!("b9-hog-{i}");
    let go = api.node.path(&format!("{name}-go"));
    std::fs::create_dir_all(&go)?;
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(hog(&name, &go))?;
    let uid =
        api.server.create_pod(&pod).context("create the hog")?.metadata.uid.unwrap_or_default();
    let evictions = agent.log().matches("evicting pod").count();
    let result = (|| -> anyhow::Result<Duration> {
        wait_running(agent, &name)?;
        let limit = limit(pods_cgroup)?;
        let at = limit.saturating_sub(THRESHOLD);
        if working_set(pods_cgroup)? >= at {
            bail!("the pods cgroup is past the threshold before the hog wrote");
        }
        std::fs::write(go.join("go"), "")?;
        let crossed = crossing(pods_cgroup, at)?;
        let started = eviction_started(agent, evictions)?;
        Ok(started.duration_since(crossed).unwrap_or_default())
    })();
    let teardown = teardown(api, agent, &name, &uid);
    let latency = result?;
    teardown?;
    Ok(latency)
}

fn hog(name: &str, go: &Path) -> Value {
    let script = "while [ ! -e /w/go ]; do sleep 0.05; done; i=0; while [ $i -lt 36 ]; do \
                  dd if=/dev/zero of=/data/f$i bs=1M count=32 2>/dev/null; i=$((i+1)); sleep 0.05; done; \
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

/// The memory controller's hierarchy (v1).
const ROOT: &str = "/sys/fs/cgroup/memory";

fn mem_total() -> anyhow::Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    let kib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
        .context("MemTotal")?;
    Ok(kib * 1024)
}

fn limit(cgroup: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(cgroup.join("memory.limit_in_bytes"))?;
    Ok(text.trim().parse()?)
}

/// The cgroup's working set: usage less the inactive file cache, as kubelet counts it.
fn working_set(cgroup: &Path) -> anyhow::Result<u64> {
    let usage: u64 =
        std::fs::read_to_string(cgroup.join("memory.usage_in_bytes"))?.trim().parse()?;
    let stat = std::fs::read_to_string(cgroup.join("memory.stat"))?;
    let inactive = stat
        .lines()
        .find_map(|l| l.strip_prefix("total_inactive_file "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    Ok(usage.saturating_sub(inactive))
}

/// Reads the working set every millisecond until it reaches `at`; when.
fn crossing(cgroup: &Path, at: u64) -> anyhow::Result<SystemTime> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if working_set(cgroup)? >= at {
            return Ok(SystemTime::now());
        }
        if Instant::now() > deadline {
            bail!("the pods cgroup's working set never reached {at}");
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

/// When the agent logged the `evicting pod` after the first `before` (its log line's
/// timestamp).
fn eviction_started(agent: &Agent, before: usize) -> anyhow::Result<SystemTime> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(line) = agent.log().lines().filter(|l| l.contains("evicting pod")).nth(before) {
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
