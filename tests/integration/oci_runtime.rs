//! End to end: `--runtime crun`. The runc shim runs the pod's containers, its probes'
//! commands and `outpost exec` with crun (the shim's `BinaryName`), as containerd's CRI
//! does for a `crun` runtime handler. On a hybrid cgroup host whose v2 hierarchy holds
//! controllers (this project's machines: `hugetlb` is on v2 there) crun cannot run
//! containers at all, so there the agent must refuse at start, naming why.

use outpost_tests::needs;
use std::process::Command;
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::outpost_bin;
use outpost_tests::pods::{Node, wait_pod};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);

/// A pod shaped like kubernetes.io's exec-probe example (`liveness` with `cat
/// /tmp/healthy`), with an exec readiness probe too.
fn probed(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: liveness
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "touch /tmp/healthy; exec sleep 3600"]
    livenessProbe:
      exec:
        command: ["cat", "/tmp/healthy"]
      periodSeconds: 1
    readinessProbe:
      exec:
        command: ["cat", "/tmp/healthy"]
      periodSeconds: 1
"#
    )
}

fn ready(p: &Value) -> bool {
    let conditions = p["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// With `--runtime crun` a pod's container is crun's (crun's state of it says it runs),
/// its exec probes pass, and `outpost exec` runs a command in it; no restarts. Where crun
/// cannot run containers (a hybrid host's v2 hierarchy holds controllers) the agent
/// refuses to start instead, naming them.
#[needs(crun)]
#[test]
fn a_pod_runs_under_crun_with_its_exec_probes_and_exec() {
    let node = Node::new();
    let mut args = node.args();
    args.extend(["--runtime".into(), "crun".into()]);
    let unified = std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers");
    if let Some(controllers) = unified.ok().filter(|c| !c.trim().is_empty()) {
        let refused = Command::new("timeout")
            .arg("60")
            .arg(outpost_bin())
            .args(["run", "--node-name", "edge-1", "--listen", "127.0.0.1:0", "--manifest-dir"])
            .arg(node.manifests())
            .args(&args)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(said.contains("crun cannot run containers on this host"), "{said}");
        assert!(said.contains(controllers.trim()), "{said}");
        return;
    }
    let agent = Agent::start_pods(&node.manifests(), &args);
    node.put("crun.yaml", &probed("crun"));
    let pod = wait_pod(&agent, "crun-edge-1", LONG, ready);
    let status = &pod["status"]["containerStatuses"][0];
    let id = status["containerID"].as_str().unwrap().trim_start_matches("containerd://");

    // The shim keeps the runtime's state under containerd's runc root, per namespace.
    let root = format!("/run/containerd/runc/{}", node.namespace);
    let state = Command::new("crun").args(["--root", &root, "state", id]).output().unwrap();
    assert!(state.status.success(), "crun state {id}: {}", String::from_utf8_lossy(&state.stderr));
    let state: Value = serde_json::from_slice(&state.stdout).unwrap();
    assert_eq!(state["status"], "running", "{state}");

    let exec = Command::new(outpost_bin())
        .args(["exec", "--server", &format!("http://{}", agent.addr)])
        .args(["default/crun-edge-1", "--", "cat", "/proc/1/cmdline"])
        .output()
        .unwrap();
    let output = String::from_utf8_lossy(&exec.stdout);
    assert!(exec.status.success(), "outpost exec: {}", String::from_utf8_lossy(&exec.stderr));
    assert!(output.starts_with("sh"), "{output}");
    assert!(agent.log().contains("containers run with this OCI runtime"), "{}", agent.log());
    let pod = wait_pod(&agent, "crun-edge-1", LONG, ready);
    assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0, "{pod}");
}
