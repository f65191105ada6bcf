//! The operator commands against a real agent: `outpost pods`, `status`, `describe` and
//! `logs` over the local API (a `--dry-run` agent, then one running real pods), their
//! errors (agent down, unknown pod, wrong token), and `logs` reading the files when the
//! agent is down.

use outpost_tests::needs;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, container, wait_pod};
use outpost_tests::{outpost_bin, pod_yaml, write_private};

const LONG: Duration = Duration::from_secs(60);

/// `outpost <args> --server http://<agent>`.
fn outpost(agent_addr: &str, args: &[&str]) -> Output {
    Command::new(outpost_bin())
        .args(args)
        .args(["--server", &format!("http://{agent_addr}")])
        .output()
        .unwrap()
}

fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A dry-run agent with the pod `web` (`web-edge-1`), once the pod is served.
fn dry_run_agent(dir: &Path, extra: &[&str]) -> Agent {
    fs::write(dir.join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
    let agent = Agent::start_args(dir, extra);
    assert_eq!(agent.delta()["name"], "web-edge-1");
    agent
}

#[test]
fn pods_prints_the_table_wide_json_and_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dry_run_agent(dir.path(), &[]);

    let table = stdout_ok(&outpost(&agent.addr, &["pods"]));
    let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "SOURCE"]);
    let row = &lines[1];
    assert_eq!(&row[..5], ["default", "web-edge-1", "0/1", "Pending", "0"], "{table}");
    assert_eq!(row[6], "file", "{table}");
    assert_eq!(lines.len(), 2, "{table}");

    let wide = stdout_ok(&outpost(&agent.addr, &["pods", "-o", "wide", "-n", "default"]));
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "SOURCE", "IP", "NODE"]);
    assert!(wide.lines().nth(1).unwrap().ends_with("edge-1"), "{wide}");

    let other = stdout_ok(&outpost(&agent.addr, &["pods", "-n", "kube-system"]));
    assert_eq!(other.trim(), "No resources found.");

    let json = stdout_ok(&outpost(&agent.addr, &["pods", "-o", "json"]));
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["items"][0]["metadata"]["name"], "web-edge-1");

    let yaml = stdout_ok(&outpost(&agent.addr, &["pods", "-o", "yaml"]));
    let list: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["items"][0]["spec"]["containers"][0]["image"], "nginx:1");
}

#[test]
fn status_shows_the_agent_and_exits_zero_when_ready() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dry_run_agent(dir.path(), &[]);
    agent.poll("/readyz", |status, _| status == 200);
    let text = stdout_ok(&outpost(&agent.addr, &["status"]));
    for needle in [
        "Node:       edge-1\n",
        "Ready:      yes\n",
        "API server: not configured",
        "Runtime:    none (dry run)",
        "Pods:       1 total",
    ] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }
    let file = text.lines().find(|l| l.trim_start().starts_with("file ")).unwrap();
    assert!(file.contains(" live "), "{text}");

    let json = stdout_ok(&outpost(&agent.addr, &["status", "-o", "json"]));
    let status: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(status["nodeName"], "edge-1");
    assert_eq!(status["pods"]["total"], 1);
}

#[test]
fn describe_of_an_unknown_pod_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dry_run_agent(dir.path(), &[]);
    let out = outpost(&agent.addr, &["describe", "default/nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("pods \"nope\" not found"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());

    let known = stdout_ok(&outpost(&agent.addr, &["describe", "web-edge-1"]));
    assert!(known.starts_with("Name:             web-edge-1\n"), "{known}");
    assert!(known.contains("Source:           file\n"), "{known}");
}

#[test]
fn an_agent_that_is_down_is_a_clear_error() {
    // A port nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    for command in [&["pods"][..], &["status"], &["describe", "web"]] {
        let out = outpost(&addr, command);
        assert_eq!(out.status.code(), Some(1), "{command:?}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "cannot reach the Outpost agent at http://{addr} (connection refused): is it running?"
            )),
            "{command:?}: {err}"
        );
    }
}

