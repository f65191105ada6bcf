//! The push source through the real binary: `PUT/DELETE/GET /manifests`, `POST /refresh`,
//! bearer tokens and client certificates, persistence across restarts. Pushed pods are
//! static pods of config source `http` located at their push key (S5).
//!
//! "Nothing changed" is shown by order, never by waiting: after a refused request a
//! marker manifest is pushed, and the next delta must be the marker's.

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::mpsc;

use outpost_core::manifest::MAX_MANIFEST_BYTES;
use outpost_tests::agent::{Agent, request_head, split_response};
use outpost_tests::{outpost_bin, pod_yaml, write_private};
use serde_json::Value;

const TOKEN: &str = "s3cret-token";

/// An agent with a token file and its own state directory.
struct Pusher {
    agent: Agent,
    dirs: Dirs,
}

struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("manifests")).unwrap();
        write_private(&root.path().join("token"), format!("{TOKEN}\n"));
        Dirs { root }
    }

    fn manifests(&self) -> PathBuf {
        self.root.path().join("manifests")
    }

    fn state(&self) -> PathBuf {
        self.root.path().join("state")
    }

    fn token_file(&self) -> PathBuf {
        self.root.path().join("token")
    }

    fn start(&self, extra: &[&str]) -> Agent {
        let mut args: Vec<String> = vec![
            "--token-file".into(),
            self.token_file().display().to_string(),
            "--state-dir".into(),
            self.state().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        Agent::start_args(&self.manifests(), &args)
    }
}

impl Pusher {
    fn start() -> Pusher {
        let dirs = Dirs::new();
        Pusher { agent: dirs.start(&[]), dirs }
    }

    /// An authenticated request → (status, JSON body).
    fn call(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        let auth = format!("Bearer {TOKEN}");
        let (status, body) = self.agent.request(method, path, &[("Authorization", &auth)], body);
        let json = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{method} {path}: answer is not JSON ({e}): {body}"));
        (status, json)
    }

    fn put(&self, key: &str, body: &str) -> (u16, Value) {
        self.call("PUT", &format!("/manifests/{key}"), body.as_bytes())
    }

    /// Pushes a fresh marker pod and checks that it is the next delta: whatever was
    /// refused before it changed nothing.
    fn expect_nothing_before_marker(&self, marker: &str) {
        let (status, body) = self.put(marker, &pod_yaml(marker, "busybox"));
        assert_eq!(status, 201, "{body}");
        let delta = self.agent.delta();
        assert_eq!(
            (delta["op"].as_str(), delta["name"].as_str()),
            (Some("ADD"), Some(format!("{marker}-edge-1").as_str())),
            "the refused request changed something: {delta}"
        );
    }
}

