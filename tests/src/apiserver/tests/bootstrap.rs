//! J1, the server's side: `cluster-info` readable without credentials and signed with
//! each bootstrap token, as the bootstrap signer signs it.

use std::time::Duration;

use outpost_core::bootstrap_token::{self as bt, Token};
use serde_json::{Value, json};

use super::PATIENCE;
use crate::apiserver::TestApiServer;

async fn anonymous_get(server: &TestApiServer, path: &str) -> (u16, Value) {
    // reqwest is built without a provider of its own (as the agent's).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response =
        reqwest::Client::new().get(format!("{}{path}", server.url())).send().await.unwrap();
    let code = response.status().as_u16();
    (code, serde_json::from_slice(&response.bytes().await.unwrap()).unwrap())
}

const CLUSTER_INFO: &str = "/api/v1/namespaces/kube-public/configmaps/cluster-info";

fn cluster_info(server: &TestApiServer) -> Value {
    server.get("configmaps", Some("kube-public"), "cluster-info").unwrap()
}

/// Waits until `cluster-info`'s signature keys are `ids`.
async fn signed_by(server: &TestApiServer, ids: &[&str]) -> Value {
    let want: Vec<String> = ids.iter().map(|id| bt::jws_key(id)).collect();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let info = cluster_info(server);
        let keys: Vec<String> = info["data"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with(bt::JWS_KEY_PREFIX))
            .cloned()
            .collect();
        if keys == want {
            return info;
        }
        assert!(tokio::time::Instant::now() < deadline, "signed by {keys:?}, not {want:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn j1_cluster_info_is_public_and_signed_with_each_token() {
    let server = TestApiServer::start_with_token("admin-token").await.unwrap();
    // Not there before kubeadm init's part.
    assert_eq!(anonymous_get(&server, CLUSTER_INFO).await.0, 404);
    server.add_bootstrap_token("abcdef", "0123456789abcdef").unwrap();
    server.add_bootstrap_token("ghijkl", "fedcba9876543210").unwrap();
    let (code, info) = anonymous_get(&server, CLUSTER_INFO).await;
    assert_eq!(code, 200, "{info}");
    let kubeconfig = info["data"]["kubeconfig"].as_str().unwrap();
    assert!(kubeconfig.contains(&server.url()), "{kubeconfig}");
    for (id, secret) in [("abcdef", "0123456789abcdef"), ("ghijkl", "fedcba9876543210")] {
        let signature = info["data"][bt::jws_key(id)].as_str().unwrap();
        let token = Token::new(id, secret).unwrap();
        assert_eq!(bt::jws::verify(signature, kubeconfig, &token), Ok(()));
    }
    // Only cluster-info is open to anonymous readers.
    let (code, _) =
        anonymous_get(&server, "/api/v1/namespaces/kube-public/configmaps/kube-root-ca.crt").await;
    assert_eq!(code, 401);
    let (code, _) = anonymous_get(&server, "/api/v1/namespaces/kube-system/secrets").await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn j1_signatures_follow_the_token_secrets() {
    let server = TestApiServer::start().await.unwrap();
    server.add_bootstrap_token("abcdef", "0123456789abcdef").unwrap();
    signed_by(&server, &["abcdef"]).await;

    // A token that may not sign, an expired one and a malformed one get no signature.
    let mut no_signing = crate::apiserver::bootstrap_token_secret("nosign", "0123456789abcdef");
    no_signing["stringData"]["usage-bootstrap-signing"] = json!("false");
    server.create(no_signing).unwrap();
    let mut expired = crate::apiserver::bootstrap_token_secret("expird", "0123456789abcdef");
    expired["stringData"]["expiration"] = json!("2020-01-01T00:00:00Z");
    server.create(expired).unwrap();
    let mut misnamed = crate::apiserver::bootstrap_token_secret("wrongn", "0123456789abcdef");
    misnamed["metadata"]["name"] = json!("bootstrap-token-other1");
    server.create(misnamed).unwrap();
    // One that may, written through the handle only: the signer follows the store.
    server.create(crate::apiserver::bootstrap_token_secret("later1", "0123456789abcdef")).unwrap();
    signed_by(&server, &["abcdef", "later1"]).await;

    // A new secret for the same id: the signature changes.
    let before = cluster_info(&server)["data"][bt::jws_key("abcdef")].clone();
    server
        .patch(
            "secrets",
            Some("kube-system"),
            "bootstrap-token-abcdef",
            &crate::apiserver::Patch::Merge(
                json!({ "data": { "token-secret": "YWFhYWFhYWFhYWFhYWFhYQ==" } }),
            ),
            false,
        )
        .unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while cluster_info(&server)["data"][bt::jws_key("abcdef")] == before {
        assert!(tokio::time::Instant::now() < deadline, "not signed again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let info = cluster_info(&server);
    let token = Token::new("abcdef", "aaaaaaaaaaaaaaaa").unwrap();
    let signature = info["data"][bt::jws_key("abcdef")].as_str().unwrap();
    assert_eq!(
        bt::jws::verify(signature, info["data"]["kubeconfig"].as_str().unwrap(), &token),
        Ok(())
    );

    // A deleted token's signature goes.
    server.delete("secrets", Some("kube-system"), "bootstrap-token-abcdef", None).unwrap();
    signed_by(&server, &["later1"]).await;
}
