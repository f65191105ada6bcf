//! End to end: etcd as kubeadm runs it, a static pod in the manifest directory, shaped as
//! kubeadm 1.26 writes `/etc/kubernetes/manifests/etcd.yaml` for
//! `registry.k8s.io/etcd:3.5.6-0`: hostNetwork, the PKI and the data dir as hostPath
//! volumes, kubeadm's command line, `startupProbe` and `livenessProbe` httpGet on
//! 127.0.0.1 (the metrics listener) `/health?...`, `priorityClassName:
//! system-node-critical`, seccomp RuntimeDefault, its requests and labels.
//!
//! What differs from kubeadm's file, and why:
//! - Ports: kubeadm's 2379 (client), 2380 (peer) and 2381 (metrics and probes) are
//!   replaced by free loopback ports, because the pod shares the host's network and the
//!   host may run its own etcd (or another test's) on them.
//! - Addresses: the advertise address is 127.0.0.1 (a test must not listen on the host's
//!   other interfaces); the node name is the agent's, `edge-1`.
//! - The hostPath dirs are under the test's temp dir, mounted where kubeadm mounts them.
//! - Probe timings: kubeadm's `initialDelaySeconds: 10`, `periodSeconds: 10`,
//!   `timeoutSeconds: 15` and `failureThreshold: 8` would make the liveness test take
//!   minutes; they are 3, 1, 1 and 2 here. The liveness probe also has
//!   `terminationGracePeriodSeconds: 2` (P3): a stopped etcd never acts on SIGTERM, so the
//!   kill waits for the grace period, which is otherwise the pod's 30 s.

use outpost_tests::needs;
use std::path::Path;
use std::time::{Duration, Instant};

use outpost_tests::containerd::ETCD_IMAGE;
use outpost_tests::containerd::ETCD_OCI;
use outpost_tests::pods::{Node, pod};
use outpost_tests::workload::{
    Workload, condition, container_id, delete_and_wait, find_event, free_ports, host_dir, import,
    is_running, pretty, restarts, status_of, task_pid, text,
};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

const LONG: Duration = Duration::from_secs(90);
/// Where kubeadm's manifest mounts the PKI and the data dir in the container.
const PKI: &str = "/etc/kubernetes/pki/etcd";
const DATA: &str = "/var/lib/etcd";
const NODE_NAME: &str = "edge-1";

/// kubeadm's etcd PKI (`kubeadm init phase certs etcd-*`) under `dir`: the etcd CA, the
/// server and peer certificates (serving and client auth, for the node's name,
/// `localhost`, `127.0.0.1` and `::1`) and the health-check client certificate.
fn make_pki(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "etcd-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.crt"), ca_cert.pem()).unwrap();
    outpost_tests::write_private(&dir.join("ca.key"), ca_key.serialize_pem());
    let issuer = Issuer::new(ca, ca_key);
    let names =
        || [NODE_NAME, "localhost", "127.0.0.1", "::1"].iter().map(|n| (*n).to_owned()).collect();
    let both = [ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let certs: [(&str, Vec<String>, &str, &[ExtendedKeyUsagePurpose]); 3] = [
        ("server", names(), NODE_NAME, &both),
        ("peer", names(), NODE_NAME, &both),
        (
            "healthcheck-client",
            Vec::new(),
            "kube-etcd-healthcheck-client",
            &[ExtendedKeyUsagePurpose::ClientAuth],
        ),
    ];
    for (file, sans, common_name, usages) in certs {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages =
            vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = usages.to_vec();
        let cert = params.signed_by(&key, &issuer).unwrap();
        std::fs::write(dir.join(format!("{file}.crt")), cert.pem()).unwrap();
        outpost_tests::write_private(&dir.join(format!("{file}.key")), key.serialize_pem());
    }
}