#[test]
fn the_token_is_sent_and_a_wrong_one_is_a_clear_401() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    fs::create_dir(&manifests).unwrap();
    let token = dir.path().join("token");
    write_private(&token, "right-token\n");
    let agent = dry_run_agent(&manifests, &["--token-file", token.to_str().unwrap()]);

    let out = outpost(&agent.addr, &["pods", "--token-file", token.to_str().unwrap()]);
    assert!(stdout_ok(&out).contains("web-edge-1"));

    let wrong = dir.path().join("wrong");
    write_private(&wrong, "wrong-token\n");
    let out = outpost(&agent.addr, &["pods", "--token-file", wrong.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "reads need the token: {}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("refused the request (401)"), "{err}");
    assert!(
        err.contains(&format!("a bearer token from --token-file {}", wrong.display())),
        "{err}"
    );
    assert!(!err.contains("wrong-token"), "never the token: {err}");
}

/// A shell script that prints a line and runs until SIGTERM.
const SERVE: &str = "trap 'exit 0' TERM; echo hello-from-main; while true; do sleep 0.1; done";

/// A node running the pod `talk` (`talk-edge-1`), and its agent, once the pod runs.
fn running_pod() -> (Node, Agent) {
    let node = Node::new();
    let agent = node.start();
    let script = serde_json::to_string(SERVE).unwrap();
    node.put(
        "talk.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: talk\nspec:\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
        ),
    );
    wait_pod(&agent, "talk-edge-1", LONG, |p| container(p)["state"]["running"].is_object());
    (node, agent)
}

#[needs(pods)]
#[test]
fn describe_shows_a_running_container_and_its_events() {
    let (_node, agent) = running_pod();
    let text = stdout_ok(&outpost(&agent.addr, &["describe", "default/talk-edge-1"]));
    assert!(text.contains("\n  main:\n"), "{text}");
    assert!(text.contains("    State:          Running\n"), "{text}");
    assert!(text.contains("    Ready:          True\n"), "{text}");
    let events = text.split_once("Events:").unwrap().1;
    for reason in ["Created", "Started"] {
        assert!(events.contains(reason), "{reason} in:\n{text}");
    }
}

#[needs(pods)]
#[test]
fn logs_reads_the_files_when_the_agent_is_down() {
    let (node, agent) = running_pod();
    let addr = agent.addr.clone();
    drop(agent);
    let logs_dir = node.path("logs");
    let out = Command::new(outpost_bin())
        .args(["logs", "default/talk-edge-1", "--server", &format!("http://{addr}")])
        .arg("--pod-log-dir")
        .arg(&logs_dir)
        .output()
        .unwrap();
    assert_eq!(stdout_ok(&out), "hello-from-main\n");
    let err = stderr(&out);
    assert!(err.contains("connection refused"), "{err}");
    assert_eq!(err.matches("reading the log files under").count(), 1, "said once: {err}");
}

/// Needs the agent's `/containerLogs` (the local API branch).
#[needs(pods)]
#[test]
fn logs_come_through_the_local_api() {
    let (_node, agent) = running_pod();
    let out = outpost(&agent.addr, &["logs", "default/talk-edge-1"]);
    assert_eq!(stdout_ok(&out), "hello-from-main\n");
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let out =
        outpost(&agent.addr, &["logs", "talk-edge-1", "-c", "main", "--tail", "1", "--timestamps"]);
    let line = stdout_ok(&out);
    let (time, text) = line.trim_end().split_once(' ').unwrap();
    assert!(time.parse::<jiff::Timestamp>().is_ok(), "{line}");
    assert_eq!(text, "hello-from-main");
    let out = outpost(&agent.addr, &["logs", "default/talk-edge-1", "-c", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("nope"), "{}", stderr(&out));
}

#[test]
fn pods_over_https_trusts_the_certificate_authority_given() {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let (ca_file, cert_file, key_file) =
        (dir.path().join("ca.pem"), dir.path().join("tls.crt"), dir.path().join("tls.key"));
    fs::write(&ca_file, ca.pem()).unwrap();
    fs::write(&cert_file, cert.pem()).unwrap();
    write_private(&key_file, key.serialize_pem());
    let manifests = dir.path().join("manifests");
    fs::create_dir(&manifests).unwrap();
    let tls = ["--tls-cert-file", cert_file.to_str().unwrap()];
    let agent = dry_run_agent(
        &manifests,
        &[tls[0], tls[1], "--tls-private-key-file", key_file.to_str().unwrap()],
    );
    let out = Command::new(outpost_bin())
        .args(["pods", "--server", &format!("https://{}", agent.addr)])
        .arg("--certificate-authority")
        .arg(&ca_file)
        .output()
        .unwrap();
    assert!(stdout_ok(&out).contains("web-edge-1"));
}
