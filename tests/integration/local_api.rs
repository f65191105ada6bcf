//! The local API through the real binary: who may read and write (tokens, client
//! certificates, anonymous reads from loopback), `/healthz` and `/readyz` as the API
//! server answers them, `/containerLogs` on hand-written CRI files and on a real pod,
//! `/debug/log-level`, and the limits that keep slow or hostile clients from stalling
//! the agent.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outpost_tests::agent::{Agent, request_head, split_response};
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, container, eventually, wait_pod};
use outpost_tests::{outpost_bin, pod_yaml, write_private};
use serde_json::Value;

use crate::push::Pki;

const TOKEN: &str = "local-api-token";
const BEARER: &str = "Bearer local-api-token";
/// Only to detect a hang.
const PATIENCE: Duration = Duration::from_secs(90);

/// A manifest dir with one pod (`web-edge-1`, container `main`) and a token file.
struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("manifests")).unwrap();
        std::fs::create_dir(root.path().join("logs")).unwrap();
        std::fs::write(root.path().join("manifests/web.yaml"), pod_yaml("web", "busybox")).unwrap();
        write_private(&root.path().join("token"), format!("{TOKEN}\n"));
        Dirs { root }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.root.path().join(sub)
    }

    /// The flags for the token, a state dir and a pod log dir, then `extra`.
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = ["--token-file", "token", "--state-dir", "state", "--pod-log-dir", "logs"]
            .chunks(2)
            .flat_map(|pair| [pair[0].to_owned(), self.path(pair[1]).display().to_string()])
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// An agent with `--anonymous-loopback-reads` (the harness's default).
    fn start(&self, extra: &[&str]) -> Agent {
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

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[test]
fn without_anonymous_loopback_reads_every_read_needs_the_token() {
    let dirs = Dirs::new();
    let agent = dirs.start_strict(&[]);
    assert_eq!(agent.get("/healthz"), (200, "ok".into()));
    assert_eq!(agent.get("/readyz"), (200, "ok".into()));
    for path in ["/pods", "/metrics", "/debug/log-level", "/containerLogs/default/web-edge-1/main", "/manifests", "/nowhere"] {
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
    assert!(body.contains("[+]source-file ok: live\n") && body.ends_with("readyz check failed\n"), "{body}");
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
    assert!(directives.contains(&"kube_client::client::builder=off"), "the kube rule stays: {filter}");
    let line = agent.wait_for_log("log filter changed through the local API");
    assert!(line.contains("Token") && line.contains("127.0.0.1"), "who changed it: {line}");
    assert!(!line.contains(TOKEN), "{line}");
    assert_eq!(agent.get("/debug/log-level").1, filter);
    // A debug-only line now appears.
    assert_eq!(agent.get("/pods").0, 200);
    agent.wait_for_log("local API request allowed");
}

/// Writes a CRI log file for the pod `web-edge-1`'s container `main`, run `run`.
fn write_log(dirs: &Dirs, uid: &str, run: u32, records: &str) -> PathBuf {
    let dir = dirs.path("logs").join(format!("default_web-edge-1_{uid}/main"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{run}.log"));
    std::fs::write(&path, records).unwrap();
    path
}

fn web_uid(agent: &Agent) -> String {
    let (_, body) = agent.get("/pods");
    json(&body)["items"][0]["metadata"]["uid"].as_str().unwrap().to_owned()
}

#[test]
fn container_logs_read_the_pods_current_files_with_kubelets_parameters() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let base = "/containerLogs/default/web-edge-1/main";
    // Known, but nothing logged yet (a dry run starts no container).
    let (status, body) = agent.get(base);
    assert_eq!(status, 400, "{body}");
    assert!(json(&body)["message"].as_str().unwrap().contains("waiting to start"), "{body}");

    let uid = web_uid(&agent);
    // A directory of an earlier pod of the same name (another UID) is not read.
    let old = dirs.path("logs").join("default_web-edge-1_old-uid/main");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("0.log"), "2024-05-01T09:00:00.000000000Z stdout F stale\n").unwrap();
    write_log(&dirs, &uid, 0, "2024-05-01T10:00:00.000000000Z stdout F first run\n");
    write_log(
        &dirs,
        &uid,
        1,
        "2024-05-01T11:00:00.000000000Z stdout F one\n\
         2024-05-01T11:00:01.000000000Z stderr P tw\n\
         2024-05-01T11:00:02.000000000Z stderr F o\n\
         2024-05-01T11:00:03.000000000Z stdout F three\n",
    );
    assert_eq!(agent.get(base), (200, "one\ntwo\nthree\n".into()));
    assert_eq!(agent.get(&format!("{base}?tailLines=1")).1, "three\n");
    assert_eq!(agent.get(&format!("{base}?limitBytes=6")).1, "one\ntw");
    assert_eq!(agent.get(&format!("{base}?previous=true")).1, "first run\n");
    assert_eq!(
        agent.get(&format!("{base}?sinceTime=2024-05-01T11:00:02Z&timestamps=true")).1,
        "2024-05-01T11:00:03.000000000Z three\n"
    );
    // sinceSeconds counts back from now: these records are older.
    assert_eq!(agent.get(&format!("{base}?sinceSeconds=60")), (200, String::new()));

    for (path, status, reason, named) in [
        ("/containerLogs/default/nope/main".to_owned(), 404, "NotFound", "default/nope"),
        ("/containerLogs/apps/web-edge-1/main".to_owned(), 404, "NotFound", "apps/web-edge-1"),
        ("/containerLogs/default/web-edge-1/other".to_owned(), 404, "NotFound", "other"),
        (format!("{base}?tailLines=ten"), 400, "BadRequest", "tailLines"),
        (format!("{base}?follow=true&previous=true"), 400, "BadRequest", "previous"),
    ] {
        let (got, body) = agent.get(&path);
        assert_eq!(got, status, "{path}: {body}");
        let answer = json(&body);
        assert_eq!((answer["kind"].as_str(), answer["reason"].as_str()), (Some("Status"), Some(reason)), "{body}");
        assert_eq!(answer["code"], status);
        assert!(answer["message"].as_str().unwrap().contains(named), "{path}: {body}");
    }
}

/// The agent's open inotify instances.
fn inotify_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("inotify"))
        .count()
}