/// kubeadm's etcd manifest with the test's ports and hostPath dirs.
fn manifest(pki: &Path, data: &Path, client: u16, peer: u16, metrics: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://127.0.0.1:{client}
  creationTimestamp: null
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://127.0.0.1:{client}
    - --cert-file={PKI}/server.crt
    - --client-cert-auth=true
    - --data-dir={DATA}
    - --experimental-initial-corrupt-check=true
    - --experimental-watch-progress-notify-interval=5s
    - --initial-advertise-peer-urls=https://127.0.0.1:{peer}
    - --initial-cluster={NODE_NAME}=https://127.0.0.1:{peer}
    - --key-file={PKI}/server.key
    - --listen-client-urls=https://127.0.0.1:{client}
    - --listen-metrics-urls=http://127.0.0.1:{metrics}
    - --listen-peer-urls=https://127.0.0.1:{peer}
    - --name={NODE_NAME}
    - --peer-cert-file={PKI}/peer.crt
    - --peer-client-cert-auth=true
    - --peer-key-file={PKI}/peer.key
    - --peer-trusted-ca-file={PKI}/ca.crt
    - --snapshot-count=10000
    - --trusted-ca-file={PKI}/ca.crt
    image: {ETCD_IMAGE}
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 2
      httpGet:
        host: 127.0.0.1
        path: /health?exclude=NOSPACE&serializable=true
        port: {metrics}
        scheme: HTTP
      initialDelaySeconds: 3
      periodSeconds: 1
      terminationGracePeriodSeconds: 2
      timeoutSeconds: 1
    name: etcd
    resources:
      requests:
        cpu: 100m
        memory: 100Mi
    startupProbe:
      failureThreshold: 24
      httpGet:
        host: 127.0.0.1
        path: /health?serializable=false
        port: {metrics}
        scheme: HTTP
      initialDelaySeconds: 3
      periodSeconds: 1
      timeoutSeconds: 15
    volumeMounts:
    - mountPath: {DATA}
      name: etcd-data
    - mountPath: {PKI}
      name: etcd-certs
  hostNetwork: true
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: {pki}
      type: DirectoryOrCreate
    name: etcd-certs
  - hostPath:
      path: {data}
      type: DirectoryOrCreate
    name: etcd-data
status: {{}}
"#,
        pki = pki.display(),
        data = data.display()
    )
}

/// Sends SIGCONT to a process this test stopped, when the test ends (passing or not), if
/// it is still there and stopped.
struct Continue(i32);

impl Drop for Continue {
    fn drop(&mut self) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0)).unwrap_or_default();
        let stopped = stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T'));
        if stat.contains("(etcd)") && stopped {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.0),
                nix::sys::signal::Signal::SIGCONT,
            );
        }
    }
}

/// `GET http://127.0.0.1:{port}{path}` from the host: the status code, if etcd answered.
fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

