//! Node-pressure eviction end to end (E1–E2), with real pods against the test API
//! server: a memory hog in a BestEffort API pod is evicted (Failed/Evicted, kubelet's
//! message naming memory, the Warning Evicted Event, MemoryPressure on the Node,
//! `outpost_evictions_total`) while a static pod beside it is not; a pod filling a
//! small tmpfs state dir through its emptyDir is evicted for nodefs and the Node shows
//! DiskPressure, the writer ranked before a quiet pod beside it.
//!
//! The thresholds are the test node's own, so that the tests run safely on a shared
//! machine whatever the other tests do: the memory test reserves all but 600 MiB for the
//! system and enforces node allocatable on the node's pods cgroup (the signal is then
//! `allocatableMemory.available`); the disk test mounts a 64 MiB tmpfs state dir.

use outpost_tests::needs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use outpost_tests::agent::Agent;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{eventually, wait_pod};
use serde_json::{Value, json};

const NODE: &str = "edge-1";
const LONG: Duration = Duration::from_secs(120);
/// Runs until SIGTERM.
const SERVE: &str = "trap 'exit 0' TERM; while true; do sleep 0.1; done";

/// A node with real pods and a test API server; the agent is dropped first.
struct Cluster {
    agent: Agent,
    _state: Option<Tmpfs>,
    api: ApiNode,
}

impl Cluster {
    fn start(api: ApiNode, state: Option<Tmpfs>, extra: &[&str]) -> Cluster {
        let agent = api.start(extra);
        api.rt.block_on(async {
            tokio::time::timeout(LONG, api.server.wait_for_watchers("pods", 1)).await.unwrap();
        });
        Cluster { agent, _state: state, api }
    }

    fn create(&self, name: &str, script: &str, volume: Value) -> Pod {
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": name, "namespace": "default" },
            "spec": {
                "nodeName": NODE,
                "terminationGracePeriodSeconds": 5,
                "restartPolicy": "Never",
                "volumes": [volume],
                "containers": [{
                    "name": name,
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", script],
                    "volumeMounts": [{ "name": "data", "mountPath": "/data" }],
                }],
            },
        });
        self.api.server.create_pod(&serde_json::from_value(pod).unwrap()).unwrap()
    }

    fn get(&self, name: &str) -> Option<Pod> {
        self.api.server.get_pod("default", name).ok()
    }

    /// Waits until the server has pod `name` Failed with reason Evicted; returns it.
    fn evicted(&self, name: &str) -> Pod {
        eventually(&format!("pod {name} evicted in the API server"), LONG, || {
            self.get(name).and_then(|p| p.status).is_some_and(|s| {
                s.phase.as_deref() == Some("Failed") && s.reason.as_deref() == Some("Evicted")
            })
        });
        self.get(name).unwrap()
    }

    /// The Events about pod `name` with `reason`, as the API server has them.
    fn events(&self, name: &str, reason: &str) -> Vec<Value> {
        let all = self.api.server.list("events", Some("default")).unwrap();
        all.into_iter()
            .filter(|e| e["involvedObject"]["name"] == name && e["reason"] == reason)
            .collect()
    }

    /// Whether the Node's condition `kind` is True.
    fn condition(&self, kind: &str) -> bool {
        let node = self.api.server.get_typed::<KubeNode>(None, NODE).ok();
        let conditions = node.and_then(|n| n.status).and_then(|s| s.conditions).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == kind && c.status == "True")
    }

    fn metric(&self, signal: &str) -> Option<String> {
        let (_, body) = self.agent.get("/metrics");
        let prefix = format!("outpost_evictions_total{{signal=\"{signal}\"}} ");
        body.lines().find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
    }
}

fn running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
}

fn message(pod: &Pod) -> String {
    pod.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default()
}

/// MemTotal, bytes.
fn mem_total() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
        .unwrap();
    kib * 1024
}

/// The test node's pods get 600 MiB: all but that is system-reserved, and node
/// allocatable is enforced on its pods cgroup.
const PODS_MEMORY: u64 = 600 << 20;

