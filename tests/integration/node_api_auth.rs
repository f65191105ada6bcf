//! N1 through the real binary: an agent serving TLS, `--client-ca-file` the test API
//! server's kubelet-client CA (and an on-box operator's CA), with
//! `--authentication-token-webhook` and `--authorization-mode=Webhook`. Service account
//! tokens are reviewed (TokenReview) and requests authorized (SubjectAccessReview) on the
//! test API server, whose request counts show the caches at work; with the server cut,
//! the token file keeps working and what cannot be reviewed is refused, saying why.
//! No containers: the agent runs `--dry-run`.

use std::path::PathBuf;

use outpost_tests::agent::Agent;
use outpost_tests::apiserver::{Rule, TestApiServer};
use outpost_tests::{pod_yaml, write_private};
use serde_json::json;
use tokio::runtime::Runtime;

use crate::push::Pki;

const OPERATOR_TOKEN: &str = "n1-operator-token";
const READER: &str = "system:serviceaccount:default:reader";

struct Node {
    rt: Runtime,
    server: TestApiServer,
    pki: Pki,
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let rt = Runtime::new().unwrap();
        let server = rt.block_on(TestApiServer::start()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
        std::fs::write(dir.path().join("manifests/web.yaml"), pod_yaml("web", "busybox")).unwrap();
        server.node_kubeconfig(dir.path(), "edge-1").unwrap();
        write_private(&dir.path().join("token"), format!("{OPERATOR_TOKEN}\n"));
        let pki = Pki::new();
        // The API server's kubelet-client CA and the operators' CA, one bundle.
        let operators_ca = std::fs::read_to_string(pki.file("ca.pem")).unwrap();
        let bundle = format!("{}{operators_ca}", server.kubelet_client_identity().ca_pem);
        std::fs::write(dir.path().join("client-ca.pem"), bundle).unwrap();
        for account in ["reader", "stranger", "late"] {
            let object = json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": { "name": account, "namespace": "default" },
            });
            server.create(object).unwrap();
        }
        Node { rt, server, pki, dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn token(&self, account: &str) -> String {
        self.server.create_token("default", account, json!({})).unwrap()
    }

    /// The agent, TLS with the webhooks on; `extra` flags after.
    fn agent(&self, extra: &[&str]) -> Agent {
        let p = |name: &str| self.path(name).display().to_string();
        let mut args = vec![
            "--kubeconfig".to_owned(),
            p("node-kubeconfig"),
            "--state-dir".to_owned(),
            p("state"),
            "--token-file".to_owned(),
            p("token"),
            "--tls-cert-file".to_owned(),
            self.pki.file("server.pem"),
            "--tls-private-key-file".to_owned(),
            self.pki.file("server-key.pem"),
            "--client-ca-file".to_owned(),
            p("client-ca.pem"),
            "--authentication-token-webhook".to_owned(),
            "--authorization-mode=Webhook".to_owned(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let agent = Agent::start_strict(&self.path("manifests"), &args);
        // The file source's pod is in the snapshot.
        agent.delta();
        agent
    }

    fn kubelet_client(&self) -> (String, String) {
        let identity = self.server.kubelet_client_identity();
        (identity.cert_pem.clone(), identity.key_pem.clone())
    }

    /// `GET path` over TLS with a bearer token, a client certificate, or neither.
    fn get(
        &self,
        agent: &Agent,
        path: &str,
        token: Option<&str>,
        cert: Option<&(String, String)>,
    ) -> (u16, String) {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            bearer.iter().map(|b| ("Authorization", b.as_str())).collect();
        self.pki.request(&agent.addr, cert, "GET", path, &headers, b"").unwrap()
    }

    fn reviews(&self) -> (u64, u64) {
        (
            self.server.count("create", "tokenreviews"),
            self.server.count("create", "subjectaccessreviews"),
        )
    }
}

/// N1: a service account token allowed by a rule reads `/pods`, one without a rule gets
/// kubelet's 403, an invalid one 401; the API server's kubelet-client certificate passes;
/// the second request within the TTLs asks the API server nothing.
#[test]
fn n1_webhook_authentication_and_authorization() {
    let node = Node::new();
    node.server.allow(Rule::user(READER, "get", "nodes/pods"));
    let reader = node.token("reader");
    let stranger = node.token("stranger");
    let agent = node.agent(&[]);

    let (status, body) = node.get(&agent, "/pods", Some(&reader), None);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("web-edge-1"), "{body}");
    assert_eq!(node.reviews(), (1, 1), "one TokenReview, one SubjectAccessReview (nodes/pods)");

    let (status, body) = node.get(&agent, "/pods", Some(&stranger), None);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(
            "Forbidden (user=system:serviceaccount:default:stranger, verb=get, resource=nodes, subresource(s)=[pods proxy])"
        ),
        "{body}"
    );
    // A rule on nodes/pods gives nothing else: /metrics is nodes/metrics.
    let (status, body) = node.get(&agent, "/metrics", Some(&reader), None);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("subresource(s)=[metrics]"), "{body}");

    let (status, body) = node.get(&agent, "/pods", Some("not-a-token"), None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("TokenReview"), "{body}");
    let (status, body) = node.get(&agent, "/pods", None, None);
    assert_eq!(status, 401, "{body}");

    // kube-apiserver's own certificate (kubeadm:cluster-admins) may do everything.
    let client = node.kubelet_client();
    for path in ["/pods", "/metrics", "/healthz"] {
        let (status, body) = node.get(&agent, path, None, Some(&client));
        assert_eq!(status, 200, "{path}: {body}");
    }

    // Within the TTLs, nothing more is asked: tokens (2 m) and decisions (5 m, 30 s).
    node.server.reset_requests();
    let (status, _) = node.get(&agent, "/pods", Some(&reader), None);
    assert_eq!(status, 200);
    let (status, _) = node.get(&agent, "/pods", Some(&stranger), None);
    assert_eq!(status, 403);
    let (status, _) = node.get(&agent, "/pods", None, Some(&client));
    assert_eq!(status, 200);
    assert_eq!(node.reviews(), (0, 0), "answered from the caches");

    // The token file is the box's operator: never reviewed.
    let (status, _) = node.get(&agent, "/pods", Some(OPERATOR_TOKEN), None);
    assert_eq!(status, 200);
    assert_eq!(node.reviews(), (0, 0));
}

