//! Authentication: who a request is, as the real server's authenticators say it, and
//! the `SelfSubjectReview` that tells a client (`kubectl auth whoami`).
//!
//! A bearer token this server issued (a service account token) is checked as the real
//! server's service account authenticator checks it: the signature and issuer, the
//! expiry, and, for a token bound to a pod, that the pod still exists with the same uid
//! (and the service account exists). The user is
//! `system:serviceaccount:<namespace>:<name>` in the groups `system:serviceaccounts`,
//! `system:serviceaccounts:<namespace>` and `system:authenticated`, with the bound pod,
//! node and token id as `extra`.
//!
//! A bootstrap token (module `bootstrap_auth`) is `system:bootstrap:<id>` (one of that
//! form without its Secret is a 401); a client
//! certificate the cluster CA signed (module `signer`, checked in `http`) is its CN.
//!
//! The server's static token ([`Config::token`](super::Config::token)) is an
//! administrator. Simplified: without a static token, a request with no token or with a
//! token this server did not sign is let through as `system:anonymous` (the real server
//! refuses an unknown token). Tokens the test maps to a node
//! ([`TestApiServer::node_kubeconfig`](super::TestApiServer::node_kubeconfig)) are that
//! node, as its client certificate would be. Only nodes are authorized (module
//! `node_authorizer`, and `node_restriction` for their writes); every other user may do
//! everything.

use hyper::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Value, json};

use super::bootstrap_auth;
use super::error::{Error, Result};
use super::resource::{PODS, SERVICEACCOUNTS};
use super::store::Store;
use super::token::{Signer, TokenClaims};

/// The path `kubectl auth whoami` posts to.
pub const SELF_SUBJECT_REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// Who made a request (a `UserInfo`).
#[derive(Debug, Clone, PartialEq)]
pub struct User(pub Value);

impl User {
    /// The user name (`system:node:edge-1`).
    pub fn name(&self) -> &str {
        self.0.get("username").and_then(Value::as_str).unwrap_or_default()
    }

    pub fn is_anonymous(&self) -> bool {
        self.name() == "system:anonymous"
    }
}

/// Who `headers` say the request is from; `Unauthorized` for a token that is not (or no
/// longer) valid, or when the static token is required and missing.
pub fn authenticate(
    store: &Store,
    signer: &Signer,
    static_token: Option<&str>,
    headers: &HeaderMap,
) -> Result<User> {
    let presented = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let Some(token) = presented.filter(|t| bootstrap_auth::is_bootstrap_token(t)) {
        return bootstrap_auth::user(store, token).ok_or(Error::Unauthorized);
    }
    match (presented, static_token) {
        (Some(token), Some(wanted)) if token == wanted => Ok(admin()),
        (Some(token), _) if signer.decode(token).is_ok() => {
            let claims = signer.verify(token).map_err(|_| Error::Unauthorized)?;
            check_bound(store, &claims)?;
            Ok(service_account(&claims))
        }
        (_, Some(_)) => Err(Error::Unauthorized),
        (_, None) => Ok(User(json!({
            "username": "system:anonymous",
            "groups": ["system:unauthenticated"],
        }))),
    }
}

/// Who `token` is, as the server's authenticators say it (a `TokenReview`): the static
/// token's administrator, or the service account of a token this server issued and
/// that is still valid (and still bound); `None` for anything else.
pub fn user_of_token(
    store: &Store,
    signer: &Signer,
    static_token: Option<&str>,
    token: &str,
) -> Option<User> {
    if static_token.is_some_and(|wanted| wanted == token) {
        return Some(admin());
    }
    let claims = signer.verify(token).ok()?;
    check_bound(store, &claims).ok()?;
    Some(service_account(&claims))
}

fn admin() -> User {
    User(json!({ "username": "admin", "groups": ["system:masters", "system:authenticated"] }))
}

/// The objects a token names must still exist (the pod with the same uid).
fn check_bound(store: &Store, claims: &TokenClaims) -> Result<()> {
    let k = &claims.kubernetes;
    let account = store
        .get(&SERVICEACCOUNTS, Some(&k.namespace), &k.serviceaccount.name)
        .map_err(|_| Error::Unauthorized)?;
    let uid_of =
        |object: &Value| object.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned);
    let same = |object: &Value, uid: &str| uid.is_empty() || uid_of(object).as_deref() == Some(uid);
    if !same(&account, &k.serviceaccount.uid) {
        return Err(Error::Unauthorized);
    }
    if let Some(pod) = &k.pod {
        let object =
            store.get(&PODS, Some(&k.namespace), &pod.name).map_err(|_| Error::Unauthorized)?;
        if !same(&object, &pod.uid) {
            return Err(Error::Unauthorized);
        }
    }
    Ok(())
}

fn service_account(claims: &TokenClaims) -> User {
    let k = &claims.kubernetes;
    let namespace = &k.namespace;
    let mut extra = serde_json::Map::new();
    extra.insert(
        "authentication.kubernetes.io/credential-id".into(),
        json!([format!("JTI={}", claims.jti)]),
    );
    if let Some(pod) = &k.pod {
        extra.insert("authentication.kubernetes.io/pod-name".into(), json!([pod.name]));
        extra.insert("authentication.kubernetes.io/pod-uid".into(), json!([pod.uid]));
    }
    if let Some(node) = &k.node {
        extra.insert("authentication.kubernetes.io/node-name".into(), json!([node.name]));
        extra.insert("authentication.kubernetes.io/node-uid".into(), json!([node.uid]));
    }
    User(json!({
        "username": claims.sub,
        "uid": k.serviceaccount.uid,
        "groups": [
            "system:serviceaccounts",
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated",
        ],
        "extra": extra,
    }))
}

/// The answer to a `SelfSubjectReview` create (its body is not read: it has no fields).
pub fn self_subject_review(user: &User) -> Value {
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": { "creationTimestamp": null },
        "status": { "userInfo": user.0 },
    })
}

/// The discovery document of `authentication.k8s.io/v1` (what is served of it: the
/// service accounts' `token` subresource is listed under `/api/v1`; `tokenreviews` is
/// in `reviews`).
pub fn discovery() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "authentication.k8s.io/v1",
        "resources": [
            { "name": "selfsubjectreviews", "singularName": "selfsubjectreview", "namespaced": false, "kind": "SelfSubjectReview", "verbs": ["create"] },
            { "name": "tokenreviews", "singularName": "tokenreview", "namespaced": false, "kind": "TokenReview", "verbs": ["create"] },
        ],
    })
}
