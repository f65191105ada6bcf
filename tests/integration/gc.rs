//! Garbage collection end to end (G1), on a test [`Node`] whose containerd namespace is
//! its own: image GC frees an unused image and keeps the running pod's; dead containers
//! beyond kubelet's count go with their logs; an emptyDir written past its `sizeLimit`
//! gets its (API) pod evicted with kubelet's message.

use outpost_tests::needs;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use outpost_tests::agent::Agent;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::{BUSYBOX_IMAGE, BUSYBOX_USER_IMAGE, BUSYBOX_USER_OCI};
use outpost_tests::outpost_bin;
use outpost_tests::pods::{Node, container, eventually, wait_pod};
use serde_json::json;

/// Generous: only there so that a broken agent fails instead of hanging.
const LONG: Duration = Duration::from_secs(90);

/// A static pod running `script` in busybox, with `spec` lines (indented by two) before
/// its containers.
fn manifest(name: &str, script: &str, spec: &str) -> String {
    let script = serde_json::to_string(script).unwrap();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n{spec}  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
    )
}

fn images(node: &Node) -> Vec<String> {
    node.ctr(&["images", "list", "--quiet"]).lines().map(str::to_owned).collect()
}

/// The value of the metric line that starts with `name` (0 if absent).
fn metric(agent: &Agent, name: &str) -> f64 {
    let (_, text) = agent.get("/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[needs(pods)]
#[test]
fn g1_image_gc_frees_an_unused_image_and_keeps_the_running_pods() {
    let node = Node::new();
    outpost_tests::workload::import(&node, BUSYBOX_USER_OCI);
    assert!(images(&node).iter().any(|i| i == BUSYBOX_USER_IMAGE), "{:?}", images(&node));
    // Another name of the pod's image is the same image: it stays too.
    node.ctr(&["images", "tag", BUSYBOX_IMAGE, "outpost.test/alias:1"]);
    // The machine's disk is far above 1 %: with these thresholds GC runs, and frees
    // whatever it may.
    node.put(
        "web.yaml",
        &manifest("web", "trap 'exit 0' TERM; while true; do sleep 0.1; done", ""),
    );
    let mut args = node.args();
    for arg in [
        "--image-gc-high-threshold",
        "1",
        "--image-gc-low-threshold",
        "0",
        "--minimum-image-ttl-duration",
        "0s",
    ] {
        args.push(arg.into());
    }
    let agent = Agent::start_pods(&node.manifests(), &args);
    eventually("the unused image is garbage-collected", LONG, || {
        !images(&node).iter().any(|i| i == BUSYBOX_USER_IMAGE)
    });
    let p = wait_pod(&agent, "web-edge-1", LONG, |p| container(p)["state"]["running"].is_object());
    assert_eq!(container(&p)["restartCount"], 0);
    assert!(images(&node).iter().any(|i| i == BUSYBOX_IMAGE), "the pod's image stays");
    assert!(images(&node).iter().any(|i| i == "outpost.test/alias:1"), "under all its names");
    agent.wait_for_log("image GC: removed an unused image");
    let freed = metric(&agent, "outpost_image_gc_freed_bytes_total");
    eprintln!("image GC freed {freed} bytes");
    assert!(freed > 0.0);
    assert_eq!(metric(&agent, "outpost_image_gc_removed_total{reason=\"space\"}"), 1.0);
}

#[needs(pods)]
#[test]
fn g1_dead_containers_beyond_the_count_go_with_their_logs() {
    let node = Node::new();
    // Runs 0, 1 and 2 crash; run 3 stays (the emptyDir counts the runs).
    let script = "n=$(cat /runs/n 2>/dev/null || echo 0); echo $((n+1)) > /runs/n; echo run-$n; \
                  if [ $n -ge 3 ]; then trap 'exit 0' TERM; while true; do sleep 0.1; done; fi; exit 1";
    let volume = "  volumes:\n  - name: runs\n    emptyDir: {}\n";
    let mut yaml = manifest("crash", script, volume);
    yaml.push_str("    volumeMounts:\n    - name: runs\n      mountPath: /runs\n");
    node.put("crash.yaml", &yaml);
    let agent = node.start();
    let p = wait_pod(&agent, "crash-edge-1", LONG, |p| {
        container(p)["restartCount"] == 3 && container(p)["state"]["running"].is_object()
    });
    let uid = p["metadata"]["uid"].as_str().unwrap().to_owned();
    // kubelet's default: one dead instance kept per container, besides the running one.
    let restart_counts = || -> Vec<String> {
        let mut counts: Vec<String> = node
            .containers()
            .iter()
            .filter_map(|id| {
                // Gone since the list: not counted.
                let out = Command::new("ctr")
                    .arg("--address")
                    .arg(&node.socket)
                    .args(["--namespace", &node.namespace, "containers", "info", id])
                    .output()
                    .unwrap();
                let info: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
                Some(info["Labels"]["io.kubernetes.container.restartCount"].as_str()?.to_owned())
            })
            .collect();
        counts.sort();
        counts
    };
    eventually("the older dead containers are removed", LONG, || restart_counts() == ["2", "3"]);
    let logs: PathBuf = node.path("logs").join(format!("default_crash-edge-1_{uid}")).join("main");
    let files = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&logs)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    eventually("the older runs' logs are gone", LONG, || files() == ["2.log", "3.log"]);
    // `logs --previous` still reads the last dead run.
    let out = Command::new(outpost_bin())
        .args(["logs", "default/crash-edge-1", "--previous", "--pod-log-dir"])
        .arg(node.path("logs"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "run-2\n");
    // A new agent counts what the earlier one kept: keeping none, it removes run 2.
    agent.stop();
    let mut args = node.args();
    args.extend(["--maximum-dead-containers-per-container".into(), "0".into()]);
    let agent = Agent::start_pods(&node.manifests(), &args);
    eventually("the earlier run's dead container is removed", LONG, || restart_counts() == ["3"]);
    eventually("with its log", LONG, || files() == ["3.log"]);
    let p =
        wait_pod(&agent, "crash-edge-1", LONG, |p| container(p)["state"]["running"].is_object());
    assert_eq!(container(&p)["restartCount"], 3, "adopted, not restarted");
    // The pod goes: everything goes.
    node.remove("crash.yaml");
    agent.wait_for_log("pod sandbox removed");
    eventually("no container is left", LONG, || node.containers().is_empty());
}

#[needs(pods)]
#[test]
fn g1_an_empty_dir_past_its_size_limit_evicts_its_pod() {
    let api = ApiNode::new();
    let agent = api.start(&[]);
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "filler", "namespace": "default" },
        "spec": {
            "nodeName": "edge-1",
            "terminationGracePeriodSeconds": 5,
            "volumes": [{ "name": "cache", "emptyDir": { "sizeLimit": "1Mi" } }],
            "containers": [{
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c",
                    "dd if=/dev/zero of=/cache/fill bs=1024 count=2048; trap 'exit 0' TERM; while true; do sleep 0.1; done"],
                "volumeMounts": [{ "name": "cache", "mountPath": "/cache" }],
            }],
        },
    }))
    .unwrap();
    api.server.create_pod(&pod).unwrap();
    let message = "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". ";
    eventually("the pod is evicted in the API server", LONG, || {
        api.server.get_pod("default", "filler").ok().and_then(|p| p.status).is_some_and(|s| {
            s.phase.as_deref() == Some("Failed")
                && s.reason.as_deref() == Some("Evicted")
                && s.message.as_deref() == Some(message)
        })
    });
    let local = wait_pod(&agent, "filler", LONG, |p| p["status"]["reason"] == "Evicted");
    assert_eq!(local["status"]["message"], message);
    assert_eq!(metric(&agent, "outpost_evictions_total{signal=\"emptydirfs.limit\"}"), 1.0);
    eventually("its container is stopped", LONG, || {
        api.node.tasks().iter().all(|(_, status)| status != "RUNNING")
    });
}

