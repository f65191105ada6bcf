use axum::http::{HeaderMap, HeaderValue, StatusCode, header};

use super::*;

fn headers(authorization: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(value) = authorization {
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
    }
    headers
}

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// The guard's decision ([`Authenticator::admit`]) for a request of a class (health, a
/// read, a change), as the earlier rules state it.
trait Allow {
    fn allow(
        &self,
        class: Class,
        headers: &HeaderMap,
        peer: Option<&Peer>,
    ) -> Result<Caller, Denied>;
}

impl Allow for Authenticator {
    fn allow(
        &self,
        class: Class,
        headers: &HeaderMap,
        peer: Option<&Peer>,
    ) -> Result<Caller, Denied> {
        let (method, path) = match class {
            Class::Open => (HttpMethod::GET, "/healthz"),
            Class::Read => (HttpMethod::GET, "/pods"),
            Class::Write => (HttpMethod::POST, "/manifests"),
        };
        assert_eq!(classify(&method, path), class);
        let incoming = Incoming { method: &method, path, headers, peer, certificate: None };
        match futures::executor::block_on(self.admit(incoming)) {
            Ok((caller, _)) => Ok(caller),
            Err(Refused::Credentials(refused_class, denied)) => {
                assert_eq!(refused_class, class);
                Err(denied)
            }
            Err(other) => panic!("not a refusal of the earlier rules: {other:?}"),
        }
    }
}

const LOOPBACK: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 40000);
const REMOTE: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), 40000);
const CERT: Peer = Peer { remote: REMOTE, client_cert: true };
const NO_CERT: Peer = Peer { remote: REMOTE, client_cert: false };
const LOCAL: Peer = Peer { remote: LOOPBACK, client_cert: false };

#[test]
fn bearer_takes_the_token_after_a_case_insensitive_scheme() {
    assert_eq!(bearer(b"Bearer s3cret"), Some(&b"s3cret"[..]));
    assert_eq!(bearer(b"bearer   s3cret  "), Some(&b"s3cret"[..]));
    assert_eq!(bearer(b"BEARER\ts3cret"), Some(&b"s3cret"[..]));
    for bad in [&b"Basic czNjcmV0"[..], b"Bearer", b"Bearer ", b"Bearers3cret", b"", b"s3cret"] {
        assert_eq!(bearer(bad), None, "{:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn the_right_token_authenticates_and_anything_else_is_refused() {
    let auth = Authenticator::new(Some("s3cret"), false);
    assert_eq!(auth.check(&headers(Some("Bearer s3cret")), None), Ok(Method::Token));
    assert_eq!(auth.check(&headers(None), None), Err(Denied::Missing));
    for wrong in ["Bearer s3cre", "Bearer s3cret2", "Bearer S3CRET", "Basic s3cret", "s3cret"] {
        assert_eq!(auth.check(&headers(Some(wrong)), None), Err(Denied::Wrong), "{wrong}");
    }
    // Without client CAs, a certificate (which the handshake would not have asked for)
    // counts for nothing.
    assert_eq!(auth.check(&headers(None), Some(&CERT)), Err(Denied::Missing));
}

#[test]
fn a_verified_client_certificate_authenticates_without_a_token() {
    let auth = Authenticator::new(None, true);
    assert_eq!(auth.check(&headers(None), Some(&CERT)), Ok(Method::ClientCert));
    assert_eq!(auth.check(&headers(None), Some(&NO_CERT)), Err(Denied::Missing));
    assert_eq!(auth.check(&headers(None), None), Err(Denied::Missing));
    // No token is configured, so no token is right.
    assert_eq!(auth.check(&headers(Some("Bearer anything")), None), Err(Denied::Wrong));

    let both = Authenticator::new(Some("s3cret"), true);
    assert_eq!(both.check(&headers(Some("Bearer s3cret")), Some(&NO_CERT)), Ok(Method::Token));
    assert_eq!(both.check(&headers(Some("Bearer nope")), Some(&CERT)), Ok(Method::ClientCert));
}

#[test]
fn with_nothing_configured_every_request_is_refused_as_off() {
    let auth = Authenticator::new(None, false);
    assert!(!auth.enabled());
    assert_eq!(auth.check(&headers(Some("Bearer s3cret")), Some(&CERT)), Err(Denied::Off));
    let problem = auth.problem(Class::Write, Denied::Off);
    assert_eq!(problem.status, StatusCode::FORBIDDEN);
    assert!(problem.error.contains("--token-file") && problem.error.contains("--client-ca-file"));
}

#[test]
fn refusals_say_how_to_authenticate() {
    let auth = Authenticator::new(Some("s3cret"), false);
    let problem = auth.problem(Class::Write, Denied::Missing);
    assert_eq!(problem.status, StatusCode::UNAUTHORIZED);
    assert!(problem.error.contains("--token-file"), "{}", problem.error);
    assert!(!problem.error.contains("s3cret"));
    let problem = Authenticator::new(None, true).problem(Class::Read, Denied::Wrong);
    assert_eq!(problem.status, StatusCode::UNAUTHORIZED);
    assert!(problem.error.contains("--client-ca-file"), "{}", problem.error);
}

#[test]
fn the_token_file_is_trimmed_and_must_not_be_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "  s3cret\n").unwrap();
    private(&path);
    let config = Auth { token_file: Some(path.clone()), ..Auth::default() };
    let auth = Authenticator::load(&config, None, "edge-1").unwrap();
    assert_eq!(auth.check(&headers(Some("Bearer s3cret")), None), Ok(Method::Token));
    assert!(!format!("{auth:?}").contains("s3cret"), "Debug must not show the token");

    std::fs::write(&path, " \n\t").unwrap();
    let error = Authenticator::load(&config, None, "edge-1").unwrap_err();
    assert!(matches!(error, Error::EmptyToken { .. }), "{error}");
    assert!(error.to_string().contains(&path.display().to_string()), "{error}");

    let missing = Auth { token_file: Some(dir.path().join("nope")), ..Auth::default() };
    let error = Authenticator::load(&missing, None, "edge-1").unwrap_err();
    assert!(matches!(error, Error::SecretFile { .. }), "{error}");
    assert!(error.to_string().contains("nope"), "{error}");
}

fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn loopback_is_127_slash_8_and_ipv6_loopback_mapped_or_not() {
    for ip in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
        assert!(is_loopback(ip.parse().unwrap()), "{ip}");
    }
    for ip in ["10.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "192.0.2.7", "fe80::1"] {
        assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
    }
    let v6 =
        Peer { remote: SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 1), client_cert: false };
    assert!(v6.is_loopback());
}

#[test]
fn health_is_open_gets_read_and_everything_else_writes() {
    use axum::http::Method as M;
    assert_eq!(classify(&M::GET, "/healthz"), Class::Open);
    assert_eq!(classify(&M::GET, "/readyz"), Class::Open);
    assert_eq!(classify(&M::POST, "/readyz"), Class::Open, "405 from the route, not 401");
    for path in [
        "/pods",
        "/pods/a/b",
        "/metrics",
        "/containerLogs/a/b/c",
        "/debug/log-level",
        "/manifests",
        "/nope",
        "/healthz/x",
    ] {
        assert_eq!(classify(&M::GET, path), Class::Read, "{path}");
        assert_eq!(classify(&M::HEAD, path), Class::Read, "{path}");
    }
    for (method, path) in [
        (M::PUT, "/debug/log-level"),
        (M::POST, "/refresh"),
        (M::PUT, "/manifests/a"),
        (M::DELETE, "/manifests/a"),
        (M::POST, "/pods"),
    ] {
        assert_eq!(classify(&method, path), Class::Write, "{method} {path}");
    }
}

#[test]
fn reads_need_credentials_unless_anonymous_loopback_reads_let_a_local_caller_in() {
    let strict = Authenticator::new(Some("s3cret"), false);
    assert_eq!(strict.allow(Class::Open, &headers(None), None), Ok(Caller::Anyone));
    assert_eq!(strict.allow(Class::Read, &headers(None), Some(&LOCAL)), Err(Denied::Missing));
    assert_eq!(
        strict.allow(Class::Read, &headers(Some("Bearer s3cret")), Some(&NO_CERT)),
        Ok(Caller::Authenticated(Method::Token))
    );

    let open = Authenticator::new(Some("s3cret"), false).with_anonymous_loopback_reads(true);
    assert_eq!(
        open.allow(Class::Read, &headers(None), Some(&LOCAL)),
        Ok(Caller::AnonymousLoopback)
    );
    assert_eq!(open.allow(Class::Read, &headers(None), Some(&NO_CERT)), Err(Denied::Missing));
    assert_eq!(
        open.allow(Class::Read, &headers(None), None),
        Err(Denied::Missing),
        "no peer, no loopback"
    );
    assert_eq!(
        open.allow(Class::Read, &headers(Some("Bearer wrong")), Some(&LOCAL)),
        Err(Denied::Wrong),
        "credentials sent are checked"
    );
    assert_eq!(
        open.allow(Class::Write, &headers(None), Some(&LOCAL)),
        Err(Denied::Missing),
        "writes always need credentials"
    );

    let only_loopback = Authenticator::new(None, false).with_anonymous_loopback_reads(true);
    assert!(only_loopback.serves_reads() && !only_loopback.enabled());
    assert_eq!(
        only_loopback.allow(Class::Read, &headers(None), Some(&LOCAL)),
        Ok(Caller::AnonymousLoopback)
    );
    assert_eq!(only_loopback.allow(Class::Read, &headers(None), Some(&NO_CERT)), Err(Denied::Off));
    assert_eq!(only_loopback.allow(Class::Write, &headers(None), Some(&LOCAL)), Err(Denied::Off));
    let problem = only_loopback.problem(Class::Read, Denied::Off);
    assert_eq!(problem.status, StatusCode::FORBIDDEN);
    assert!(problem.error.contains("loopback"), "{}", problem.error);

    let nothing = Authenticator::new(None, false);
    assert!(!nothing.serves_reads());
    assert_eq!(nothing.allow(Class::Read, &headers(None), Some(&LOCAL)), Err(Denied::Off));
    let problem = nothing.problem(Class::Read, Denied::Off);
    assert!(problem.error.contains("--anonymous-loopback-reads"), "{}", problem.error);
}

