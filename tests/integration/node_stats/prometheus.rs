//! N2 acceptance with a real scraper: Debian's `prometheus` scrapes the agent's
//! `/metrics/cadvisor`, `/metrics/resource` and `/metrics/probes` over HTTPS with a
//! service account's bearer token (as `authorization.credentials_file`), which the agent
//! checks with a TokenReview and authorizes with a SubjectAccessReview for
//! `get nodes/metrics` (N1, as kube-prometheus's RBAC grants it), on loopback, into a
//! temporary storage dir; its HTTP API then returns the running pod's
//! `container_cpu_usage_seconds_total` and `container_memory_working_set_bytes` by `pod`
//! and `namespace`, and its probe counts. Prometheus is stopped and its files removed
//! however the test ends (its guard's drop).

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use outpost_tests::agent::{request_head, split_response};
use outpost_tests::apiserver::Rule;
use outpost_tests::cluster::ApiNode;
use outpost_tests::needs;
use outpost_tests::pods::eventually;
use serde_json::{Value, json};

use super::{LONG, POD, free_port, manifest};

/// A running Prometheus, killed and reaped on drop.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// `GET /api/v1/query?query=...` → its result vector.
    fn query(&self, query: &str) -> Vec<Value> {
        let encoded: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return Vec::new();
        };
        let head = request_head("GET", &format!("/api/v1/query?query={encoded}"), &[], 0);
        if stream.write_all(head.as_bytes()).is_err() {
            return Vec::new();
        }
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let (status, body) = split_response(&response);
        if status != 200 {
            return Vec::new();
        }
        let json: Value = serde_json::from_str(&body).unwrap_or_default();
        json["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

/// A scrape job of the agent's `path` over HTTPS with the token.
fn job(name: &str, path: &str, target: &str, dir: &Path) -> String {
    format!(
        "  - job_name: {name}\n    scheme: https\n    metrics_path: {path}\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    authorization:\n      credentials_file: {token}\n    tls_config:\n      ca_file: {ca}\n    static_configs:\n      - targets: [\"{target}\"]\n",
        token = dir.join("token").display(),
        ca = dir.join("cert.pem").display(),
    )
}

#[needs(pods, prometheus)]
#[test]
fn n2_prometheus_scrapes_the_node_metrics_over_https_with_a_token() {
    outpost_tests::prerequisite(
        Path::new("/usr/bin/prometheus").is_file(),
        "prometheus (the Debian package: cargo xtask deps installs it)",
    );
    let api = ApiNode::new();
    let node = &api.node;
    let dir = node.path("prometheus");
    std::fs::create_dir_all(dir.join("data")).expect("prometheus dirs");
    let key =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("a self-signed certificate");
    std::fs::write(dir.join("cert.pem"), key.cert.pem()).expect("write the certificate");
    // kube-prometheus's Prometheus: a service account allowed `get nodes/metrics`.
    api.server
        .create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "prometheus-k8s", "namespace": "monitoring"}}))
        .expect("the service account");
    let token =
        api.server.create_token("monitoring", "prometheus-k8s", json!({})).expect("a token");
    api.server.allow(Rule::user(
        "system:serviceaccount:monitoring:prometheus-k8s",
        "get",
        "nodes/metrics",
    ));
    let private = [("key.pem", key.signing_key.serialize_pem()), ("token", token)];
    for (file, text) in private {
        let path = dir.join(file);
        std::fs::write(&path, text).expect("write a secret");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
    }
    let cert = dir.join("cert.pem").display().to_string();
    let key = dir.join("key.pem").display().to_string();
    let agent = api.start(&[
        "--tls-cert-file",
        &cert,
        "--tls-private-key-file",
        &key,
        "--authentication-token-webhook",
        "--authorization-mode=Webhook",
        "--healthz-port",
        "0",
    ]);
    node.put("stats.yaml", &manifest());

    let target = agent.addr.clone();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{}{}{}",
        job("cadvisor", "/metrics/cadvisor", &target, &dir),
        job("resource", "/metrics/resource", &target, &dir),
        job("probes", "/metrics/probes", &target, &dir),
    );
    std::fs::write(dir.join("prometheus.yml"), config).expect("write the config");
    let port = free_port();
    let child = Command::new("/usr/bin/prometheus")
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let prometheus = Prometheus { child, port };

    let by_pod = format!("{{pod=\"{POD}\",namespace=\"default\"}}");
    for (metric, job) in [
        ("container_cpu_usage_seconds_total", "cadvisor"),
        ("container_cpu_usage_seconds_total", "resource"),
        ("container_memory_working_set_bytes", "cadvisor"),
        ("container_memory_working_set_bytes", "resource"),
    ] {
        let query = format!("{metric}{by_pod}");
        eventually(&format!("prometheus has {query} from {job}"), LONG, || {
            let result = prometheus.query(&query);
            result.iter().any(|series| {
                series["metric"]["job"] == job
                    && series["metric"]["container"] == "main"
                    && series["value"][1]
                        .as_str()
                        .and_then(|v| v.parse::<f64>().ok())
                        .is_some_and(|v| v > 0.0)
            })
        });
    }
    let probes = format!(
        "prober_probe_total{{pod=\"{POD}\",namespace=\"default\",probe_type=\"Readiness\"}}"
    );
    eventually("prometheus has the pod's probe counts", LONG, || {
        !prometheus.query(&probes).is_empty()
    });
    let up = prometheus.query("up");
    assert_eq!(up.len(), 3, "{up:?}");
    assert!(up.iter().all(|s| s["value"][1] == "1"), "every target is up: {up:?}");
}