#[needs(pods)]
#[test]
fn g1_an_earlier_runs_leases_and_orphaned_snapshots_are_removed_at_start() {
    let node = Node::new();
    // What a crash mid-import and mid-create leaves: the import's lease, and an active
    // snapshot no container uses (on the image's top layer).
    node.ctr(&["leases", "create", "--id", "outpost-import-42", "--expires", "1h"]);
    node.ctr(&["leases", "create", "--id", "someone-else", "--expires", "1h"]);
    let committed = node.ctr(&["snapshots", "list"]);
    let parent = committed
        .lines()
        .skip(1)
        .find(|l| l.contains("Committed"))
        .and_then(|l| l.split_whitespace().next())
        .expect("the test image's layer")
        .to_owned();
    node.ctr(&["snapshots", "prepare", "orphan-rootfs", &parent]);
    let leases = || node.ctr(&["leases", "list", "--quiet"]);
    let snapshots = || node.ctr(&["snapshots", "list"]);
    assert!(leases().contains("outpost-import-42") && snapshots().contains("orphan-rootfs"));
    let agent = node.start();
    agent.wait_for_log("removed a snapshot no container uses");
    assert!(!leases().contains("outpost-import-42"), "{}", leases());
    assert!(leases().contains("someone-else"), "not Outpost's: left alone");
    assert!(!snapshots().contains("orphan-rootfs"), "{}", snapshots());
    assert!(snapshots().contains(&parent), "the image's layers stay");
    node.ctr(&["leases", "delete", "someone-else"]);
}

#[needs(pods)]
#[test]
fn g1_a_container_writing_past_its_ephemeral_storage_limit_evicts_its_pod() {
    let api = ApiNode::new();
    let agent = api.start(&[]);
    let serve = "trap 'exit 0' TERM; while true; do sleep 0.1; done";
    let container = |name: &str, limit: &str, script: &str| {
        json!({
            "name": name,
            "image": BUSYBOX_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", script],
            "resources": { "limits": { "ephemeral-storage": limit } },
        })
    };
    // Its writable layer (not a volume) grows past 1Mi; the pod's total (101Mi) does not.
    let fill = format!("dd if=/dev/zero of=/fill bs=1024 count=3072; {serve}");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "writer", "namespace": "default" },
        "spec": {
            "nodeName": "edge-1",
            "terminationGracePeriodSeconds": 5,
            "containers": [container("small", "1Mi", &fill), container("big", "100Mi", serve)],
        },
    }))
    .unwrap();
    api.server.create_pod(&pod).unwrap();
    let message = "Container small exceeded its local ephemeral storage limit \"1Mi\". ";
    let local = wait_pod(&agent, "writer", LONG, |p| p["status"]["reason"] == "Evicted");
    assert_eq!(local["status"]["message"], message);
    assert_eq!(local["status"]["phase"], "Failed");
    eventually("its containers are stopped", LONG, || {
        api.node.tasks().iter().all(|(_, status)| status != "RUNNING")
    });
}