/// Reads from `stream` until what arrived contains `needle` (a hang fails the test).
fn read_until(stream: &mut TcpStream, seen: &mut Vec<u8>, needle: &str) {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(seen).contains(needle) {
        let n = stream.read(&mut buf).unwrap_or_else(|e| panic!("waiting for {needle:?}: {e}"));
        assert!(n > 0, "closed before {needle:?}: {}", String::from_utf8_lossy(seen));
        seen.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn following_container_logs_streams_until_the_client_goes_away() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let uid = web_uid(&agent);
    let log = write_log(&dirs, &uid, 0, "2024-05-01T11:00:00.000000000Z stdout F before\n");
    let before = inotify_fds(agent.pid());

    let mut stream = TcpStream::connect(&agent.addr).unwrap();
    let path = "/containerLogs/default/web-edge-1/main?follow=true";
    stream.write_all(request_head("GET", path, &[], 0).as_bytes()).unwrap();
    let mut seen = Vec::new();
    read_until(&mut stream, &mut seen, "before\n");
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&seen));
    assert!(inotify_fds(agent.pid()) > before, "following watches the directory");
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(b"2024-05-01T11:00:01.000000000Z stdout F after\n").unwrap();
    read_until(&mut stream, &mut seen, "after\n");
    // A restart: the next run's file is followed too.
    write_log(&dirs, &uid, 1, "2024-05-01T11:00:02.000000000Z stdout F restarted\n");
    read_until(&mut stream, &mut seen, "restarted\n");

    drop(stream);
    eventually("the reader stops and its inotify watch goes", PATIENCE, || {
        inotify_fds(agent.pid()) == before
    });
    assert_eq!(agent.get("/healthz").0, 200);
    assert_eq!(agent.get("/containerLogs/default/web-edge-1/main?tailLines=1").1, "restarted\n");
}