#[test]
fn a_secret_file_must_be_private_to_the_agents_user() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "s3cret").unwrap();
    for mode in [0o644, 0o640, 0o604, 0o620, 0o602, 0o660] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let error = check_private("--token-file", &path).unwrap_err();
        assert!(matches!(error, Error::SecretMode { .. }), "{mode:o}: {error}");
        let text = error.to_string();
        assert!(text.contains(&format!("chmod 600 {}", path.display())), "{text}");
        assert!(!text.contains("s3cret"));
    }
    for mode in [0o600, 0o400] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        check_private("--token-file", &path).unwrap();
    }
    let error = check_private("--tls-private-key-file", &dir.path().join("nope")).unwrap_err();
    assert!(error.to_string().contains("--tls-private-key-file"), "{error}");
    let config = Auth { token_file: Some(path.clone()), ..Auth::default() };
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(matches!(Authenticator::load(&config, None, "edge-1"), Err(Error::SecretMode { .. })));
}

#[test]
fn a_secret_file_of_another_user_is_refused() {
    // Whoever runs the test: root's 0644 file is someone else's for an agent of uid 1000,
    // and too open for one running as root.
    let passwd = Path::new("/etc/passwd");
    let error = judge_private("--token-file", passwd, (0, 0o100_644), 1000).unwrap_err();
    assert!(matches!(error, Error::SecretOwner { owner: 0, euid: 1000, .. }), "{error}");
    assert!(error.to_string().contains("chown"), "{error}");
    let error = judge_private("--token-file", passwd, (0, 0o100_644), 0).unwrap_err();
    assert!(matches!(error, Error::SecretMode { mode: 0o644, .. }), "{error}");
    judge_private("--token-file", passwd, (0, 0o100_600), 0).unwrap();
    // The real file is refused, for either reason.
    assert!(check_private("--token-file", passwd).is_err());
}

/// N3: every streaming endpoint (exec, attach, port-forward) and `/run` is a write.
#[test]
fn n3_exec_attach_port_forward_and_run_are_writes_whatever_the_method() {
    use axum::http::Method as M;
    for path in [
        "/exec/default/web/main",
        "/exec/default/web/0123-uid/main",
        "/run/default/web/main",
        "/run/default/web/0123-uid/main",
        "/exec",
        "/run/",
        "/attach/default/web/main",
        "/attach/default/web/0123-uid/main",
        "/portForward/default/web",
        "/portForward/default/web/0123-uid",
        "/attach",
        "/portForward/",
    ] {
        for method in [M::GET, M::HEAD, M::POST, M::OPTIONS] {
            assert_eq!(classify(&method, path), Class::Write, "{method} {path}");
        }
    }
    // Only those paths: a name that merely starts alike is what its method says.
    for path in ["/executions", "/runtime", "/pods/default/exec", "/attachments", "/portForwarding"]
    {
        assert_eq!(classify(&M::GET, path), Class::Read, "{path}");
    }
}

#[test]
fn an_anonymous_loopback_caller_cannot_exec() {
    let auth = Authenticator::new(Some("s3cret"), false).with_anonymous_loopback_reads(true);
    let class = classify(&axum::http::Method::GET, "/exec/default/web/main");
    assert_eq!(auth.allow(class, &headers(None), Some(&LOCAL)), Err(Denied::Missing));
    let problem = auth.problem(class, Denied::Missing);
    assert_eq!(problem.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        auth.allow(class, &headers(Some("Bearer s3cret")), Some(&LOCAL)),
        Ok(Caller::Authenticated(Method::Token))
    );
    // With nothing to authenticate with, nobody may exec, loopback or not.
    let only_loopback = Authenticator::new(None, false).with_anonymous_loopback_reads(true);
    assert_eq!(only_loopback.allow(class, &headers(None), Some(&LOCAL)), Err(Denied::Off));
    let problem = only_loopback.problem(class, Denied::Off);
    assert_eq!(problem.status, StatusCode::FORBIDDEN);
    assert!(problem.error.contains("/exec"), "{}", problem.error);
}
