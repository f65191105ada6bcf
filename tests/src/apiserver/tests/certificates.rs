//! Bootstrap tokens, the CSR API, the approver and the signer, and client-certificate
//! authentication, through kube-rs (J1, J2).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use rcgen::{CertificateParams, DnType, KeyPair};
use serde_json::{Value, json};

use super::soon;
use crate::apiserver::TestApiServer;

async fn client_for(server: &TestApiServer, user: Value) -> Client {
    let dir = tempfile::tempdir().unwrap();
    let path = server.kubeconfig_for_user(dir.path(), "kubeconfig", user).unwrap();
    let kubeconfig = Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// A CSR for `cn`/`o` with `sans`, and its key (PEM).
fn request(
    name: &str,
    signer: &str,
    cn: &str,
    o: &str,
    sans: &[&str],
    usages: &[&str],
) -> (CertificateSigningRequest, String) {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.distinguished_name.push(DnType::OrganizationName, o);
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    let csr = serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": { "name": name },
        "spec": {
            "request": BASE64.encode(pem),
            "signerName": signer,
            "usages": usages,
            "username": "someone-else",
        },
    }))
    .unwrap();
    (csr, key.serialize_pem())
}

fn certificate(csr: &CertificateSigningRequest) -> Option<String> {
    let bytes = csr.status.as_ref()?.certificate.as_ref()?;
    Some(String::from_utf8(bytes.0.clone()).unwrap())
}

fn conditions(csr: &CertificateSigningRequest) -> Vec<(String, String)> {
    let conditions = csr.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().map(|c| (c.type_, c.reason.unwrap_or_default())).collect()
}

/// J1: a bootstrap token's client asks for a node client certificate; the approver
/// approves it, the signer issues it, and it authenticates as `system:node:<name>`.
#[tokio::test]
async fn j1_bootstrap_token_csr_is_approved_signed_and_authenticates_the_node() {
    let server = TestApiServer::builder().tls().start().await.unwrap();
    let token = server.create_bootstrap_token(Some(Duration::from_secs(3600))).unwrap();
    let id = token.split('.').next().unwrap().to_owned();
    let bootstrap = client_for(&server, json!({ "token": token })).await;
    let csrs: Api<CertificateSigningRequest> = Api::all(bootstrap);
    let usages = ["digital signature", "client auth"];
    let (body, key) = request(
        "node-csr-1",
        "kubernetes.io/kube-apiserver-client-kubelet",
        "system:node:edge-1",
        "system:nodes",
        &[],
        &usages,
    );
    let created = soon(csrs.create(&PostParams::default(), &body)).await.unwrap();
    // The sender is who the server says, not what the body says; no status yet.
    let spec = &created.spec;
    assert_eq!(spec.username.as_deref(), Some(format!("system:bootstrap:{id}").as_str()));
    let groups = spec.groups.clone().unwrap_or_default();
    assert!(groups.contains(&"system:bootstrappers".to_owned()), "{groups:?}");
    assert!(certificate(&created).is_none() && conditions(&created).is_empty());
    let issued = soon(csrs.get("node-csr-1")).await.unwrap();
    assert_eq!(conditions(&issued), [("Approved".to_owned(), "AutoApproved".to_owned())]);
    let cert = certificate(&issued).expect("a certificate");
    let node = client_for(
        &server,
        json!({ "client-certificate-data": BASE64.encode(&cert), "client-key-data": BASE64.encode(&key) }),
    )
    .await;
    // What a node may read (its own Node only: K5), as the node.
    let nodes: Api<Node> = Api::all(node.clone());
    soon(nodes.get_opt("edge-1")).await.unwrap();
    assert_eq!(server.user_requests("system:node:edge-1"), 1, "{:?}", server.requests_by_user());

    // The node renews with its own certificate: approved as a self renewal.
    let (renewal, _) = request(
        "node-csr-2",
        "kubernetes.io/kube-apiserver-client-kubelet",
        "system:node:edge-1",
        "system:nodes",
        &[],
        &usages,
    );
    let node_csrs: Api<CertificateSigningRequest> = Api::all(node.clone());
    soon(node_csrs.create(&PostParams::default(), &renewal)).await.unwrap();
    let renewed = own_request(&node_csrs, "node-csr-2").await;
    assert!(certificate(&renewed).is_some(), "{:?}", renewed.status);

    // Another node's name is not approved for it.
    let (other, _) = request(
        "node-csr-3",
        "kubernetes.io/kube-apiserver-client-kubelet",
        "system:node:edge-2",
        "system:nodes",
        &[],
        &usages,
    );
    soon(node_csrs.create(&PostParams::default(), &other)).await.unwrap();
    let left = own_request(&node_csrs, "node-csr-3").await;
    assert!(conditions(&left).is_empty() && certificate(&left).is_none());
}

/// A request read as a node reads its own: listed by name, as kubelet's (and the agent's)
/// wait for a certificate lists and watches it (`deploy/rbac.yaml` grants no `get`).
async fn own_request(
    api: &Api<CertificateSigningRequest>,
    name: &str,
) -> CertificateSigningRequest {
    let by_name = ListParams::default().fields(&format!("metadata.name={name}"));
    let listed = soon(api.list(&by_name)).await.unwrap();
    listed.items.into_iter().next().unwrap_or_else(|| panic!("no request {name}"))
}

