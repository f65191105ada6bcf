//! N1's server side: TokenReview and SubjectAccessReview as a kubelet sends them, through
//! kube-rs, and the server's kubelet-client certificate.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenReview};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use super::{api_error, client};
use crate::apiserver::{KUBELET_CLIENT_GROUP, KUBELET_CLIENT_NAME, Rule, TestApiServer};

async fn token(server: &TestApiServer, account: &str) -> String {
    let client = client(server).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
    let object = serde_json::from_value(json!({ "metadata": { "name": account } })).unwrap();
    if account != "default" {
        accounts.create(&PostParams::default(), &object).await.unwrap();
    }
    let request: TokenRequest = serde_json::from_value(json!({ "spec": {} })).unwrap();
    let answer = accounts
        .create_subresource::<_, TokenRequest>("token", account, &PostParams::default(), &request)
        .await
        .unwrap();
    answer.status.unwrap().token.unwrap()
}

async fn review_token(server: &TestApiServer, token: &str) -> TokenReview {
    let reviews: Api<TokenReview> = Api::all(client(server).await);
    let review = serde_json::from_value(json!({ "spec": { "token": token } })).unwrap();
    reviews.create(&PostParams::default(), &review).await.unwrap()
}

async fn may(server: &TestApiServer, user: &str, groups: &[&str], verb: &str, sub: &str) -> bool {
    let reviews: Api<SubjectAccessReview> = Api::all(client(server).await);
    let review = serde_json::from_value(json!({ "spec": {
        "user": user,
        "groups": groups,
        "resourceAttributes": {
            "verb": verb, "resource": "nodes", "subresource": sub, "name": "edge-1", "version": "v1",
        },
    }}))
    .unwrap();
    let answer = reviews.create(&PostParams::default(), &review).await.unwrap();
    assert_eq!(answer.spec.user.as_deref(), Some(user), "the spec comes back as sent");
    answer.status.unwrap().allowed
}

/// N1: a TokenReview authenticates the service account tokens the server issued, with
/// the real server's user, and refuses anything else; reviews are counted, not stored.
#[tokio::test]
async fn n1_token_review_authenticates_issued_tokens() {
    let server = TestApiServer::start().await.unwrap();
    let token = token(&server, "reader").await;
    let status = review_token(&server, &token).await.status.unwrap();
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.unwrap();
    assert_eq!(user.username.as_deref(), Some("system:serviceaccount:default:reader"));
    assert_eq!(
        user.groups.unwrap(),
        ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    );
    for bad in ["not-a-jwt", &format!("{token}x")] {
        let status = review_token(&server, bad).await.status.unwrap();
        assert_ne!(status.authenticated, Some(true), "{bad}");
        assert!(status.error.is_some_and(|e| e.contains("invalid bearer token")));
    }
    assert_eq!(server.count("create", "tokenreviews"), 3);
    // Not stored: there is nothing to get or list.
    let reviews: Api<TokenReview> = Api::all(client(&server).await);
    assert_eq!(api_error(reviews.list(&Default::default()).await).0, 404);
    // A review without a token is invalid, as on the real server.
    let empty = serde_json::from_value(json!({ "spec": {} })).unwrap();
    assert_eq!(api_error(reviews.create(&PostParams::default(), &empty).await).0, 422);
}

/// N1: SubjectAccessReviews are answered from the rules a test sets, by user or group,
/// verb, resource and subresource; kubeadm's admin groups may do everything.
#[tokio::test]
async fn n1_subject_access_review_follows_the_rules() {
    let server = TestApiServer::start().await.unwrap();
    let reader = "system:serviceaccount:default:reader";
    assert!(!may(&server, reader, &[], "get", "pods").await, "nothing is granted by default");
    server.allow(Rule::user(reader, "get", "nodes/pods"));
    assert!(may(&server, reader, &[], "get", "pods").await);
    assert!(!may(&server, reader, &[], "create", "pods").await, "another verb");
    assert!(!may(&server, reader, &[], "get", "proxy").await, "another subresource");
    assert!(!may(&server, "someone", &[], "get", "pods").await, "another user");
    server.allow(Rule::group("monitoring", "get", "nodes/*"));
    assert!(may(&server, "prom", &["monitoring"], "get", "metrics").await);
    assert!(!may(&server, "prom", &["monitoring"], "create", "proxy").await);
    server.allow(Rule::group("ops", "*", "*"));
    assert!(may(&server, "alice", &["ops"], "create", "proxy").await);
    assert!(may(&server, KUBELET_CLIENT_NAME, &[KUBELET_CLIENT_GROUP], "create", "proxy").await);
    assert!(may(&server, "root", &["system:masters"], "delete", "proxy").await);
    server.clear_rules();
    assert!(!may(&server, reader, &[], "get", "pods").await);
    assert_eq!(server.count("create", "subjectaccessreviews"), 11);

    let reviews: Api<SubjectAccessReview> = Api::all(client(&server).await);
    let nobody = serde_json::from_value(json!({ "spec": {
        "resourceAttributes": { "verb": "get", "resource": "nodes" },
    }}))
    .unwrap();
    assert_eq!(api_error(reviews.create(&PostParams::default(), &nobody).await).0, 422);
}

/// N1: the kubelet-client certificate names kubeadm's user and group and chains to the
/// CA the handle gives.
#[tokio::test]
async fn n1_kubelet_client_identity_is_kubeadms() {
    use rustls::pki_types::pem::PemObject;
    let server = TestApiServer::start().await.unwrap();
    let identity = server.kubelet_client_identity();
    let cert =
        rustls::pki_types::CertificateDer::from_pem_slice(identity.cert_pem.as_bytes()).unwrap();
    let ca = rustls::pki_types::CertificateDer::from_pem_slice(identity.ca_pem.as_bytes()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
            .build()
            .unwrap();
    let now = rustls::pki_types::UnixTime::now();
    verifier.verify_client_cert(&cert, &[], now).unwrap();
    assert!(rustls::pki_types::PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes()).is_ok());
    let text = String::from_utf8_lossy(cert.as_ref()).into_owned();
    assert!(text.contains(KUBELET_CLIENT_NAME) && text.contains(KUBELET_CLIENT_GROUP));
}
