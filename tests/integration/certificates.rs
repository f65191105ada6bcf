//! J1, J2: TLS bootstrapping and client-certificate rotation through the real binary
//! (`outpost run --dry-run --bootstrap-kubeconfig …`) against the test API server with
//! TLS, its approver and signer: the node gets its certificate with a bootstrap token
//! and then talks as `system:node:edge-1`; a certificate of 20 s is renewed without a
//! restart; a certificate that expired while the node was cut off is replaced through
//! the bootstrap token once the server is back; with `serverTLSBootstrap` the local
//! API's serving certificate is renewed under an open connection. The figures (time to
//! the certificate, requests a rotation costs) are printed: run with `--nocapture`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use outpost_tests::agent::Agent;
use outpost_tests::faketime::FakeClock;
use outpost_tests::needs;
use outpost_tests::pods::eventually;
use serde_json::{Value, json};

use crate::api_source::Cluster;

const NODE_USER: &str = "system:node:edge-1";
const CSRS: &str = "certificatesigningrequests";

/// A TLS server whose signer issues certificates of `lifetime`.
fn cluster(lifetime: Duration) -> Cluster {
    Cluster::start_with(|b| b.tls().signing_duration(lifetime))
}

/// The bootstrap kubeconfig for `token`, written in the cluster's dir.
fn bootstrap_kubeconfig(cluster: &Cluster, token: &str) -> PathBuf {
    let dir = cluster.dir.path();
    cluster
        .server
        .kubeconfig_for_user(dir, "bootstrap-kubeconfig", json!({ "token": token }))
        .unwrap()
}

/// `outpost run --dry-run` with a bootstrap kubeconfig for `token` and the kubeconfig
/// it is to write, its state in the cluster's dir; and the kubeconfig's path.
fn bootstrap_agent(cluster: &Cluster, token: &str) -> (Agent, PathBuf) {
    let agent = bootstrap_agent_in(cluster, token, Command::new(outpost_tests::outpost_bin()));
    (agent, cluster.dir.path().join("agent").join("kubeconfig"))
}

/// [`bootstrap_agent`] through `command` (the binary, with a fake clock).
fn bootstrap_agent_in(cluster: &Cluster, token: &str, command: Command) -> Agent {
    let dir = cluster.dir.path();
    let bootstrap = bootstrap_kubeconfig(cluster, token);
    let kubeconfig = dir.join("agent").join("kubeconfig");
    Agent::start_with(
        command,
        &dir.join("manifests"),
        &[
            "--kubeconfig".as_ref(),
            kubeconfig.as_os_str(),
            "--bootstrap-kubeconfig".as_ref(),
            bootstrap.as_os_str(),
            "--state-dir".as_ref(),
            cluster.state_dir().as_os_str(),
        ],
    )
}

/// Waits (a hang guard) until `check` holds.
fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The timestamp a log line starts with.
fn log_time(line: &str) -> jiff::Timestamp {
    line.split_whitespace().next().unwrap_or_default().parse().unwrap()
}

fn count(agent: &Agent, needle: &str) -> usize {
    agent.log().lines().filter(|line| line.contains(needle)).count()
}

/// The CSRs the server holds, as (sender, has a certificate).
fn csrs(cluster: &Cluster) -> Vec<(String, bool)> {
    let all = cluster.server.list(CSRS, None).unwrap();
    all.iter()
        .map(|csr| {
            let user = csr.pointer("/spec/username").and_then(Value::as_str).unwrap_or_default();
            (user.to_owned(), csr.pointer("/status/certificate").is_some())
        })
        .collect()
}

/// A pod bound to the node reaches the agent (its API source works with its
/// credentials).
fn pod_arrives(cluster: &Cluster, agent: &Agent, name: &str) {
    cluster.create(name, "edge-1");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let delta = agent.delta_within(left).unwrap_or_else(|| panic!("pod {name} never arrived"));
        if delta["name"] == name {
            return;
        }
    }
}

