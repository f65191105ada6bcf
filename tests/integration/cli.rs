//! The real `outpost` binary: `validate`, and `run --dry-run` with its local API.

use outpost_tests::needs;
use std::fs;
use std::process::Command;

use outpost_tests::agent::Agent;
use outpost_tests::{outpost_bin, pod_yaml};

#[test]
fn version_prints_the_crate_version() {
    let out = Command::new(outpost_bin()).arg("version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("outpost "));
}

#[test]
fn validate_exits_zero_on_valid_and_one_with_file_line_col_on_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    fs::write(&good, pod_yaml("web", "nginx")).unwrap();
    let out = Command::new(outpost_bin())
        .args(["validate", "--node-name", "n1"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());

    let bad = dir.path().join("bad.yaml");
    fs::write(&bad, "apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {}\nspec:\n  containers:\n  - name: Bad_Name\n").unwrap();
    let out = Command::new(outpost_bin()).arg("validate").arg(&good).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let prefix = format!("{}:", bad.display());
    assert!(!stdout.is_empty() && stdout.lines().all(|l| l.starts_with(&prefix)), "{stdout}");
    for line in stdout.lines() {
        let mut parts = line[prefix.len()..].splitn(3, ':');
        assert!(parts.next().is_some_and(|l| l.parse::<u32>().is_ok()), "no line number: {line}");
        assert!(parts.next().is_some_and(|c| c.parse::<u32>().is_ok()), "no column: {line}");
    }
    assert!(stdout.contains("metadata.name"), "S1 is reported: {stdout}");
}

/// A1: a field Outpost does not honour fails validation naming it; a warning is printed
/// and counted, and leaves the exit status alone; what this host cannot do (an unsafe
/// sysctl not allowed) fails, and passes once `--allowed-unsafe-sysctls` allows it.
#[test]
fn a1_validate_refuses_unsupported_fields_and_warns() {
    let dir = tempfile::tempdir().unwrap();
    let validate = |file: &std::path::Path, extra: &[&str]| {
        let config = dir.path().join("no-config.yaml");
        fs::write(&config, "").unwrap();
        let out = Command::new(outpost_bin())
            .args(["validate", "--node-name", "n1", "--config"])
            .arg(&config)
            .args(extra)
            .arg(file)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code(), stdout, String::from_utf8_lossy(&out.stderr).into_owned())
    };

    let warned = dir.path().join("warned.yaml");
    fs::write(
        &warned,
        pod_yaml("web", "nginx").replace("spec:\n", "spec:\n  priorityClassName: gold\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = validate(&warned, &[]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "{}:7:3: warning: spec.priorityClassName: priority class ",
            warned.display()
        )),
        "{stdout}"
    );
    assert!(stderr.contains("0 invalid, 1 warning(s)"), "{stderr}");

    let refused = dir.path().join("refused.yaml");
    fs::write(
        &refused,
        pod_yaml("web", "nginx").replace(
            "  - name: main\n",
            "  - name: main\n    volumeDevices: [{name: d, devicePath: /dev/xvda}]\n",
        ),
    )
    .unwrap();
    let (code, stdout, _) = validate(&refused, &[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.starts_with(&format!(
            "{}:9:5: spec.containers[0].volumeDevices: not supported: ",
            refused.display()
        )),
        "{stdout}"
    );

    let sysctl = dir.path().join("sysctl.yaml");
    let with_sysctl =
        "spec:\n  securityContext:\n    sysctls: [{name: net.core.somaxconn, value: \"1024\"}]\n";
    fs::write(&sysctl, pod_yaml("web", "nginx").replace("spec:\n", with_sysctl)).unwrap();
    let (code, stdout, _) = validate(&sysctl, &[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout
            .contains("SysctlForbidden: forbidden sysctl: \"net.core.somaxconn\" not allowlisted"),
        "{stdout}"
    );
    let (code, stdout, _) = validate(&sysctl, &["--allowed-unsafe-sysctls", "net.core.*"]);
    assert_eq!((code, stdout.as_str()), (Some(0), ""));
}

#[test]
fn dry_run_prints_deltas_and_serves_pods() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
    let agent = Agent::start(dir.path());

    let add = agent.delta();
    assert_eq!(add["op"], "ADD");
    assert_eq!(add["source"], "file");
    assert_eq!(add["namespace"], "default");
    assert_eq!(add["name"], "web-edge-1", "S2: name gets the lowercased node name");
    let uid = add["uid"].as_str().unwrap().to_owned();
    assert_eq!(uid.len(), 32, "S5: 32 hex chars");
    assert_eq!(add["hash"], uid.as_str(), "S6: config.hash is the UID");

    let (status, body) = agent.get("/healthz");
    assert_eq!((status, body.trim()), (200, "ok"));
    let (status, body) = agent.get("/readyz?verbose");
    assert_eq!(status, 200, "{body}");
    let (status, body) = agent.get("/pods");
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "PodList");
    let pod = &list["items"][0];
    assert_eq!(pod["metadata"]["uid"], uid.as_str());
    assert_eq!(pod["spec"]["nodeName"], "edge-1", "S4");
    assert_eq!(pod["status"]["phase"], "Pending", "S4");
    assert_eq!(pod["metadata"]["annotations"]["kubernetes.io/config.source"], "file", "M1");
    assert!(pod["metadata"]["annotations"]["kubernetes.io/config.seen"].is_string(), "M3");
    let tolerations = pod["spec"]["tolerations"].as_array().unwrap();
    assert!(
        tolerations.iter().any(|t| t["operator"] == "Exists" && t["effect"] == "NoExecute"),
        "S7"
    );

    // M10: an edit is REMOVE(old) then ADD(new).
    fs::write(dir.path().join("web.yaml"), pod_yaml("web", "nginx:2")).unwrap();
    let remove = agent.delta();
    let add = agent.delta();
    assert_eq!(
        (remove["op"].as_str(), remove["uid"].as_str()),
        (Some("REMOVE"), Some(uid.as_str()))
    );
    assert_eq!(add["op"], "ADD");
    assert_ne!(add["uid"], uid.as_str());

    // A bad manifest beside it changes nothing; deleting the good one removes it.
    fs::write(dir.path().join("bad.yaml"), "kind: Pod\nmetadata: {}\n").unwrap();
    fs::remove_file(dir.path().join("web.yaml")).unwrap();
    let remove = agent.delta();
    assert_eq!(remove["op"], "REMOVE");
    assert_eq!(remove["uid"], add["uid"]);
    let (_, body) = agent.get("/pods");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0));
}