/// etcd's static pod, kubeadm-shaped: not ready until its startup probe passes; serves
/// mutual TLS (`etcdctl endpoint health` with the health-check client certificate, and
/// nothing without one); a SIGSTOPped etcd fails its liveness probe and is restarted
/// (restartCount 1, Events `Unhealthy` and `Killing`), and serves again with its data.
#[needs(pods)]
#[test]
fn kubeadm_etcd_is_gated_by_its_startup_probe_serves_mtls_and_liveness_restarts_it() {
    let node = Node::new();
    import(&node, ETCD_OCI);
    let pki = node.path("etc/kubernetes/pki/etcd");
    make_pki(&pki);
    let data = host_dir(&node, "var/lib/etcd");
    let [client, peer, metrics] = free_ports();
    let w = Workload::start(&node);
    node.put("etcd.yaml", &manifest(&pki, &data, client, peer, metrics));
    let name = "etcd-edge-1";
    let etcd = |p: &serde_json::Value| status_of(p, "etcd").clone();

    // Running, but not started nor ready until the startup probe passes; never ready
    // while not started.
    let mut seen_gated = false;
    let deadline = Instant::now() + LONG;
    let p = loop {
        let found = pod(&w.agent, name);
        if let Some(p) = &found {
            let c = etcd(p);
            assert!(
                c["started"] == true || c["ready"] != true,
                "ready before the startup probe passed: {}",
                pretty(p)
            );
            if is_running(&c) && c["started"] == false {
                seen_gated = true;
            }
            if c["started"] == true && c["ready"] == true {
                break p.clone();
            }
        }
        assert!(Instant::now() < deadline, "etcd never got ready: {}", pretty(&found));
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(seen_gated, "etcd was seen running and not started (startup probe pending)");
    assert_eq!(condition(&p, "Ready"), Some("True"), "{}", pretty(&p));
    assert_eq!(restarts(&etcd(&p)), 0, "{}", pretty(&p));

    // Mutual TLS: the health-check client certificate is needed.
    let etcdctl = |args: &[&str], client_cert: bool| {
        let endpoint = format!("--endpoints=https://127.0.0.1:{client}");
        let mut command = vec!["etcdctl", &endpoint, "--cacert", "/etc/kubernetes/pki/etcd/ca.crt"];
        if client_cert {
            command.extend([
                "--cert",
                "/etc/kubernetes/pki/etcd/healthcheck-client.crt",
                "--key",
                "/etc/kubernetes/pki/etcd/healthcheck-client.key",
            ]);
        }
        command.extend(["--dial-timeout", "3s", "--command-timeout", "5s"]);
        command.extend(args);
        w.exec("kube-system/etcd-edge-1", Some("etcd"), &command)
    };
    let health = etcdctl(&["endpoint", "health"], true);
    assert!(
        health.status.success() && text(&health).contains("is healthy"),
        "etcdctl endpoint health over mTLS: {}",
        text(&health)
    );
    let anonymous = etcdctl(&["endpoint", "health"], false);
    assert!(!anonymous.status.success(), "no client certificate, no answer: {}", text(&anonymous));
    let put = etcdctl(&["put", "outpost/e2e", "kept"], true);
    assert!(put.status.success() && text(&put).contains("OK"), "etcdctl put: {}", text(&put));

    // SIGSTOP: the liveness probe times out twice, the container is killed and restarted.
    let id = container_id(&etcd(&p));
    let pid = task_pid(&node, &id)
        .unwrap_or_else(|| panic!("no task for {id}: {}", node.ctr(&["tasks", "list"])));
    let _cont = Continue(pid);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGSTOP)
        .unwrap();
    let restarted = {
        let deadline = Instant::now() + LONG;
        loop {
            let found = pod(&w.agent, name);
            if let Some(p) = &found
                && restarts(&etcd(p)) >= 1
            {
                break p.clone();
            }
            assert!(Instant::now() < deadline, "never restarted: {}", pretty(&found));
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert_eq!(restarts(&etcd(&restarted)), 1, "{}", pretty(&restarted));
    let events = w.events("kube-system", name);
    assert!(
        find_event(&events, "Unhealthy", "Liveness probe failed:").is_some(),
        "Unhealthy: Liveness probe failed: {}",
        pretty(&events)
    );
    assert!(
        find_event(&events, "Killing", "Container etcd failed liveness probe, will be restarted")
            .is_some(),
        "Killing: Container etcd failed liveness probe, will be restarted: {}",
        pretty(&events)
    );

    // The new container waits for its startup probe again, then serves the same data.
    let deadline = Instant::now() + LONG;
    let p = loop {
        let found = pod(&w.agent, name);
        if let Some(p) = &found
            && etcd(p)["started"] == true
            && etcd(p)["ready"] == true
        {
            break p.clone();
        }
        assert!(Instant::now() < deadline, "etcd never served again: {}", pretty(&found));
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(restarts(&etcd(&p)), 1, "{}", pretty(&p));
    assert_ne!(container_id(&etcd(&p)), id, "a new container: {}", pretty(&p));
    let health = etcdctl(&["endpoint", "health"], true);
    assert!(
        health.status.success(),
        "etcdctl endpoint health after the restart: {}",
        text(&health)
    );
    let get = etcdctl(&["get", "outpost/e2e", "--print-value-only"], true);
    assert_eq!(
        String::from_utf8_lossy(&get.stdout).trim(),
        "kept",
        "the data dir is kept: {}",
        text(&get)
    );

    delete_and_wait(&node, &w.agent, &[("etcd.yaml", name)]);
    assert!(http_status(metrics, "/health").is_none(), "etcd no longer listens");
}