/// N1 offline: with the API server cut, the token file still works, cached answers
/// still hold (an expired decision is used rather than none, an expired token review
/// is not), and a token or
/// certificate the agent cannot ask about is refused with a message that says the API
/// server is unreachable.
#[test]
fn n1_offline_token_file_works_and_unreviewable_callers_are_told_why() {
    let node = Node::new();
    node.server.allow(Rule::user(READER, "get", "nodes/pods"));
    let reader = node.token("reader");
    let late = node.token("late");
    // Decisions expire at once: only the fallback to the last answer can serve them
    // offline.
    let agent = node.agent(&["--authorization-webhook-cache-authorized-ttl=1ms"]);
    // A second agent whose token answers expire at once.
    let forgetful = node.agent(&["--authentication-token-webhook-cache-ttl=1ms"]);
    let client = node.kubelet_client();
    assert_eq!(node.get(&agent, "/pods", Some(&reader), None).0, 200);
    assert_eq!(node.get(&agent, "/pods", None, Some(&client)).0, 200);
    assert_eq!(node.get(&forgetful, "/pods", Some(&reader), None).0, 200);

    node.rt.block_on(node.server.cut());
    let (status, body) = node.get(&agent, "/pods", Some(OPERATOR_TOKEN), None);
    assert_eq!(status, 200, "{body}");
    // The reader's token is still fresh (2 m); its decision expired but is the last
    // answer, so it stands while the server cannot be asked. So for the certificate.
    let (status, body) = node.get(&agent, "/pods", Some(&reader), None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = node.get(&agent, "/pods", None, Some(&client));
    assert_eq!(status, 200, "{body}");

    // An expired TokenReview answer is never trusted (the token may be revoked).
    let (status, body) = node.get(&forgetful, "/pods", Some(&reader), None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("cannot reach the API server"), "{body}");

    // Never reviewed: refused, saying the API server cannot be reached.
    let (status, body) = node.get(&agent, "/pods", Some(&late), None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("cannot reach the API server"), "{body}");
    assert!(body.contains("--token-file"), "{body}");
    // An operator's certificate never asked about: 403, with the same reason.
    let (status, body) = node.get(&agent, "/pods", None, Some(&node.pki.client));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("Forbidden (user=operator, verb=get"), "{body}");
    assert!(body.contains("cannot reach the API server"), "{body}");

    node.rt.block_on(node.server.restore()).unwrap();
    let (status, body) = node.get(&agent, "/pods", Some(&late), None);
    assert_eq!(status, 403, "reviewed again once the server is back: no rule for it: {body}");
}
