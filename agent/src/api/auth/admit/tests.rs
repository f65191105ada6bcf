//! N1 decisions made on the box (no API server asked): anonymous callers under
//! `AlwaysAllow`, the token file's operator, certificates' users, upgrades.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::http::{HeaderValue, Method as HttpMethod};

use super::*;
use crate::config::node_api::Access;

const REMOTE: Peer = Peer {
    remote: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), 40000),
    client_cert: false,
};

fn admit(
    auth: &Authenticator,
    method: HttpMethod,
    path: &str,
    headers: &HeaderMap,
    peer: Peer,
    certificate: Option<&Arc<User>>,
) -> Result<(Caller, Option<Arc<User>>), Refused> {
    let incoming = Incoming { method: &method, path, headers, peer: Some(&peer), certificate };
    futures::executor::block_on(auth.admit(incoming))
}

/// N1: `--anonymous-auth` under AlwaysAllow makes a caller without credentials
/// `system:anonymous`, who may read but not change state or exec (stricter than kubelet).
#[test]
fn n1_anonymous_callers_read_under_always_allow() {
    let mut auth = Authenticator::new(Some("s3cret"), false);
    auth.access = Access { anonymous: true, ..Access::default() };
    let none = HeaderMap::new();
    let (caller, user) = admit(&auth, HttpMethod::GET, "/pods", &none, REMOTE, None).unwrap();
    assert_eq!(caller, Caller::Anonymous);
    assert_eq!(user.unwrap().name, "system:anonymous");
    for (method, path) in [(HttpMethod::POST, "/manifests"), (HttpMethod::GET, "/exec/d/p/c")] {
        let refused = admit(&auth, method.clone(), path, &none, REMOTE, None).unwrap_err();
        assert_eq!(refused, Refused::Credentials(Class::Write, Denied::Missing), "{method} {path}");
    }
    // Credentials sent are still checked: a wrong token is not anonymous.
    let mut wrong = HeaderMap::new();
    wrong.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer nope"));
    let refused = admit(&auth, HttpMethod::GET, "/pods", &wrong, REMOTE, None).unwrap_err();
    assert_eq!(refused, Refused::Credentials(Class::Read, Denied::Wrong));
}

/// N1: the token file's bearer is the operator, and a verified certificate is the user
/// its subject names.
#[test]
fn n1_operator_and_certificate_users() {
    let auth = Authenticator::new(Some("s3cret"), true);
    let mut token = HeaderMap::new();
    token.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer s3cret"));
    let (caller, user) = admit(&auth, HttpMethod::POST, "/refresh", &token, REMOTE, None).unwrap();
    assert_eq!(caller, Caller::Authenticated(Method::Token));
    assert_eq!(user.unwrap().name, "outpost:token-file");

    let ops =
        Arc::new(User::authenticated("ops".into(), String::new(), vec![], Default::default()));
    let peer = Peer { client_cert: true, ..REMOTE };
    let none = HeaderMap::new();
    let (caller, user) =
        admit(&auth, HttpMethod::POST, "/refresh", &none, peer, Some(&ops)).unwrap();
    assert_eq!(caller, Caller::Authenticated(Method::ClientCert));
    assert_eq!(user.unwrap().name, "ops");
}

/// N1: an upgrade is a `Connection: upgrade` with an `Upgrade` header, however spelled.
#[test]
fn n1_upgrades_are_recognised() {
    let headers = |pairs: &[(&'static str, &'static str)]| {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    };
    assert!(is_upgrade(&headers(&[("connection", "Upgrade"), ("upgrade", "websocket")])));
    assert!(is_upgrade(&headers(&[
        ("connection", "keep-alive, upgrade"),
        ("upgrade", "SPDY/3.1")
    ])));
    assert!(is_upgrade(&headers(&[
        ("connection", "keep-alive"),
        ("connection", "UPGRADE"),
        ("upgrade", "websocket")
    ])));
    assert!(!is_upgrade(&headers(&[("upgrade", "websocket")])));
    assert!(!is_upgrade(&headers(&[("connection", "upgrade")])));
    assert!(!is_upgrade(&headers(&[("connection", "upgraded"), ("upgrade", "websocket")])));
    assert!(!is_upgrade(&HeaderMap::new()));
}

/// N1: under `Webhook`, health is authorized like the rest, but an on-box caller with
/// `--anonymous-loopback-reads` still reads it (decided on the box, offline too).
#[test]
fn n1_webhook_health_needs_credentials_except_from_loopback_with_anonymous_reads() {
    use crate::config::node_api::Authorization;
    let webhook = Authorization::Webhook {
        authorized_ttl: std::time::Duration::from_secs(300),
        unauthorized_ttl: std::time::Duration::from_secs(30),
    };
    let mut auth = Authenticator::new(Some("s3cret"), false);
    auth.access = Access { authorization: webhook, ..Access::default() };
    let none = HeaderMap::new();
    let local = Peer { remote: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 40000), ..REMOTE };
    let refused = admit(&auth, HttpMethod::GET, "/healthz", &none, local, None).unwrap_err();
    assert_eq!(refused, Refused::Credentials(Class::Open, Denied::Missing));
    let auth = auth.with_anonymous_loopback_reads(true);
    let (caller, _) = admit(&auth, HttpMethod::GET, "/healthz", &none, local, None).unwrap();
    assert_eq!(caller, Caller::AnonymousLoopback);
    let refused = admit(&auth, HttpMethod::GET, "/healthz", &none, REMOTE, None).unwrap_err();
    assert_eq!(refused, Refused::Credentials(Class::Open, Denied::Missing));
}