/// J1: from a bootstrap token to a client certificate in kubelet's layout, with the key
/// made on the node and never sent, and the agent then talking as the node.
#[test]
fn j1_tls_bootstrapping_from_a_token() {
    let cluster = cluster(Duration::from_secs(3600));
    let token = cluster.server.create_bootstrap_token(Some(Duration::from_secs(600))).unwrap();
    let id = token.split('.').next().unwrap().to_owned();
    let (agent, kubeconfig) = bootstrap_agent(&cluster, &token);
    let done = agent.wait_for_log("TLS bootstrapping done");
    let start = agent.wait_for_log("starting node=");
    cluster.wait_for_watch();
    println!(
        "J1 figures: from the agent's start to its client certificate: {:?}",
        log_time(&done).duration_since(log_time(&start))
    );

    // kubelet's layout: a private file per certificate and the current link.
    let pki = cluster.state_dir().join("pki");
    let current = pki.join("kubelet-client-current.pem");
    let target = std::fs::read_link(&current).unwrap();
    let target_name = target.to_string_lossy().to_string();
    assert!(target_name.starts_with("kubelet-client-") && target_name.ends_with(".pem"));
    let mode = std::fs::metadata(pki.join(&target)).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let pem = std::fs::read_to_string(&current).unwrap();
    assert!(pem.contains("BEGIN CERTIFICATE") && pem.contains("PRIVATE KEY"));
    // The kubeconfig uses the link, so a renewal never rewrites it.
    let written = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(written.contains(current.to_str().unwrap()), "{written}");

    // One request, from the token, asking for the node's name; the key stayed home.
    let all = cluster.server.list(CSRS, None).unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    let csr = &all[0];
    assert_eq!(csr["spec"]["username"], format!("system:bootstrap:{id}"));
    assert_eq!(csr["spec"]["signerName"], "kubernetes.io/kube-apiserver-client-kubelet");
    assert!(!csr.to_string().contains("PRIVATE KEY"));

    pod_arrives(&cluster, &agent, "after-bootstrap");
    let by_user = cluster.server.requests_by_user();
    assert!(cluster.server.user_requests(NODE_USER) > 0, "{by_user:?}");
    // After the request, the token only waited for its certificate.
    let bootstrap_user = format!("system:bootstrap:{id}");
    let token_requests = cluster.server.user_requests(&bootstrap_user);
    println!("J1 figures: requests by {bootstrap_user}: {token_requests}; by user: {by_user:?}");

    // A restart keeps the certificate: no second request, and the node talks at once.
    agent.stop();
    let (again, _) = bootstrap_agent(&cluster, &token);
    again.wait_for_log("client certificate valid; waiting for its rotation deadline");
    pod_arrives(&cluster, &again, "after-restart");
    assert_eq!(cluster.server.list(CSRS, None).unwrap().len(), 1);
    assert_eq!(count(&again, "TLS bootstrapping"), 0);
}