/// J2: a serving request waits for the test's approval, through the `approval`
/// subresource, and is then signed; an unknown token is refused.
#[tokio::test]
async fn j2_serving_csr_waits_for_approval() {
    let server = TestApiServer::builder().tls().start().await.unwrap();
    let token = server.create_bootstrap_token(None).unwrap();
    let csrs: Api<CertificateSigningRequest> =
        Api::all(client_for(&server, json!({ "token": token })).await);
    let (body, _) = request(
        "serving-1",
        "kubernetes.io/kubelet-serving",
        "system:node:edge-1",
        "system:nodes",
        &["edge-1", "127.0.0.1"],
        &["digital signature", "server auth"],
    );
    soon(csrs.create(&PostParams::default(), &body)).await.unwrap();
    let waiting = soon(csrs.get("serving-1")).await.unwrap();
    assert!(conditions(&waiting).is_empty() && certificate(&waiting).is_none());
    let approval = json!({ "status": { "conditions": [{
        "type": "Approved", "status": "True", "reason": "ByTest", "message": "ok",
    }], "certificate": BASE64.encode("forged") } });
    let patched =
        soon(csrs.patch_approval("serving-1", &PatchParams::default(), &Patch::Merge(&approval)))
            .await
            .unwrap();
    // The approval subresource takes only the conditions.
    assert!(certificate(&patched).is_none());
    let signed = soon(csrs.get("serving-1")).await.unwrap();
    let pem = certificate(&signed).expect("signed after approval");
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");

    let unknown = client_for(&server, json!({ "token": "abcdef.0123456789abcdef" })).await;
    // A bootstrap token without its Secret is refused, static token or not.
    match Api::<CertificateSigningRequest>::all(unknown).get("serving-1").await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 401),
        other => panic!("expected 401, got {other:?}"),
    }
}

/// J2: an expired client certificate is a 401.
#[tokio::test]
async fn j2_expired_client_certificate_is_refused() {
    let server = TestApiServer::builder()
        .tls()
        .signing_duration(Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    let token = server.create_bootstrap_token(None).unwrap();
    let csrs: Api<CertificateSigningRequest> =
        Api::all(client_for(&server, json!({ "token": token })).await);
    let (body, key) = request(
        "short",
        "kubernetes.io/kube-apiserver-client-kubelet",
        "system:node:edge-1",
        "system:nodes",
        &[],
        &["digital signature", "client auth"],
    );
    soon(csrs.create(&PostParams::default(), &body)).await.unwrap();
    let cert = certificate(&soon(csrs.get("short")).await.unwrap()).unwrap();
    let user = json!({ "client-certificate-data": BASE64.encode(&cert), "client-key-data": BASE64.encode(&key) });
    let nodes: Api<Node> = Api::all(client_for(&server, user.clone()).await);
    soon(nodes.get_opt("edge-1")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let nodes: Api<Node> = Api::all(client_for(&server, user).await);
    match soon(nodes.get_opt("edge-1")).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 401),
        other => panic!("expected 401, got {other:?}"),
    }
}

/// J1: the approver approves only after its SubjectAccessReview: a bootstrap token
/// outside kubeadm's group (no `auth-extra-groups`) gets no binding, so its node client
/// request is left pending, never denied; once the cluster grants the group
/// `certificatesigningrequests/nodeclient`, the next request is approved.
#[tokio::test]
async fn j1_a_bootstrap_token_without_kubeadms_binding_is_left_pending() {
    use crate::apiserver::reviews::Rule;
    let server = TestApiServer::builder().tls().start().await.unwrap();
    let (id, secret) = crate::apiserver::bootstrap_auth::generate();
    let mut object = crate::apiserver::bootstrap_auth::secret(&id, &secret, None);
    object["stringData"].as_object_mut().unwrap().remove("auth-extra-groups");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(super::client(&server).await, "kube-system");
    soon(secrets.create(&PostParams::default(), &serde_json::from_value(object).unwrap()))
        .await
        .unwrap();
    let token = json!({ "token": format!("{id}.{secret}") });
    let csrs: Api<CertificateSigningRequest> = Api::all(client_for(&server, token).await);
    let node_request = |name: &str| {
        request(
            name,
            "kubernetes.io/kube-apiserver-client-kubelet",
            "system:node:edge-1",
            "system:nodes",
            &[],
            &["digital signature", "client auth"],
        )
        .0
    };
    soon(csrs.create(&PostParams::default(), &node_request("unbound"))).await.unwrap();
    let pending = soon(csrs.get("unbound")).await.unwrap();
    assert!(conditions(&pending).is_empty() && certificate(&pending).is_none(), "{pending:?}");

    server.allow(Rule::group(
        "system:bootstrappers",
        "create",
        "certificatesigningrequests/nodeclient",
    ));
    soon(csrs.create(&PostParams::default(), &node_request("bound"))).await.unwrap();
    let approved = soon(csrs.get("bound")).await.unwrap();
    assert_eq!(conditions(&approved), [("Approved".to_owned(), "AutoApproved".to_owned())]);
    assert!(certificate(&approved).is_some());
}
