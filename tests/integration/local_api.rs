//! The local API through the real binary: who may read and write (tokens, client
//! certificates, anonymous reads from loopback), `/healthz` and `/readyz` as the API
//! server answers them, and `/debug/log-level`; `/containerLogs` (on hand-written CRI
//! files and on a real pod) and the limits that keep slow or hostile clients from
//! stalling the agent in the submodules.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::{outpost_bin, pod_yaml, write_private};
use serde_json::Value;

use crate::push::Pki;

mod container_logs;
mod limits;

const TOKEN: &str = "local-api-token";
const BEARER: &str = "Bearer local-api-token";
/// Only to detect a hang.
pub(crate) const PATIENCE: Duration = Duration::from_secs(90);

/// A manifest dir with one pod (`web-edge-1`, container `main`) and a token file.
pub(crate) struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    pub(crate) fn new() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("manifests")).unwrap();
        std::fs::create_dir(root.path().join("logs")).unwrap();
        std::fs::write(root.path().join("manifests/web.yaml"), pod_yaml("web", "busybox")).unwrap();
        write_private(&root.path().join("token"), format!("{TOKEN}\n"));
        Dirs { root }
    }

    pub(crate) fn path(&self, sub: &str) -> PathBuf {
        self.root.path().join(sub)
    }

    /// The flags for the token, a state dir and a pod log dir, then `extra`.
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> =
            ["--token-file", "token", "--state-dir", "state", "--pod-log-dir", "logs"]
                .chunks(2)
                .flat_map(|pair| [pair[0].to_owned(), self.path(pair[1]).display().to_string()])
                .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// An agent with `--anonymous-loopback-reads` (the harness's default).
    pub(crate) fn start(&self, extra: &[&str]) -> Agent {
        let agent = Agent::start_args(&self.path("manifests"), &self.args(extra));
        agent.delta();
        agent
    }

    /// An agent without it.
    fn start_strict(&self, extra: &[&str]) -> Agent {
        let agent = Agent::start_strict(&self.path("manifests"), &self.args(extra));
        agent.delta();
        agent
    }
}

fn with_token(agent: &Agent, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    agent.request(method, path, &[("Authorization", BEARER)], body)
}

pub(crate) fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[test]
fn without_anonymous_loopback_reads_every_read_needs_the_token() {
    let dirs = Dirs::new();
    let agent = dirs.start_strict(&[]);
    assert_eq!(agent.get("/healthz"), (200, "ok".into()));
    assert_eq!(agent.get("/readyz"), (200, "ok".into()));
    for path in [
        "/pods",
        "/metrics",
        "/debug/log-level",
        "/containerLogs/default/web-edge-1/main",
        "/manifests",
        "/manifests/audit",
        "/nowhere",
    ] {
        let (status, body) = agent.get(path);
        assert_eq!(status, 401, "GET {path}: {body}");
        assert!(body.contains("--token-file"), "GET {path} says how: {body}");
        let (status, _) = agent.request("GET", path, &[("Authorization", "Bearer wrong")], b"");
        assert_eq!(status, 401, "GET {path} with a wrong token");
    }
    let (status, pods) = with_token(&agent, "GET", "/pods", b"");
    assert_eq!(status, 200);
    assert!(pods.contains("web-edge-1"), "{pods}");
    let (status, metrics) = with_token(&agent, "GET", "/metrics", b"");
    assert_eq!(status, 200);
    assert!(metrics.contains("# EOF"), "{metrics}");
    assert_eq!(with_token(&agent, "GET", "/nowhere", b"").0, 404);
}

#[test]
fn with_anonymous_loopback_reads_loopback_reads_freely_and_writes_still_need_the_token() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let (status, pods) = agent.get("/pods");
    assert_eq!(status, 200);
    assert!(pods.contains("web-edge-1"), "{pods}");
    assert_eq!(agent.get("/metrics").0, 200);
    assert_eq!(agent.get("/manifests").0, 200, "any GET is a read");
    // Credentials sent are checked, even where none were needed.
    let (status, _) = agent.request("GET", "/pods", &[("Authorization", "Bearer wrong")], b"");
    assert_eq!(status, 401);
    // Writes always need them.
    let (status, body) = agent.request("PUT", "/debug/log-level", &[], b"debug");
    assert_eq!(status, 401, "{body}");
    assert_eq!(agent.request("POST", "/refresh", &[], b"").0, 401);
    let body = pod_yaml("pushed", "busybox");
    assert_eq!(agent.request("PUT", "/manifests/pushed", &[], body.as_bytes()).0, 401);
}

#[test]
fn with_nothing_configured_only_health_answers_and_the_log_says_how_to_enable_more() {
    let dirs = Dirs::new();
    let agent = Agent::start_strict(
        &dirs.path("manifests"),
        &["--state-dir", dirs.path("state").to_str().unwrap()],
    );
    let line = agent.wait_for_log("serves only /healthz and /readyz");
    assert!(line.contains("--anonymous-loopback-reads") && line.contains("--token-file"), "{line}");
    assert_eq!(agent.get("/healthz").0, 200);
    let (status, body) = agent.get("/pods");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("--anonymous-loopback-reads"), "{body}");
}