fn pod_list_json(names: &[&str]) -> String {
    let items: Vec<String> = names
        .iter()
        .map(|n| {
            format!(
                r#"{{"metadata":{{"name":"{n}","namespace":"apps"}},"spec":{{"containers":[{{"name":"c","image":"busybox"}}]}}}}"#
            )
        })
        .collect();
    format!(r#"{{"apiVersion":"v1","kind":"PodList","items":[{}]}}"#, items.join(","))
}

fn pod_list_yaml(names: &[&str]) -> String {
    let mut yaml = String::from("apiVersion: v1\nkind: PodList\nitems:\n");
    for n in names {
        yaml.push_str(&format!(
            "- metadata:\n    name: {n}\n  spec:\n    containers:\n    - name: c\n      image: busybox\n"
        ));
    }
    yaml
}

/// Sends raw bytes as one request and returns the whole answer (head and body), or what
/// arrived of it before the connection closed.
fn raw(addr: &str, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn status_of(answer: &str) -> u16 {
    split_response(answer).0
}

#[test]
fn unauthenticated_requests_get_401_and_change_nothing() {
    let p = Pusher::start();
    let body = pod_yaml("web", "busybox");
    // No token: 401 with a challenge.
    let head = format!(
        "PUT /manifests/web HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = raw(&p.agent.addr, head.as_bytes());
    assert_eq!(status_of(&answer), 401, "{answer}");
    assert!(answer.to_ascii_lowercase().contains("www-authenticate: bearer"), "{answer}");
    assert!(answer.contains("--token-file"), "the answer says how to authenticate: {answer}");
    // A wrong token, a token of another scheme, a prefix of the token.
    for auth in ["Bearer wrong", "Basic czNjcmV0LXRva2Vu", "Bearer s3cret", "s3cret-token"] {
        let (status, answer) =
            p.agent.request("PUT", "/manifests/web", &[("Authorization", auth)], body.as_bytes());
        assert_eq!(status, 401, "{auth}: {answer}");
        let (status, _) =
            p.agent.request("DELETE", "/manifests/web", &[("Authorization", auth)], b"");
        assert_eq!(status, 401);
        let (status, _) = p.agent.request("GET", "/manifests", &[("Authorization", auth)], b"");
        assert_eq!(status, 401);
    }
    // Read endpoints need nothing.
    assert_eq!(p.agent.get("/healthz").0, 200);
    assert_eq!(p.agent.get("/pods").0, 200);
    p.expect_nothing_before_marker("marker");
    let (_, list) = p.call("GET", "/manifests", b"");
    assert_eq!(list["manifests"].as_array().map(Vec::len), Some(1), "{list}");
}

#[test]
fn pushed_pods_are_static_http_pods_with_uids_from_body_key_and_node() {
    let p = Pusher::start();
    let (status, stored) = p.put("web", &pod_yaml("web", "busybox"));
    assert_eq!(status, 201, "{stored}");
    assert_eq!(stored["change"], "created");
    let add = p.agent.delta();
    assert_eq!(add["op"], "ADD");
    assert_eq!(add["source"], "push");
    assert_eq!(
        (add["namespace"].as_str(), add["name"].as_str()),
        (Some("default"), Some("web-edge-1"))
    );
    let uid = add["uid"].as_str().unwrap().to_owned();
    assert_eq!(uid.len(), 32, "S5");
    assert_eq!(add["hash"], uid.as_str(), "S6");
    assert_eq!(stored["pods"][0]["uid"], uid.as_str());
    assert!(stored["digest"].as_str().unwrap().starts_with("sha256:"));

    let (_, body) = p.agent.get("/pods");
    let pods: Value = serde_json::from_str(&body).unwrap();
    let pod = &pods["items"][0];
    assert_eq!(pod["metadata"]["uid"], uid.as_str());
    assert_eq!(pod["metadata"]["annotations"]["kubernetes.io/config.source"], "http", "M1");
    assert_eq!(pod["spec"]["nodeName"], "edge-1", "S4");

    // The same body again: nothing to do.
    let (status, again) = p.put("web", &pod_yaml("web", "busybox"));
    assert_eq!((status, again["change"].as_str()), (200, Some("unchanged")), "{again}");

    // DELETE removes it; pushing the same body under the same key brings back the same
    // UID (S5), under another key a different one.
    let (status, removed) = p.call("DELETE", "/manifests/web", b"");
    assert_eq!(status, 200, "{removed}");
    assert_eq!(removed["pods"][0]["uid"], uid.as_str());
    let remove = p.agent.delta();
    assert_eq!(
        (remove["op"].as_str(), remove["uid"].as_str()),
        (Some("REMOVE"), Some(uid.as_str()))
    );
    let (status, _) = p.put("web", &pod_yaml("web", "busybox"));
    assert_eq!(status, 201);
    let add = p.agent.delta();
    assert_eq!((add["op"].as_str(), add["uid"].as_str()), (Some("ADD"), Some(uid.as_str())), "S5");
    p.call("DELETE", "/manifests/web", b"");
    assert_eq!(p.agent.delta()["op"], "REMOVE");
    p.put("web2", &pod_yaml("web", "busybox"));
    let add = p.agent.delta();
    assert_eq!(add["op"], "ADD");
    assert_ne!(add["uid"], uid.as_str(), "S5: the key is part of the UID");

    let (status, missing) = p.call("DELETE", "/manifests/web", b"");
    assert_eq!(status, 404, "{missing}");
    assert!(missing["error"].as_str().unwrap().contains("web"), "{missing}");
}

#[test]
fn yaml_and_json_pods_and_pod_lists_are_accepted() {
    let p = Pusher::start();
    let json_pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#;
    let cases = [
        // Not `y`: a bare `y` is a boolean to go-yaml, and so not a name (S12).
        ("yaml-pod", pod_yaml("yp", "busybox"), vec!["yp-edge-1"]),
        ("json-pod", json_pod.to_owned(), vec!["j-edge-1"]),
        ("yaml-list", pod_list_yaml(&["ya", "yb"]), vec!["ya-edge-1", "yb-edge-1"]),
        ("json-list", pod_list_json(&["ja", "jb"]), vec!["ja-edge-1", "jb-edge-1"]),
    ];
    for (key, body, names) in cases {
        // No content type is needed; a YAML or JSON one is fine too.
        let content_type =
            if key.starts_with("json") { "application/json" } else { "application/yaml" };
        let auth = format!("Bearer {TOKEN}");
        let (status, answer) = p.agent.request(
            "PUT",
            &format!("/manifests/{key}"),
            &[("Authorization", &auth), ("Content-Type", content_type)],
            body.as_bytes(),
        );
        assert_eq!(status, 201, "{key}: {answer}");
        let mut added: Vec<String> = names
            .iter()
            .map(|_| {
                let d = p.agent.delta();
                assert_eq!((d["op"].as_str(), d["source"].as_str()), (Some("ADD"), Some("push")));
                d["name"].as_str().unwrap().to_owned()
            })
            .collect();
        added.sort();
        assert_eq!(added, names, "{key}");
    }
    let (status, list) = p.call("GET", "/manifests", b"");
    assert_eq!(status, 200);
    let keys: Vec<&str> =
        list["manifests"].as_array().unwrap().iter().map(|m| m["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["json-list", "json-pod", "yaml-list", "yaml-pod"]);
    let (status, one) = p.call("GET", "/manifests/json-list", b"");
    assert_eq!(status, 200, "{one}");
    let pods: Vec<&str> =
        one["pods"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(pods, ["ja-edge-1", "jb-edge-1"]);
    assert_eq!(one["pods"][0]["namespace"], "apps");
    assert!(one["pushedAt"].is_string() && one["size"].is_u64(), "{one}");
}

#[test]
fn bad_bodies_and_keys_get_400_with_line_and_column_and_change_nothing() {
    let p = Pusher::start();
    let (status, answer) = p.put("web", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [\n");
    assert_eq!(status, 400, "{answer}");
    let details: Vec<&str> =
        answer["details"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    assert!(!details.is_empty(), "{answer}");
    for d in &details {
        let mut parts = d.splitn(4, ':');
        assert_eq!(parts.next(), Some("web"), "{d}");
        assert!(parts.next().unwrap().parse::<u32>().is_ok(), "L in {d}");
        assert!(parts.next().unwrap().parse::<u32>().is_ok(), "C in {d}");
    }
    assert!(answer["error"].as_str().unwrap().contains("web:"), "{answer}");

    // S1: no name.
    let (status, answer) = p
        .put("web", "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    image: x\n");
    assert_eq!(status, 400);
    assert!(answer.to_string().contains("metadata.name"), "{answer}");
    // Not a pod, an empty body, a bad key (percent-decoded to a slash).
    let (status, answer) = p.put("web", "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n");
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = p.put("web", "");
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = p.put("a%2Fb", &pod_yaml("web", "busybox"));
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("push key"), "{answer}");
    let (status, answer) = p.put("..", &pod_yaml("web", "busybox"));
    assert!(matches!(status, 400 | 404), "{status} {answer}");
    // Wrong methods and a missing key get the same JSON shape.
    let (status, answer) = p.call("POST", "/manifests/web", b"");
    assert_eq!(status, 405, "{answer}");
    assert!(answer["error"].is_string() && answer["details"].is_array(), "{answer}");
    let (status, answer) = p.put("", &pod_yaml("web", "busybox"));
    assert_eq!(status, 404, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("key"), "{answer}");
    p.expect_nothing_before_marker("marker");
}

#[test]
fn a_pod_pushed_under_one_key_cannot_be_pushed_under_another() {
    let p = Pusher::start();
    assert_eq!(p.put("a", &pod_yaml("web", "busybox")).0, 201);
    assert_eq!(p.agent.delta()["op"], "ADD");
    let (status, answer) = p.put("b", &pod_yaml("web", "busybox:2"));
    assert_eq!(status, 409, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains("default/web-edge-1") && error.contains("key a"), "{error}");
    p.expect_nothing_before_marker("marker");
}

#[test]
fn an_oversized_body_gets_413_and_changes_nothing() {
    // S8: over 10 MiB. The agent may answer before the whole body is sent and close the
    // connection, so the body is sent from another thread and write errors are expected.
    let p = Pusher::start();
    let mut body = pod_yaml("big", "busybox").into_bytes();
    body.resize(MAX_MANIFEST_BYTES + 1, b'\n');
    let head = format!(
        "PUT /manifests/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut s = TcpStream::connect(&p.agent.addr).unwrap();
    let mut writer = s.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(head.as_bytes()).and_then(|()| writer.write_all(&body));
    });
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let _ = sender.join();
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(status_of(&answer), 413, "{answer}");
    assert!(answer.contains("10 MiB"), "{answer}");
    p.expect_nothing_before_marker("marker");
}

#[test]
fn a_truncated_body_changes_nothing() {
    let p = Pusher::start();
    let body = pod_list_yaml(&["cut", "off"]);
    let half = &body.as_bytes()[..body.len() / 2];
    let head = format!(
        "PUT /manifests/cut HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    // The client sends half the body, then closes its side.
    let mut s = TcpStream::connect(&p.agent.addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(half).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let status = status_of(&answer);
    assert!(status == 0 || status >= 400, "a cut body is never accepted: {answer}");
    // And the client that vanishes altogether.
    let mut s = TcpStream::connect(&p.agent.addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(half).unwrap();
    drop(s);
    p.expect_nothing_before_marker("marker");
    let (_, one) = p.call("GET", "/manifests/cut", b"");
    assert!(one["error"].is_string(), "{one}");
}

#[test]
fn a_changed_manifest_is_remove_then_add() {
    // M10: a changed body is a new UID.
    let p = Pusher::start();
    p.put("web", &pod_yaml("web", "busybox:1"));
    let first = p.agent.delta();
    let (status, answer) = p.put("web", &pod_yaml("web", "busybox:2"));
    assert_eq!((status, answer["change"].as_str()), (200, Some("replaced")), "{answer}");
    let remove = p.agent.delta();
    let add = p.agent.delta();
    assert_eq!(
        (remove["op"].as_str(), remove["uid"].as_str()),
        (Some("REMOVE"), first["uid"].as_str())
    );
    assert_eq!((add["op"].as_str(), add["name"].as_str()), (Some("ADD"), Some("web-edge-1")));
    assert_ne!(add["uid"], first["uid"]);
    assert_eq!(answer["pods"][0]["uid"], add["uid"]);
}

#[test]
fn pushed_manifests_survive_a_restart_with_the_same_uids() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let p = Pusher { agent, dirs };
    p.put("a", &pod_list_yaml(&["a1", "a2"]));
    p.put("b", &pod_yaml("b", "busybox"));
    let mut before: Vec<(String, String)> = (0..3)
        .map(|_| {
            let d = p.agent.delta();
            (d["name"].as_str().unwrap().to_owned(), d["uid"].as_str().unwrap().to_owned())
        })
        .collect();
    before.sort();
    let Pusher { agent, dirs } = p;
    agent.stop();

    // Nothing is pushed this time: the pods come from the checkpoint.
    let agent = dirs.start(&[]);
    let mut after: Vec<(String, String)> = (0..3)
        .map(|_| {
            let d = agent.delta();
            assert_eq!((d["op"].as_str(), d["source"].as_str()), (Some("ADD"), Some("push")));
            (d["name"].as_str().unwrap().to_owned(), d["uid"].as_str().unwrap().to_owned())
        })
        .collect();
    after.sort();
    assert_eq!(after, before);
    let (status, ready) = agent.get("/readyz?verbose");
    assert_eq!(status, 200, "{ready}");
    assert!(ready.contains("[+]source-push ok: from checkpoint"), "{ready}");
    let p = Pusher { agent, dirs };
    let (_, list) = p.call("GET", "/manifests", b"");
    assert_eq!(list["manifests"].as_array().map(Vec::len), Some(2), "{list}");
    // A push makes it live again.
    p.put("c", &pod_yaml("c", "busybox"));
    assert_eq!(p.agent.delta()["name"], "c-edge-1");
    let (_, ready) = p.agent.get("/readyz?verbose");
    assert!(ready.contains("[+]source-push ok: live"), "{ready}");
}

#[test]
fn a_corrupt_checkpoint_is_set_aside_and_the_agent_starts_empty() {
    let dirs = Dirs::new();
    let checkpoint = dirs.state().join("checkpoints/push.json");
    fs::create_dir_all(checkpoint.parent().unwrap()).unwrap();
    fs::write(&checkpoint, "outpost-checkpoint v1 len=2 xxh3=0\n{}").unwrap();
    let agent = dirs.start(&[]);
    let line = agent.wait_for_log("push.json.corrupt");
    assert!(line.contains("push the manifests again"), "{line}");
    assert!(dirs.state().join("checkpoints/push.json.corrupt").is_file());
    // The merge reports the failure on /readyz once it has taken the source's events.
    let (status, _) =
        agent.poll("/readyz?verbose", |_, body| body.contains("source-push ok: live (failing:"));
    assert_eq!(status, 200, "the source is seen, empty");
    let p = Pusher { agent, dirs };
    p.expect_nothing_before_marker("marker");
    let (_, ready) = p.agent.get("/readyz?verbose");
    assert!(!ready.contains("failing"), "a good push clears the failure: {ready}");
}

#[test]
fn without_credentials_configured_the_push_endpoint_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let agent = Agent::start_args(dir.path(), &["--state-dir", state.to_str().unwrap()]);
    let body = pod_yaml("web", "busybox");
    let (status, answer) = agent.request(
        "PUT",
        "/manifests/web",
        &[("Authorization", "Bearer anything")],
        body.as_bytes(),
    );
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("--token-file") && answer.contains("--client-ca-file"), "{answer}");
    let (status, _) = agent.request("POST", "/refresh", &[], b"");
    assert_eq!(status, 403);
    let (_, ready) = agent.get("/readyz?verbose");
    assert!(!ready.contains("source-push"), "no push source: {ready}");
}

#[test]
fn bad_credentials_files_stop_the_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty-token");
    write_private(&empty, " \n");
    let missing = dir.path().join("missing-token");
    let not_pem = dir.path().join("not-a-cert.pem");
    write_private(&not_pem, "hello");
    let cases: [(&[&Path], &Path); 3] = [
        (&[Path::new("--token-file"), &empty], &empty),
        (&[Path::new("--token-file"), &missing], &missing),
        (
            &[
                Path::new("--tls-cert-file"),
                &not_pem,
                Path::new("--tls-private-key-file"),
                &not_pem,
            ],
            &not_pem,
        ),
    ];
    for (args, named) in cases {
        let out = Command::new(outpost_bin())
            .args(["run", "--dry-run", "--node-name", "n", "--listen", "127.0.0.1:0"])
            .arg("--manifest-dir")
            .arg(dir.path())
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must not start: {stderr}");
        assert!(stderr.contains(&named.display().to_string()), "{args:?}: {stderr}");
    }
}

#[test]
fn refresh_needs_the_token_and_a_manifest_url() {
    let p = Pusher::start();
    let (status, _) = p.agent.request("POST", "/refresh", &[], b"");
    assert_eq!(status, 401);
    let (status, answer) = p.call("POST", "/refresh", b"");
    assert_eq!(status, 404, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("--manifest-url"), "{answer}");
}

/// A manifest server that answers every GET with one pod and reports each request.
fn counting_server() -> (String, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let body = pod_yaml("fetched", "busybox");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/yaml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            if tx.send(()).is_err() {
                break;
            }
        }
    });
    (addr, rx)
}

#[test]
fn refresh_fetches_the_manifest_url_now() {
    let (addr, fetches) = counting_server();
    let dirs = Dirs::new();
    let url = format!("http://{addr}/pods.yaml");
    let agent = dirs.start(&["--manifest-url", &url, "--manifest-url-interval", "1h"]);
    let hang = std::time::Duration::from_secs(30);
    fetches.recv_timeout(hang).expect("the first fetch");
    let p = Pusher { agent, dirs };
    let (status, _) = p.agent.request("POST", "/refresh", &[], b"");
    assert_eq!(status, 401, "refresh needs authentication");
    let (status, answer) = p.call("POST", "/refresh", b"");
    assert_eq!(status, 202, "{answer}");
    fetches.recv_timeout(hang).expect("a fetch right after POST /refresh");
}

/// Certificates for the mTLS test: a CA, the agent's certificate for 127.0.0.1, a client
/// certificate from the CA, and one from a CA the agent does not trust.
pub(crate) struct Pki {
    dir: tempfile::TempDir,
    ca: rustls_pki_types::CertificateDer<'static>,
    pub(crate) client: (String, String),
    stranger: (String, String),
}

impl Pki {
    pub(crate) fn new() -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        fn ca(name: &str) -> (rcgen::Certificate, CertificateParams, KeyPair) {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            (params.self_signed(&key).unwrap(), params, key)
        }
        fn leaf(
            sans: &[&str],
            usage: ExtendedKeyUsagePurpose,
            issuer: &Issuer<'_, &KeyPair>,
        ) -> (String, String) {
            let key = KeyPair::generate().unwrap();
            let mut params =
                CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                    .unwrap();
            params.distinguished_name.push(DnType::CommonName, sans[0]);
            params.extended_key_usages = vec![usage];
            (params.signed_by(&key, issuer).unwrap().pem(), key.serialize_pem())
        }
        let (ca_cert, ca_params, ca_key) = ca("outpost test CA");
        let issuer = Issuer::from_params(&ca_params, &ca_key);
        let (other_cert, other_params, other_key) = ca("someone else's CA");
        let _ = other_cert;
        let other = Issuer::from_params(&other_params, &other_key);
        let server = leaf(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth, &issuer);
        let client = leaf(&["operator"], ExtendedKeyUsagePurpose::ClientAuth, &issuer);
        let stranger = leaf(&["stranger"], ExtendedKeyUsagePurpose::ClientAuth, &other);
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("ca.pem"), ca_cert.pem()).unwrap();
        fs::write(dir.path().join("server.pem"), &server.0).unwrap();
        write_private(&dir.path().join("server-key.pem"), &server.1);
        Pki { dir, ca: ca_cert.der().clone(), client, stranger }
    }

    pub(crate) fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// One HTTP/1.1 request over TLS → (status, body), with an optional client
    /// certificate (PEM chain, PEM key). Err when the handshake or the connection fails.
    pub(crate) fn request(
        &self,
        addr: &str,
        client: Option<&(String, String)>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<(u16, String)> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone()).unwrap();
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match client {
            Some((cert, key)) => builder
                .with_client_auth_cert(
                    vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                    PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
                )
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, TcpStream::connect(addr)?);
        tls.write_all(request_head(method, path, headers, body.len()).as_bytes())?;
        tls.write_all(body)?;
        let mut answer = Vec::new();
        if let Err(e) = tls.read_to_end(&mut answer)
            && (e.kind() != ErrorKind::UnexpectedEof || answer.is_empty())
        {
            return Err(e);
        }
        Ok(split_response(&String::from_utf8_lossy(&answer)))
    }
}