/// J2: a client certificate of 20 s is renewed at 70–90 % of its lifetime through a
/// request sent with the current certificate, swapped in without a restart; after two
/// rotations (the first certificate long expired) new connections still authenticate.
/// The kubeconfig is never rewritten by a renewal: an operator's addition to it stays,
/// and its inode and modification time do not change.
#[test]
fn j2_client_certificate_rotates_without_restart() {
    let lifetime = Duration::from_secs(20);
    let cluster = cluster(lifetime);
    let token = cluster.server.create_bootstrap_token(None).unwrap();
    let (agent, kubeconfig) = bootstrap_agent(&cluster, &token);
    agent.wait_for_log("TLS bootstrapping done");
    cluster.wait_for_watch();
    // An operator adds to the file (appended in place: the same inode).
    let operator = "# an operator's note\n";
    let mut file = std::fs::OpenOptions::new().append(true).open(&kubeconfig).unwrap();
    std::io::Write::write_all(&mut file, operator.as_bytes()).unwrap();
    drop(file);
    let identity = |path: &std::path::Path| {
        let meta = std::fs::metadata(path).unwrap();
        (std::os::unix::fs::MetadataExt::ino(&meta), meta.modified().unwrap())
    };
    let kept = identity(&kubeconfig);
    let pid = agent.pid();
    let before = cluster.server.requests();
    let total_before = cluster.server.total_requests();
    let started = Instant::now();
    wait_until("two rotations", lifetime * 4, || count(&agent, "client certificate rotated") >= 2);
    let window = started.elapsed();
    assert_eq!(agent.pid(), pid);
    let after = cluster.server.requests();
    let csr_requests: Vec<_> = after
        .iter()
        .filter(|((_, resource), _)| resource.starts_with(CSRS))
        .map(|(key, n)| (key.clone(), n - before.get(key).copied().unwrap_or(0)))
        .collect();
    let per_rotation: u64 = csr_requests.iter().map(|(_, n)| n).sum::<u64>() / 2;
    println!(
        "J2 figures: 2 rotations in {window:?}; certificate requests {csr_requests:?}: {per_rotation} requests per rotation; all requests in the window: {}",
        cluster.server.total_requests() - total_before
    );
    // `/status` and `/metrics` show the expiry; 20 s is inside 7 days: a warning.
    let (code, body) = agent.get("/status");
    assert_eq!(code, 200, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    let client = &status["certificates"][0];
    assert_eq!(client["name"], "client");
    assert_eq!(client["state"], "expiring-soon", "{client}");
    assert!(client["notAfter"].is_string() && client["rotationDeadline"].is_string(), "{client}");
    let (_, metrics) = agent.get("/metrics");
    let rotations = metrics
        .lines()
        .find_map(|l| l.strip_prefix("outpost_certificate_manager_client_rotations_total "))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no rotations counter in\n{metrics}"));
    assert!(rotations >= 2, "{rotations}");
    assert!(metrics.contains("outpost_certificate_manager_client_ttl_seconds "), "{metrics}");
    // Both renewals were sent by the node itself and issued.
    let renewals: Vec<_> =
        csrs(&cluster).into_iter().filter(|(user, _)| user == NODE_USER).collect();
    assert!(renewals.len() >= 2 && renewals.iter().all(|(_, issued)| *issued), "{renewals:?}");
    // operations/certificates.md: a renewal moves the link and never rewrites the file.
    assert_eq!(identity(&kubeconfig), kept, "the kubeconfig was rewritten by a renewal");
    assert!(std::fs::read_to_string(&kubeconfig).unwrap().ends_with(operator));

    // New connections take the new certificate: cut every connection, and pods still
    // come (the bootstrap certificate expired long ago).
    cluster.cut();
    cluster.restore();
    pod_arrives(&cluster, &agent, "after-rotation");
}

/// J2: the certificate expires while the node is cut off; when the server is back, the
/// agent replaces it through the bootstrap token, without a restart, and pods come again.
#[test]
fn j2_expiry_while_cut_off_recovers_with_the_bootstrap_token() {
    let lifetime = Duration::from_secs(20);
    let cluster = cluster(lifetime);
    let token = cluster.server.create_bootstrap_token(None).unwrap();
    let (agent, _) = bootstrap_agent(&cluster, &token);
    agent.wait_for_log("TLS bootstrapping done");
    cluster.wait_for_watch();
    let pid = agent.pid();
    cluster.cut();
    // Past the certificate's end: the agent says so, and keeps running.
    wait_until("the expiry to be reported", lifetime * 3, || {
        count(&agent, "the node has no valid client certificate") >= 1
    });
    let cut_off_for = Instant::now();
    cluster.restore();
    wait_until("a second bootstrap", Duration::from_secs(90), || {
        count(&agent, "TLS bootstrapping done") >= 2
    });
    println!(
        "J2 figures: certificate replaced {:?} after the server came back",
        cut_off_for.elapsed()
    );
    assert_eq!(agent.pid(), pid);
    let from_token = csrs(&cluster)
        .into_iter()
        .filter(|(user, _)| user.starts_with("system:bootstrap:"))
        .count();
    assert_eq!(from_token, 2);
    pod_arrives(&cluster, &agent, "after-expiry");
}

/// A TLS connection to the local API that trusts the cluster CA and expects `edge-1`.
type Tls = rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>;

fn connect(addr: &str, ca_pem: &str) -> Tls {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("edge-1").unwrap();
    let connection = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let socket = std::net::TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    rustls::StreamOwned::new(connection, socket)
}

/// `GET /healthz` on `tls`, kept alive: the code.
fn healthz(tls: &mut Tls) -> u16 {
    use std::io::{Read as _, Write as _};
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: edge-1\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tls.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    tls.read_exact(&mut body).unwrap();
    head.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn peer(tls: &Tls) -> Vec<u8> {
    tls.conn.peer_certificates().unwrap()[0].to_vec()
}

/// J2: `serverTLSBootstrap`: the local API's certificate comes from a kubelet-serving
/// request (approved by the test, the first one only once the agent follows it with its
/// list and watch, as kubelet waits for it), and its renewal reaches new handshakes while
/// an open connection goes on with the one it started with.
#[test]
fn j2_serving_certificate_rotates_under_an_open_connection() {
    let lifetime = Duration::from_secs(20);
    let cluster = cluster(lifetime);
    let token = cluster.server.create_bootstrap_token(None).unwrap();
    let dir = cluster.dir.path();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token);
    let kubeconfig = dir.join("agent").join("kubeconfig");
    let agent = Agent::start_strict(
        &dir.join("manifests"),
        &[
            "--kubeconfig".as_ref(),
            kubeconfig.as_os_str(),
            "--bootstrap-kubeconfig".as_ref(),
            bootstrap.as_os_str(),
            "--state-dir".as_ref(),
            cluster.state_dir().as_os_str(),
            "--server-tls-bootstrap".as_ref(),
        ],
    );
    // The test is the administrator who approves serving requests: the first one by hand,
    // once the agent watches it (nothing is signed before), then each as it comes.
    let watched =
        || cluster.server.node_asked("watch", "certificates.k8s.io", "certificatesigningrequests");
    eventually("the agent watches its pending serving request", Duration::from_secs(30), watched);
    let pending: Vec<String> = cluster
        .server
        .list(CSRS, None)
        .unwrap()
        .into_iter()
        .filter(|c| c["spec"]["signerName"] == "kubernetes.io/kubelet-serving")
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(pending.len(), 1, "one serving request waits: {pending:?}");
    cluster.server.approve_certificate_signing_request(&pending[0]).unwrap();
    cluster.server.approve_serving_requests(true);
    agent.wait_for_log("serving certificate installed");
    let ca = cluster.server.ca_pem().unwrap().to_owned();
    let mut open = connect(&agent.addr, &ca);
    assert_eq!(healthz(&mut open), 200);
    let first = peer(&open);
    let started = Instant::now();
    // Requests keep going on the open connection (within the local API's idle limit)
    // until the renewal is installed, and after it.
    let mut served = 1;
    while count(&agent, "serving certificate installed") < 2 {
        assert!(
            started.elapsed() < lifetime * 3,
            "timed out waiting for the serving certificate's renewal"
        );
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(healthz(&mut open), 200);
        served += 1;
    }
    // The open connection goes on; a new one gets the new certificate.
    assert_eq!(healthz(&mut open), 200);
    assert_eq!(peer(&open), first);
    let mut fresh = connect(&agent.addr, &ca);
    assert_eq!(healthz(&mut fresh), 200);
    assert_ne!(peer(&fresh), first);
    println!(
        "J2 figures: serving certificate renewed {:?} after the first request; the open connection answered all {} requests across the swap",
        started.elapsed(),
        served + 1
    );
    let serving_requests = cluster
        .server
        .list(CSRS, None)
        .unwrap()
        .into_iter()
        .filter(|c| c["spec"]["signerName"] == "kubernetes.io/kubelet-serving")
        .count();
    assert!(serving_requests >= 2, "{serving_requests}");
}

/// J1: from a bootstrap token to a Ready node: the agent running pods gets its client
/// certificate and registers its Node with it (the server sees `system:node:edge-1`
/// create it). Prints the time from the agent's start to the Ready Node.
#[outpost_tests::needs(pods)]
#[test]
fn j1_bootstrap_token_to_a_ready_node() {
    use k8s_openapi::api::core::v1::Node;
    let node = outpost_tests::pods::Node::new();
    let cluster = cluster(Duration::from_secs(3600));
    let token = cluster.server.create_bootstrap_token(None).unwrap();
    let dir = cluster.dir.path();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token);
    let kubeconfig = dir.join("agent").join("kubeconfig");
    let mut args = node.args();
    args.extend(
        ["--kubeconfig".into(), kubeconfig.into_os_string()]
            .into_iter()
            .chain(["--bootstrap-kubeconfig".into(), bootstrap.into_os_string()]),
    );
    // The binary is built before the clock starts.
    outpost_tests::outpost_bin();
    let started = Instant::now();
    let _agent = Agent::start_pods(&node.manifests(), &args);
    let ready = |node: &Node| {
        let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
    };
    wait_until("the Node to be Ready", Duration::from_secs(120), || {
        cluster.server.get_typed::<Node>(None, "edge-1").is_ok_and(|n| ready(&n))
    });
    println!("J1 figures: from the agent's start to a Ready Node: {:?}", started.elapsed());
    let by_user = cluster.server.requests_by_user();
    let created = by_user.get(&("create".to_owned(), NODE_USER.to_owned())).copied().unwrap_or(0);
    assert!(created >= 1, "the node created nothing as {NODE_USER}: {by_user:?}");
    let anonymous = by_user.keys().filter(|(_, user)| user == "system:anonymous").count();
    assert_eq!(anonymous, 0, "{by_user:?}");
}