#[test]
fn secret_files_others_can_read_stop_the_start_with_the_fix() {
    let dirs = Dirs::new();
    let pki = Pki::new();
    let shared = dirs.path("shared-token");
    std::fs::write(&shared, TOKEN).unwrap();
    let shared_key = dirs.path("shared-key.pem");
    std::fs::copy(pki.file("server-key.pem"), &shared_key).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for file in [&shared, &shared_key] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let cases: [(Vec<String>, &Path); 2] = [
        (vec!["--token-file".into(), shared.display().to_string()], &shared),
        (
            vec![
                "--tls-cert-file".into(),
                pki.file("server.pem"),
                "--tls-private-key-file".into(),
                shared_key.display().to_string(),
            ],
            &shared_key,
        ),
    ];
    for (args, named) in cases {
        let out = Command::new(outpost_bin())
            .args(["run", "--dry-run", "--node-name", "n", "--listen", "127.0.0.1:0"])
            .arg("--manifest-dir")
            .arg(dirs.path("manifests"))
            .arg("--state-dir")
            .arg(dirs.path("state"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must not start: {stderr}");
        assert!(stderr.contains(&format!("chmod 600 {}", named.display())), "{args:?}: {stderr}");
        assert!(!stderr.contains(TOKEN), "the token is never shown: {stderr}");
    }
}

#[test]
fn over_tls_reads_take_a_client_certificate_or_the_token() {
    let dirs = Dirs::new();
    let pki = Pki::new();
    let agent = dirs.start_strict(&[
        "--tls-cert-file",
        &pki.file("server.pem"),
        "--tls-private-key-file",
        &pki.file("server-key.pem"),
        "--client-ca-file",
        &pki.file("ca.pem"),
    ]);
    let addr = agent.addr.clone();
    let (status, ok) = pki.request(&addr, None, "GET", "/readyz", &[], b"").unwrap();
    assert_eq!((status, ok.as_str()), (200, "ok"));
    let (status, body) = pki.request(&addr, None, "GET", "/pods", &[], b"").unwrap();
    assert_eq!(status, 401, "{body}");
    let (status, body) = pki.request(&addr, Some(&pki.client), "GET", "/pods", &[], b"").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("web-edge-1"), "{body}");
    let (status, _) =
        pki.request(&addr, None, "GET", "/metrics", &[("Authorization", BEARER)], b"").unwrap();
    assert_eq!(status, 200);
}

#[test]
fn readyz_and_healthz_answer_as_the_api_server() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let (status, body) = agent.get("/readyz?verbose");
    assert_eq!(status, 200);
    assert_eq!(body, "[+]source-file ok: live\n[+]source-push ok: live\nreadyz check passed\n");
    let (status, body) = agent.get("/healthz?verbose");
    assert_eq!(status, 200);
    assert!(body.starts_with("[+]ping ok") && body.ends_with("healthz check passed\n"), "{body}");

    // A manifest URL nobody serves: never seen, so not ready.
    let dirs = Dirs::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let url = format!("http://{closed}/pods.yaml");
    let agent = Agent::start_args(&dirs.path("manifests"), &dirs.args(&["--manifest-url", &url]));
    let (status, body) = agent.poll("/readyz", |_, body| body.contains("failing"));
    assert_eq!(status, 503, "{body}");
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 2, "only the failing check, then the verdict: {body}");
    assert!(lines[0].starts_with("[-]source-url failed: never seen (failing: "), "{body}");
    assert_eq!(lines[1], "readyz check failed");
    let (status, body) = agent.get("/readyz?verbose");
    assert_eq!(status, 503);
    assert!(
        body.contains("[+]source-file ok: live\n") && body.ends_with("readyz check failed\n"),
        "{body}"
    );
    assert_eq!(agent.get("/readyz?exclude=source-url"), (200, "ok".into()));
    let (status, body) = agent.get("/readyz?verbose&exclude=source-url");
    assert_eq!(status, 200);
    assert!(body.contains("[+]source-url excluded: ok\n"), "{body}");
}

#[test]
fn the_log_level_changes_at_run_time() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let (status, filter) = agent.get("/debug/log-level");
    assert_eq!(status, 200);
    assert!(filter.contains("info"), "{filter}");
    let (status, body) = with_token(&agent, "PUT", "/debug/log-level", b"outpost=loud");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("outpost=loud"), "{body}");
    assert!(!agent.log().contains("local API request allowed"), "no debug line yet");

    let (status, filter) = with_token(&agent, "PUT", "/debug/log-level", b"debug\n");
    assert_eq!(status, 200, "{filter}");
    let directives: Vec<&str> = filter.trim().split(',').collect();
    assert!(directives.contains(&"debug"), "{filter}");
    assert!(
        directives.contains(&"kube_client::client::builder=off"),
        "the kube rule stays: {filter}"
    );
    let line = agent.wait_for_log("log filter changed through the local API");
    assert!(line.contains("Token") && line.contains("127.0.0.1"), "who changed it: {line}");
    assert!(!line.contains(TOKEN), "{line}");
    assert_eq!(agent.get("/debug/log-level").1, filter);
    // A debug-only line now appears.
    assert_eq!(agent.get("/pods").0, 200);
    agent.wait_for_log("local API request allowed");
}
