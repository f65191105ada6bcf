//! The systemd hardening drop-in the book gives for an external containerd
//! (`docs/src/operations/service.md`): systemd
//! reads it with the unit (`systemd-analyze verify`, and the exposure `systemd-analyze
//! security` rates goes down), and an agent run as it says (capability bounding set,
//! no_new_privs and its seccomp settings, through `support/as-hardened`: systemd is not
//! PID 1 here) runs pods with pod networking, eBPF and tmpfs volumes.

use outpost_tests::needs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use outpost_tests::agent::{Agent, ebpf_off};
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, wait_pod};
use outpost_tests::workload::delete_and_wait;
use outpost_tests::{as_hardened, outpost_bin};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The book's page on the unit, whose drop-in the tests run.
const PAGE: &str = "docs/src/operations/service.md";

/// The drop-in, between the page's `hardening-drop-in` markers.
fn drop_in() -> String {
    let page = std::fs::read_to_string(repository().join(PAGE)).unwrap();
    let block = page
        .split("<!-- hardening-drop-in:begin -->\n```ini\n")
        .nth(1)
        .and_then(|rest| rest.split("```\n<!-- hardening-drop-in:end -->").next())
        .unwrap_or_else(|| panic!("the drop-in between {PAGE}'s hardening-drop-in markers"));
    assert!(block.starts_with("[Service]\n"), "{block}");
    block.to_owned()
}

/// The unit in `dir`, with ExecStart pointed at the binary just built (verify checks
/// that it exists).
fn unit_in(dir: &Path) {
    let unit = std::fs::read_to_string(repository().join("deploy/outpost.service")).unwrap();
    let unit = unit.replace(
        "ExecStart=/usr/local/bin/outpost ",
        &format!("ExecStart={} ", outpost_bin().display()),
    );
    std::fs::write(dir.join("outpost.service"), unit).unwrap();
}

/// `systemd-analyze security --offline=yes` of the unit in `dir`: its exposure (0 to 10).
fn exposure(dir: &Path) -> f64 {
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes"])
        .arg(dir.join("outpost.service"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.contains("Overall exposure level for outpost.service"));
    let level = line.and_then(|l| l.split(": ").nth(1)?.split_whitespace().next()?.parse().ok());
    level.unwrap_or_else(|| {
        panic!("no exposure level: {stdout}{}", String::from_utf8_lossy(&out.stderr))
    })
}

#[needs(systemd_analyze)]
#[test]
fn the_drop_in_verifies_with_the_unit_and_lowers_its_exposure() {
    let block = drop_in();
    let dir = tempfile::tempdir().unwrap();
    unit_in(dir.path());
    let bare = exposure(dir.path());
    let dropins = dir.path().join("outpost.service.d");
    std::fs::create_dir(&dropins).unwrap();
    std::fs::write(dropins.join("hardening.conf"), &block).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(dir.path().join("outpost.service"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify failed: {stderr}");
    let complaints: Vec<&str> = stderr.lines().filter(|l| l.contains("outpost")).collect();
    assert!(complaints.is_empty(), "systemd-analyze verify complains: {complaints:#?}");
    let hardened = exposure(dir.path());
    assert!(hardened < bare, "the drop-in is not applied: {hardened} (without it {bare})");
    // It only adds to the unit: nothing the unit decided is set again.
    for kept in ["Delegate=", "KillMode=", "ProtectSystem=", "PrivateTmp=", "PrivateDevices="] {
        assert!(!block.contains(kept), "the drop-in sets {kept}: {block}");
    }
}

/// A pod with pod networking (CNI), a memory-backed emptyDir (a tmpfs the agent mounts)
/// and a hostPath volume.
fn pod_yaml(data: &Path) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: hardened
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo up > /data/up; sleep 3600"]
    volumeMounts:
    - {{name: scratch, mountPath: /scratch}}
    - {{name: data, mountPath: /data}}
  volumes:
  - {{name: scratch, emptyDir: {{medium: Memory}}}}
  - {{name: data, hostPath: {{path: {}}}}}
"#,
        data.display()
    )
}

/// A line of `/proc/<pid>/status`, e.g. `NoNewPrivs:\t1`.
fn status_field(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(&format!("{field}:")));
    line.map(|l| l[field.len() + 1..].trim().to_owned()).unwrap_or_default()
}

#[needs(pods, seccomp)]
#[test]
fn an_agent_run_as_the_drop_in_says_runs_pods_with_an_external_containerd() {
    let node = Node::new();
    let dropin = node.path("hardening.conf");
    std::fs::write(&dropin, drop_in()).unwrap();
    let agent = Agent::start_pods_with(as_hardened(&dropin), &node.manifests(), &node.args());
    assert_eq!(status_field(agent.pid(), "NoNewPrivs"), "1");
    assert_eq!(status_field(agent.pid(), "Seccomp"), "2", "a seccomp filter");
    let bounding = u64::from_str_radix(&status_field(agent.pid(), "CapBnd"), 16).unwrap();
    assert_eq!(bounding & (1 << 25), 0, "no CAP_SYS_TIME");
    if cfg!(outpost_has_bpf) && !ebpf_off() {
        agent.wait_for_log("eBPF programs loaded");
    }

    let data = node.path("data");
    std::fs::create_dir(&data).unwrap();
    node.put("hardened.yaml", &pod_yaml(&data));
    let pod = wait_pod(&agent, "hardened-edge-1", Duration::from_secs(60), |p| {
        assert_ne!(p["status"]["phase"], "Failed", "{}", p["status"]);
        p["status"]["phase"] == "Running" && data.join("up").exists()
    });
    assert!(pod["status"]["podIP"].is_string(), "pod networking: {}", pod["status"]);
    delete_and_wait(&node, &agent, &[("hardened.yaml", "hardened-edge-1")]);
}