/// J2: the certificate expires while the node is cut off and its bootstrap token is
/// gone when it comes back: the agent says so loudly (log, `/status`, the metric) and
/// keeps running, its pods with it.
#[test]
fn j2_expired_without_working_bootstrap_credentials_is_loud_and_keeps_running() {
    let lifetime = Duration::from_secs(20);
    let cluster = cluster(lifetime);
    let token = cluster.server.create_bootstrap_token(None).unwrap();
    let id = token.split('.').next().unwrap().to_owned();
    let (agent, _) = bootstrap_agent(&cluster, &token);
    agent.wait_for_log("TLS bootstrapping done");
    cluster.wait_for_watch();
    let pid = agent.pid();
    cluster.cut();
    cluster
        .server
        .delete("secrets", Some("kube-system"), &format!("bootstrap-token-{id}"), None)
        .unwrap();
    wait_until("the expiry", lifetime * 3, || count(&agent, "expired at") >= 1);
    cluster.restore();
    // The bootstrap token is refused now: still loud, after the server is back.
    wait_until("the refusal to be reported", Duration::from_secs(90), || {
        agent.log().lines().any(|l| {
            l.contains("the node has no valid client certificate") && l.contains("Unauthorized")
        })
    });
    assert_eq!(agent.pid(), pid);
    let (code, body) = agent.get("/status");
    assert_eq!(code, 200, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    let client = &status["certificates"][0];
    assert_eq!(client["state"], "expired", "{client}");
    assert!(client["problem"].as_str().is_some_and(|p| p.contains("Unauthorized")), "{client}");
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.lines().any(|l| l == "outpost_certificate_manager_client_valid 0"),
        "{metrics}"
    );
    let (code, _) = agent.get("/healthz");
    assert_eq!(code, 200);
}