/// Without containerd the agent says so, keeps retrying, and still serves its sources;
/// it is not ready until containerd answers.
#[test]
fn run_without_containerd_retries_and_is_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    // D6: the agent makes its state directory a shared mount (bound on itself here).
    let _mounts = outpost_tests::propagation::UnmountUnder::new(dir.path());
    fs::write(dir.path().join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
    let state = dir.path().join("state");
    let socket = dir.path().join("no-containerd.sock");
    let agent = Agent::start_pods(
        dir.path(),
        &[
            "--containerd".as_ref(),
            "external".as_ref(),
            "--containerd-socket".as_ref(),
            socket.as_os_str(),
            "--state-dir".as_ref(),
            state.as_os_str(),
            // Nothing of the node's: its BPF programs would make the default pods cgroup
            // (`/kubepods`) in the cgroup2 hierarchy.
            "--ebpf=false".as_ref(),
        ],
    );
    let line = agent.wait_for_log("containerd is not reachable; retrying with backoff");
    assert!(line.contains("no-containerd.sock"), "{line}");
    let (status, body) = agent.poll("/readyz?verbose", |_, body| body.contains("[+]source-file"));
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("[-]runtime failed: containerd not connected"), "{body}");
    let (_, pods) = agent.get("/pods");
    assert!(pods.contains("web-edge-1"), "the sources are served meanwhile: {pods}");
}

/// Where fanotify cannot be used (here: blocked by seccomp, as in a container with the
/// default profile) the agent says why, watches with inotify, and works the same.
#[needs(seccomp)]
#[test]
fn dry_run_falls_back_to_inotify_where_fanotify_is_blocked() {
    let command = outpost_tests::without_fanotify();
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
    let agent = Agent::start_with(command, dir.path(), &[] as &[&str]);
    assert_eq!(agent.delta()["op"], "ADD");
    let log = agent.log();
    assert!(log.contains("backend=inotify"), "the backend in use is logged: {log}");
    assert!(log.contains("fanotify is unavailable"), "the reason is logged: {log}");
    drop(log);
    fs::write(dir.path().join("api.yaml"), pod_yaml("api", "nginx:1")).unwrap();
    assert_eq!(agent.delta()["name"], "api-edge-1");
}
