//! The `serviceaccounts/{name}/token` subresource (TokenRequest) and the tokens it
//! issues, through kube-rs.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{client, pod, pods};
use crate::apiserver::token::Signer;
use crate::apiserver::{
    ISSUER, KubernetesClaims, ObjectRef, TestApiServer, TokenClaims, TokenError,
};

/// POSTs a TokenRequest for `account` in `default`; the answer, or its code and message.
async fn request(
    client: &Client,
    account: &str,
    spec: Value,
) -> Result<TokenRequest, (u16, String)> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let body: TokenRequest = serde_json::from_value(json!({ "spec": spec })).unwrap();
    match api
        .create_subresource::<_, TokenRequest>("token", account, &PostParams::default(), &body)
        .await
    {
        Ok(answer) => Ok(answer),
        Err(kube::Error::Api(status)) => Err((status.code, status.message.clone())),
        Err(other) => panic!("{other:?}"),
    }
}

fn token_of(answer: TokenRequest) -> String {
    answer.status.unwrap().token.unwrap()
}

#[tokio::test]
async fn a_token_request_is_defaulted_and_answered_with_a_signed_token() {
    let server = TestApiServer::start().await.unwrap();
    let client = client(&server).await;
    let answer = request(&client, "default", json!({})).await.unwrap();
    let spec = answer.spec.unwrap();
    assert_eq!(spec.audiences.unwrap(), [ISSUER]);
    assert_eq!(spec.expiration_seconds, Some(3600));
    assert_eq!(answer.metadata.name.as_deref(), Some("default"));
    let status = answer.status.unwrap();
    let token = status.token.unwrap();
    let expiration = status.expiration_timestamp.unwrap().0.as_second();
    let claims = server.verify_token(&token).unwrap();
    assert_eq!(claims.iss, ISSUER);
    assert_eq!(claims.sub, "system:serviceaccount:default:default");
    assert_eq!(claims.aud, [ISSUER]);
    assert_eq!(claims.exp - claims.iat, 3600);
    assert_eq!(claims.nbf, claims.iat);
    assert_eq!(claims.jti.len(), 36);
    assert_eq!(claims.kubernetes.namespace, "default");
    let account = server.get("serviceaccounts", Some("default"), "default").unwrap();
    assert_eq!(claims.kubernetes.serviceaccount.uid, account["metadata"]["uid"]);
    assert_eq!(claims.kubernetes.pod, None);
    assert_eq!(expiration, claims.exp);
    assert_eq!(server.count("create", "serviceaccounts/token"), 1);

    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    assert!(server.verify_token(&forged).is_err());
    let other = TestApiServer::start().await.unwrap();
    assert_eq!(other.verify_token(&token), Err(TokenError::Signature));
}

#[tokio::test]
async fn a_token_bound_to_a_pod_names_it_and_its_node() {
    let server = TestApiServer::start().await.unwrap();
    let client = client(&server).await;
    let created = pods(&server)
        .await
        .create(&PostParams::default(), &pod("web", Some("edge-1")))
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    let spec = json!({
        "audiences": ["vault"], "expirationSeconds": 7200,
        "boundObjectRef": { "kind": "Pod", "apiVersion": "v1", "name": "web", "uid": uid },
    });
    let answer = request(&client, "default", spec).await.unwrap();
    let claims = server.verify_token(&token_of(answer)).unwrap();
    assert_eq!(claims.aud, ["vault"]);
    assert_eq!(claims.exp - claims.iat, 7200);
    let pod = claims.kubernetes.pod.unwrap();
    assert_eq!((pod.name.as_str(), pod.uid.as_str()), ("web", uid.as_str()));
    assert_eq!(claims.kubernetes.node.unwrap().name, "edge-1");
    assert_eq!(claims.kubernetes.warnafter, None);
}

#[tokio::test]
async fn the_kube_api_access_lifetime_is_extended_with_a_warn_after() {
    let server = TestApiServer::start().await.unwrap();
    let client = client(&server).await;
    pods(&server).await.create(&PostParams::default(), &pod("web", None)).await.unwrap();
    let spec = json!({
        "expirationSeconds": 3607,
        "boundObjectRef": { "kind": "Pod", "apiVersion": "v1", "name": "web" },
    });
    let answer = request(&client, "default", spec).await.unwrap();
    let status = answer.status.unwrap();
    let token = status.token.unwrap();
    let expiration = status.expiration_timestamp.unwrap().0.as_second();
    let claims = server.verify_token(&token).unwrap();
    assert_eq!(claims.exp - claims.iat, 365 * 24 * 3600);
    assert_eq!(claims.kubernetes.warnafter, Some(claims.iat + 3607));
    assert_eq!(expiration, claims.iat + 3607);
}