/// J1 end to end, as an operator does it: `outpost join` with a bootstrap token and the
/// CA's pin writes the bootstrap kubeconfig and the agent's config, and `outpost run`
/// with that config gets its client certificate and registers a Ready Node as
/// `system:node:edge-1`. Prints the time from the join's start to the Ready Node.
#[outpost_tests::needs(pods)]
#[test]
fn j1_join_then_run_to_a_ready_node() {
    use k8s_openapi::api::core::v1::Node;
    let node = outpost_tests::pods::Node::new();
    let cluster = cluster(Duration::from_secs(3600));
    let (id, secret) = ("j1join", "0123456789abcdef");
    cluster.server.add_bootstrap_token(id, secret).unwrap();
    let pin = outpost_core::bootstrap_token::ca_pins(cluster.server.ca_pem().unwrap().as_bytes())
        .unwrap()[0]
        .to_string();
    let config = cluster.dir.path().join("etc").join("outpost.yaml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "# Written by the operator; join adds its keys.\n").unwrap();
    let binary = outpost_tests::outpost_bin();
    let started = Instant::now();
    let joined = std::process::Command::new(&binary)
        .args(["join", "--server", &cluster.server.url(), "--token", &format!("{id}.{secret}")])
        .args(["--discovery-token-ca-cert-hash", &pin, "--node-name", "edge-1", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&joined.stdout),
        String::from_utf8_lossy(&joined.stderr)
    );
    assert!(joined.status.success(), "outpost join: {said}");
    let joined_after = started.elapsed();

    let mut args = node.args();
    args.extend(["--config".into(), config.clone().into_os_string()]);
    let _agent = Agent::start_pods(&node.manifests(), &args);
    let ready = |node: &Node| {
        let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
    };
    wait_until("the joined Node to be Ready", Duration::from_secs(120), || {
        cluster.server.get_typed::<Node>(None, "edge-1").is_ok_and(|n| ready(&n))
    });
    println!(
        "J1 figures: outpost join took {joined_after:?}; from the join's start to a Ready Node: {:?}",
        started.elapsed()
    );
    // J2: a node that keeps its certificate says so on its Node.
    let node_now = cluster.server.get_typed::<Node>(None, "edge-1").unwrap();
    let certificates = node_now
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "CertificateExpired")
        .map(|c| (c.status, c.reason.unwrap_or_default()));
    assert_eq!(certificates, Some(("False".to_owned(), "CertificatesValid".to_owned())));
    let pki = node.path("state").join("pki").join("kubelet-client-current.pem");
    let mode = std::fs::metadata(&pki).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", pki.display());
    let by_user = cluster.server.requests_by_user();
    let created = by_user.get(&("create".to_owned(), NODE_USER.to_owned())).copied().unwrap_or(0);
    assert!(created >= 1, "the node created nothing as {NODE_USER}: {by_user:?}");
}