#[test]
fn a_client_certificate_from_the_client_ca_authenticates_without_a_token() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let agent = Agent::start_args(
        dir.path(),
        &[
            "--state-dir",
            state.to_str().unwrap(),
            "--tls-cert-file",
            &pki.file("server.pem"),
            "--tls-private-key-file",
            &pki.file("server-key.pem"),
            "--client-ca-file",
            &pki.file("ca.pem"),
        ],
    );
    // Agent::get talks plain HTTP, so every request here goes through the TLS client.
    let addr = agent.addr.clone();
    let body = pod_yaml("web", "busybox");

    // Read endpoints work without a certificate.
    let (status, ok) = pki.request(&addr, None, "GET", "/healthz", &[], b"").unwrap();
    assert_eq!((status, ok.trim()), (200, "ok"));
    // State changes do not: 401, and no token is configured to offer instead.
    let (status, answer) =
        pki.request(&addr, None, "PUT", "/manifests/web", &[], body.as_bytes()).unwrap();
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("--client-ca-file"), "{answer}");
    let (status, _) = pki
        .request(&addr, None, "PUT", "/manifests/web", &[("Authorization", "Bearer x")], b"")
        .unwrap();
    assert_eq!(status, 401);
    // A certificate from a CA the agent does not trust fails the handshake.
    let stranger = pki.request(&addr, Some(&pki.stranger), "PUT", "/manifests/web", &[], b"");
    assert!(stranger.is_err(), "untrusted client certificate accepted: {stranger:?}");

    // A certificate signed by the client CA is enough.
    let (status, answer) = pki
        .request(&addr, Some(&pki.client), "PUT", "/manifests/web", &[], body.as_bytes())
        .unwrap();
    assert_eq!(status, 201, "{answer}");
    let add = agent.delta();
    assert_eq!((add["op"].as_str(), add["name"].as_str()), (Some("ADD"), Some("web-edge-1")));
    let (status, list) =
        pki.request(&addr, Some(&pki.client), "GET", "/manifests", &[], b"").unwrap();
    assert_eq!(status, 200, "{list}");
    assert!(list.contains("web-edge-1"), "{list}");
    let (status, pods) = pki.request(&addr, None, "GET", "/pods", &[], b"").unwrap();
    assert_eq!(status, 200);
    assert!(pods.contains("web-edge-1"), "{pods}");
    // Plain HTTP gets no answer from a TLS port.
    let plain = raw(&addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_ne!(status_of(&plain), 200, "{plain}");
}