#[tokio::test]
async fn token_requests_fail_as_the_real_server_fails_them() {
    let server = TestApiServer::start().await.unwrap();
    let client = client(&server).await;
    pods(&server).await.create(&PostParams::default(), &pod("web", None)).await.unwrap();
    let bound = |name: &str, uid: &str| json!({ "boundObjectRef": { "kind": "Pod", "apiVersion": "v1", "name": name, "uid": uid } });
    assert_eq!(
        request(&client, "ghost", json!({})).await.unwrap_err(),
        (404, "serviceaccounts \"ghost\" not found".into())
    );
    assert_eq!(
        request(&client, "default", bound("gone", "")).await.unwrap_err(),
        (404, "pods \"gone\" not found".into())
    );
    assert_eq!(
        request(&client, "default", bound("web", "0000")).await.unwrap_err(),
        (
            409,
            "Operation cannot be fulfilled on Pod \"web\": the UID in the bound object reference \
             (0000) does not match the UID in record. The object might have been deleted and \
             then recreated"
                .into()
        )
    );
    assert_eq!(
        request(&client, "default", json!({ "expirationSeconds": 599 })).await.unwrap_err(),
        (
            422,
            "TokenRequest.authentication.k8s.io \"default\" is invalid: spec.expirationSeconds: \
             Invalid value: 599: may not specify a duration less than 10 minutes"
                .into()
        )
    );
}

#[tokio::test]
async fn tests_may_lower_the_minimum_lifetime_to_see_refreshes() {
    let server = TestApiServer::builder()
        .min_token_expiration(Duration::from_secs(5))
        .start()
        .await
        .unwrap();
    let client = client(&server).await;
    let answer = request(&client, "default", json!({ "expirationSeconds": 5 })).await.unwrap();
    let token = token_of(answer);
    let claims = server.verify_token(&token).unwrap();
    assert_eq!(claims.exp - claims.iat, 5);
    assert_eq!(server.decode_token(&token).unwrap(), claims);
    assert_eq!(
        request(&client, "default", json!({ "expirationSeconds": 4 })).await.unwrap_err().0,
        422
    );
}

#[tokio::test]
async fn discovery_lists_the_token_subresource_and_it_takes_only_posts() {
    let server = TestApiServer::start().await.unwrap();
    let client = client(&server).await;
    let gvk = kube::api::GroupVersionKind::gvk("", "v1", "ServiceAccount");
    let (_, capabilities) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
    let token = capabilities.subresources.iter().find(|(r, _)| r.plural == "token");
    let (resource, token) = token.expect("a token subresource");
    assert_eq!(
        (resource.group.as_str(), resource.kind.as_str()),
        ("authentication.k8s.io", "TokenRequest")
    );
    assert_eq!(token.operations, ["create"]);
    let api: Api<ServiceAccount> = Api::namespaced(client, "default");
    let got = api.get_subresource("token", "default").await;
    assert_eq!(super::api_error(got).0, 405);
}

#[test]
fn an_expired_token_decodes_but_does_not_verify() {
    let signer = Signer::generate().unwrap();
    let now = jiff::Timestamp::now().as_second();
    let claims = TokenClaims {
        iss: ISSUER.into(),
        sub: "system:serviceaccount:default:default".into(),
        aud: vec![ISSUER.into()],
        exp: now - 10,
        iat: now - 20,
        nbf: now - 20,
        jti: "0".into(),
        kubernetes: KubernetesClaims {
            namespace: "default".into(),
            serviceaccount: ObjectRef { name: "default".into(), uid: String::new() },
            pod: None,
            node: None,
            warnafter: None,
        },
    };
    let token = signer.sign(&claims).unwrap();
    assert!(
        matches!(signer.verify(&token), Err(TokenError::Expired { exp, .. }) if exp == now - 10)
    );
    assert_eq!(signer.decode(&token).unwrap(), claims);
    let early = signer.sign(&TokenClaims { nbf: now + 60, exp: now + 120, ..claims }).unwrap();
    assert!(matches!(signer.verify(&early), Err(TokenError::NotYetValid { .. })));
    assert!(matches!(signer.verify("a.b"), Err(TokenError::Malformed(_))));
}