/// A TCP connection to `to` from the local address `from`.
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket};
    let SocketAddr::V4(to) = to else { panic!("{to} is not IPv4") };
    let fd = socket(AddressFamily::Inet, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).unwrap();
    bind(fd.as_raw_fd(), &SockaddrIn::from(SocketAddrV4::new(from, 0))).unwrap();
    connect(fd.as_raw_fd(), &SockaddrIn::from(to)).unwrap();
    TcpStream::from(fd)
}

#[test]
fn a_slowloris_client_does_not_stop_others_and_its_stalled_connections_are_closed() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let addr: SocketAddr = agent.addr.parse().unwrap();
    // 40 connections from another loopback address, more than one address may hold,
    // each sending a request head a byte at a time and never finishing it.
    let slow = Ipv4Addr::new(127, 0, 0, 2);
    let stalled: Vec<TcpStream> = (0..40).map(|_| connect_from(slow, addr)).collect();
    let writers: Vec<TcpStream> = stalled.iter().map(|s| s.try_clone().unwrap()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let dribbler = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let head = b"GET /pods HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
            let mut writers = writers;
            for byte in head.iter().cycle() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                for w in &mut writers {
                    let _ = w.write(std::slice::from_ref(byte));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
    // Others are served meanwhile.
    assert_eq!(agent.get("/healthz"), (200, "ok".into()));
    let (status, pods) = agent.get("/pods");
    assert_eq!(status, 200);
    assert!(pods.contains("web-edge-1"));
    // Every stalled connection ends: past the per-address cap at once, the others at
    // the header read timeout.
    for mut s in stalled {
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut answer = Vec::new();
        match s.read_to_end(&mut answer) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!("a stalled connection stayed open: {e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    dribbler.join().unwrap();
    assert_eq!(agent.get("/healthz"), (200, "ok".into()));
}

#[test]
fn an_oversized_request_head_is_refused_and_the_agent_keeps_serving() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let big = "a".repeat(64 * 1024);
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let head = request_head("GET", "/pods", &[("X-Big", &big)], 0);
    let _ = s.write_all(head.as_bytes());
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let (status, _) = split_response(&String::from_utf8_lossy(&answer));
    assert_eq!(status, 431, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(agent.get("/healthz"), (200, "ok".into()));
    assert_eq!(agent.get("/pods").0, 200);
}

#[test]
fn container_logs_of_a_real_pod_follow_its_output() {
    let Some(node) = Node::new() else { return };
    let agent = node.start();
    let script = "i=0; while true; do echo line-$i; i=$((i+1)); sleep 0.2; done";
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: talk\nspec:\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {}]\n",
        serde_json::to_string(script).unwrap()
    );
    node.put("talk.yaml", &manifest);
    wait_pod(&agent, "talk-edge-1", PATIENCE, |p| container(p)["state"]["running"].is_object());
    let path = "/containerLogs/default/talk-edge-1/main";
    let (_, body) = agent.poll_within(path, PATIENCE, |status, body| status == 200 && body.contains("line-2\n"));
    assert!(body.starts_with("line-0\nline-1\n"), "{body}");

    let mut stream = TcpStream::connect(&agent.addr).unwrap();
    let head = request_head("GET", &format!("{path}?follow=true&tailLines=1&timestamps=true"), &[], 0);
    stream.write_all(head.as_bytes()).unwrap();
    let mut seen = Vec::new();
    // Lines written after the request arrive on it.
    let (_, now) = agent.get(path);
    let next = now.lines().count() + 3;
    read_until(&mut stream, &mut seen, &format!(" line-{next}\n"));
    drop(stream);
    assert_eq!(agent.get("/healthz").0, 200);
}