/// J2, N3: both certificates rotate under load. A pod churn runs the whole time (a
/// static pod, whose mirror pod the node writes, and an API pod bound to the node, each
/// started, seen Running in the API, removed and seen gone), and an `outpost exec -i`
/// stream is open from before the churn to after both renewals: the client
/// certificate's (the node's writes go on with the new one) and the serving
/// certificate's (the stream's line written after the swap comes back, and it ends with
/// its exit code). Prints the churn's cycles and what the rotations cost in requests.
#[outpost_tests::needs(pods)]
#[test]
fn j2_both_certificates_rotate_under_pod_churn_with_an_exec_stream_open() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let lifetime = Duration::from_secs(20);
    let cluster = cluster(lifetime);
    let token = cluster.server.create_bootstrap_token(None).unwrap();
    let dir = cluster.dir.path();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token);
    cluster.server.approve_serving_requests(true);
    let node = outpost_tests::pods::Node::new();
    let token_file = node.path("token");
    outpost_tests::write_private(&token_file, "exec-across-the-swap\n");
    let ca = node.path("ca.pem");
    std::fs::write(&ca, cluster.server.ca_pem().unwrap()).unwrap();
    let mut args = node.args();
    for (flag, value) in [
        ("--token-file", token_file.clone()),
        ("--kubeconfig", dir.join("agent").join("kubeconfig")),
        ("--bootstrap-kubeconfig", bootstrap),
    ] {
        args.extend([flag.into(), value.into_os_string()]);
    }
    // The serving certificate names the node's address: the exec client dials it.
    args.extend(["--server-tls-bootstrap".into(), "--node-ip".into(), "127.0.0.1".into()]);
    let agent = Agent::start_pods(&node.manifests(), &args);
    agent.wait_for_log("serving certificate installed");
    let busybox = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {}\n    imagePullPolicy: IfNotPresent\n    command: [sleep, '3600']\n",
            outpost_tests::containerd::BUSYBOX_IMAGE
        )
    };
    node.put("shell.yaml", &busybox("shell"));
    // The local API is TLS with the cluster's CA now: pods are watched in the API server
    // (a static pod through its mirror pod).
    let running =
        |pod: &Value| pod["status"]["containerStatuses"][0]["state"]["running"].is_object();
    let pod_running = |name: &str| {
        cluster.server.get("pods", Some("default"), name).is_ok_and(|pod| running(&pod))
    };
    let pod_gone = |name: &str| cluster.server.get("pods", Some("default"), name).is_err();
    wait_until("the pod to run", Duration::from_secs(90), || pod_running("shell-edge-1"));
    let server = format!("https://{}", agent.addr);
    let mut exec = std::process::Command::new(outpost_tests::outpost_bin())
        .args(["exec", "--server", &server, "--certificate-authority"])
        .arg(&ca)
        .arg("--token-file")
        .arg(&token_file)
        .args(["-i", "shell-edge-1", "--", "cat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = exec.stdin.take().unwrap();
    let mut lines = BufReader::new(exec.stdout.take().unwrap()).lines();
    stdin.write_all(b"before the swap\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "before the swap");

    let (client_before, serving_before) = (
        count(&agent, "client certificate rotated"),
        count(&agent, "serving certificate installed"),
    );
    let (requests_before, total_before) =
        (cluster.server.requests(), cluster.server.total_requests());
    let started = Instant::now();
    let stop = AtomicBool::new(false);
    let cycles = AtomicUsize::new(0);
    let (window, after_rotations) = std::thread::scope(|scope| {
        let churn = scope.spawn(|| {
            let limit = Duration::from_secs(90);
            for i in 0.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let (file, mirror, api) = (
                    format!("churn-{i}.yaml"),
                    format!("churn-{i}-edge-1"),
                    format!("api-churn-{i}"),
                );
                node.put(&file, &busybox(&format!("churn-{i}")));
                let pod = json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": { "name": api, "namespace": "default" },
                    "spec": {
                        "nodeName": "edge-1",
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{
                            "name": "main",
                            "image": outpost_tests::containerd::BUSYBOX_IMAGE,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["sleep", "3600"],
                        }],
                    },
                });
                cluster.server.create_pod(&serde_json::from_value(pod).unwrap()).unwrap();
                wait_until(&format!("{mirror} and {api} running"), limit, || {
                    pod_running(&mirror) && pod_running(&api)
                });
                node.remove(&file);
                cluster.server.delete("pods", Some("default"), &api, Some(1)).unwrap();
                wait_until(&format!("{mirror} and {api} gone"), limit, || {
                    pod_gone(&mirror) && pod_gone(&api)
                });
                cycles.fetch_add(1, Ordering::SeqCst);
            }
        });
        wait_until("both renewals under the churn", lifetime * 6, || {
            assert!(!churn.is_finished(), "the churn stopped");
            count(&agent, "client certificate rotated") > client_before
                && count(&agent, "serving certificate installed") > serving_before
        });
        let window = started.elapsed();
        // A whole cycle begun after both renewals: the node's writes go on with them.
        let at_rotations = cycles.load(Ordering::SeqCst);
        wait_until("a churn cycle after the renewals", Duration::from_secs(180), || {
            assert!(!churn.is_finished(), "the churn stopped");
            cycles.load(Ordering::SeqCst) >= at_rotations + 2
        });
        stop.store(true, Ordering::SeqCst);
        churn.join().expect("the churn");
        (window, cycles.load(Ordering::SeqCst) - at_rotations)
    });
    stdin.write_all(b"after the swap\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "after the swap");
    drop(stdin);
    let status = exec.wait().unwrap();
    assert!(status.success(), "outpost exec ended with {status}");
    node.remove("shell.yaml");
    wait_until("the shell pod gone", Duration::from_secs(90), || pod_gone("shell-edge-1"));

    let csr_requests: u64 = cluster
        .server
        .requests()
        .iter()
        .filter(|((_, resource), _)| resource.starts_with(CSRS))
        .map(|(key, n)| n - requests_before.get(key).copied().unwrap_or(0))
        .sum();
    let rotations = (count(&agent, "client certificate rotated") - client_before)
        + (count(&agent, "serving certificate installed") - serving_before);
    println!(
        "J2 figures under load: {rotations} renewals (client and serving) in {window:?} with {} churn cycles \
         (a static and an API pod each), {after_rotations} of them after both; certificate requests \
         {csr_requests} ({} per renewal); all requests {}; the exec stream stayed open {:?}",
        cycles.load(Ordering::SeqCst),
        csr_requests as f64 / rotations as f64,
        cluster.server.total_requests() - total_before,
        started.elapsed(),
    );
}