// E1, E2: the pods' working set within 100Mi of node allocatable
// (allocatableMemory.available, kubelet's memory.available<100Mi copied to the pods
// cgroup) evicts the BestEffort API pod using the memory, never the static pod beside it.
#[needs(pods)]
#[test]
fn e1_e2_a_memory_hog_is_evicted_and_the_static_pod_beside_it_is_not() {
    let api = ApiNode::new();
    let reserved = format!("memory={}", mem_total() - PODS_MEMORY);
    api.node.put("keeper.yaml", &static_pod("keeper"));
    let c = Cluster::start(
        api,
        None,
        &["--system-reserved", &reserved, "--enforce-node-allocatable", "pods"],
    );
    wait_pod(&c.agent, "keeper-edge-1", LONG, running);
    // 50 MiB at a time, up to 700 MiB: past 500 MiB the threshold is met (past 600 MiB
    // the kernel would kill it instead).
    let hog = "i=0; while [ $i -lt 14 ]; do \
               dd if=/dev/zero of=/data/f$i bs=1M count=50 2>/dev/null; i=$((i+1)); sleep 0.2; \
               done; sleep 3600";
    c.create("hog", hog, json!({ "name": "data", "emptyDir": { "medium": "Memory" } }));
    let evicted = c.evicted("hog");
    let text = message(&evicted);
    assert!(
        text.starts_with(
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
        ),
        "{text}"
    );
    assert!(text.contains("Container hog was using "), "{text}");
    assert!(text.ends_with(", request is 0, has larger consumption of memory. "), "{text}");
    let events = c.events("hog", "Evicted");
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["type"], "Warning");
    assert_eq!(events[0]["message"].as_str(), Some(text.as_str()));
    eventually("MemoryPressure on the Node", LONG, || c.condition("MemoryPressure"));
    assert_eq!(c.metric("allocatableMemory.available").as_deref(), Some("1"));
    // The static pod is never a victim, even with the pressure still on.
    let keeper = wait_pod(&c.agent, "keeper-edge-1", LONG, running);
    assert_eq!(keeper["status"]["containerStatuses"][0]["restartCount"], 0);
    assert!(c.events("keeper-edge-1", "Evicted").is_empty());
}

// E1, E2: nodefs below its threshold evicts the pod that fills it, and the Node shows
// DiskPressure.
#[needs(pods)]
#[test]
fn e1_e2_a_pod_filling_the_state_dir_is_evicted_with_disk_pressure() {
    let api = ApiNode::new();
    let state = Tmpfs::mount(&api.node.path("state"), "64m");
    let c = Cluster::start(
        api,
        Some(state),
        &[
            "--eviction-hard",
            "nodefs.available<50%",
            "--eviction-pressure-transition-period",
            "10s",
        ],
    );
    c.create("quiet", SERVE, json!({ "name": "data", "emptyDir": {} }));
    wait_pod(&c.agent, "quiet", LONG, running);
    assert!(!c.condition("DiskPressure"));
    let fill = "dd if=/dev/zero of=/data/fill bs=1M count=40 2>/dev/null; sleep 3600";
    c.create("writer", fill, json!({ "name": "data", "emptyDir": {} }));
    let evicted = c.evicted("writer");
    let text = message(&evicted);
    assert!(
        text.starts_with(
            "The node was low on resource: ephemeral-storage. Threshold quantity: 32Mi, available: "
        ),
        "{text}"
    );
    assert_eq!(c.events("writer", "Evicted").len(), 1);
    eventually("DiskPressure on the Node", LONG, || c.condition("DiskPressure"));
    assert!(c.metric("nodefs.available").is_some_and(|n| n != "0"));
    // The writer ranks first: the first pod evicted, and the quiet one not before it.
    let log = c.agent.log();
    let first = log.lines().find(|l| l.contains("evicting pod")).unwrap_or_default();
    assert!(first.contains("writer"), "{first}");
    // Once it stopped, its emptyDir is given back (kubelet tears down a terminated pod's
    // volumes): the pressure goes, and the quiet pod is not evicted for what it filled.
    let uid = evicted.metadata.uid.clone().unwrap_or_default();
    let empty_dirs =
        c.api.node.path("state/pods").join(&uid).join("volumes/kubernetes.io~empty-dir");
    eventually("the writer's emptyDir removed", LONG, || !empty_dirs.exists());
    eventually("DiskPressure gone", LONG, || !c.condition("DiskPressure"));
    let quiet = c.get("quiet").and_then(|p| p.status).and_then(|s| s.phase);
    let log = c.agent.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("evict") || l.contains("emptyDir") || l.contains("pressure"))
        .collect();
    assert_eq!(quiet.as_deref(), Some("Running"), "the quiet pod stays: {lines:#?}");
}

fn static_pod(name: &str) -> String {
    let script = serde_json::to_string(SERVE).unwrap();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
    )
}

/// A tmpfs mounted by the test, unmounted when dropped.
#[derive(Debug)]
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
            .arg(at)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount tmpfs: {}", String::from_utf8_lossy(&out.stderr));
        Tmpfs(at.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("--lazy").arg(&self.0).output();
    }
}