/// The current client certificate's file (the link's target).
fn current_certificate(cluster: &Cluster) -> PathBuf {
    let link = cluster.state_dir().join("pki/kubelet-client-current.pem");
    std::fs::read_link(&link).unwrap_or_else(|e| panic!("{}: {e}", link.display()))
}

/// Issue 54: a board without a real-time clock boots at 1970 with a certificate it got
/// before. Its certificate is kept (not thrown away as "not yet valid", no bootstrap),
/// with the API server away and with it back: while the clock reads 1970 no TLS session
/// with the server can be made (its certificate looks not yet valid, as it would to
/// kubelet). Once NTP steps the clock to now, the agent talks with the kept certificate
/// and renews it once, at its real deadline.
#[needs(faketime)]
#[test]
fn j2_a_board_that_boots_at_1970_keeps_its_certificate_until_the_clock_is_set() {
    let lifetime = Duration::from_secs(40);
    let cluster = cluster(lifetime);
    let token = cluster.server.create_bootstrap_token(None).unwrap();
    let (agent, _) = bootstrap_agent(&cluster, &token);
    agent.wait_for_log("TLS bootstrapping done");
    cluster.wait_for_watch();
    agent.stop();
    let first = current_certificate(&cluster);

    // Powered off and on again, offline, the clock at 1970; then the server is back.
    cluster.cut();
    let clock = FakeClock::new(cluster.dir.path(), "@1970-01-01 00:00:00");
    let agent = bootstrap_agent_in(&cluster, &token, clock.command(&outpost_tests::outpost_bin()));
    agent.wait_for_log("the clock reads before the certificate's start");
    std::thread::sleep(Duration::from_secs(2));
    cluster.restore();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(count(&agent, "TLS bootstrapping"), 0, "{}", agent.log());
    assert_eq!(count(&agent, "no valid client certificate"), 0, "{}", agent.log());
    assert_eq!(current_certificate(&cluster), first);

    // NTP steps the clock to now: the kept certificate is used, and renewed once at its
    // deadline, by the node (not through the bootstrap token).
    clock.set(&format!("@{}", jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S")));
    pod_arrives(&cluster, &agent, "after-the-step");
    wait_until("the rotation", lifetime * 2, || count(&agent, "client certificate rotated") >= 1);
    let senders: Vec<String> = csrs(&cluster).into_iter().map(|(user, _)| user).collect();
    assert_eq!(senders.iter().filter(|u| u.starts_with("system:bootstrap:")).count(), 1);
    assert_eq!(senders.iter().filter(|u| *u == NODE_USER).count(), 1, "{senders:?}");
    assert_eq!(count(&agent, "no valid client certificate"), 0, "{}", agent.log());
    assert_eq!(count(&agent, "TLS bootstrapping"), 0, "{}", agent.log());
}

/// Issue 54: a clock ahead of the cluster's (a board that booted at a bad save of
/// fake-hwclock, two hours ahead) takes its one-hour certificate for expired; the API
/// server's time says it is not, so it is kept: no bootstrap, no renewal. NTP then steps
/// the clock back, and later a bad source steps it 90 days ahead: nothing is renewed or
/// thrown away, and pods still arrive.
#[needs(faketime)]
#[test]
fn j2_a_clock_ahead_of_the_cluster_s_throws_nothing_away_and_renews_nothing() {
    let cluster = cluster(Duration::from_secs(3600));
    let token = cluster.server.create_bootstrap_token(None).unwrap();
    let (agent, _) = bootstrap_agent(&cluster, &token);
    agent.wait_for_log("TLS bootstrapping done");
    cluster.wait_for_watch();
    agent.stop();
    let certificate = current_certificate(&cluster);

    let clock = FakeClock::new(cluster.dir.path(), "+2h");
    let agent = bootstrap_agent_in(&cluster, &token, clock.command(&outpost_tests::outpost_bin()));
    pod_arrives(&cluster, &agent, "two-hours-ahead");
    assert!(agent.log().contains("the local clock is off the API server's"), "{}", agent.log());
    for step in ["+0", "+90d"] {
        clock.set(step);
        std::thread::sleep(Duration::from_secs(2));
        pod_arrives(&cluster, &agent, &format!("after-the-step-to{}", step.replace('+', "-")));
    }
    assert_eq!(current_certificate(&cluster), certificate);
    for said in ["rotating the client certificate", "expired", "TLS bootstrapping"] {
        assert_eq!(count(&agent, said), 0, "{said:?} in:\n{}", agent.log());
    }
    assert_eq!(csrs(&cluster).len(), 1, "the bootstrap's CSR alone");
}
