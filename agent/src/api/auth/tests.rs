use axum::http::{HeaderMap, HeaderValue, StatusCode, header};

use super::*;

fn headers(authorization: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(value) = authorization {
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
    }
    headers
}

const CERT: Peer = Peer { client_cert: true };
const NO_CERT: Peer = Peer { client_cert: false };

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
    let problem = auth.problem(Denied::Off);
    assert_eq!(problem.status, StatusCode::FORBIDDEN);
    assert!(problem.error.contains("--token-file") && problem.error.contains("--client-ca-file"));
}

#[test]
fn refusals_say_how_to_authenticate() {
    let auth = Authenticator::new(Some("s3cret"), false);
    let problem = auth.problem(Denied::Missing);
    assert_eq!(problem.status, StatusCode::UNAUTHORIZED);
    assert!(problem.error.contains("--token-file"), "{}", problem.error);
    assert!(!problem.error.contains("s3cret"));
    let problem = Authenticator::new(None, true).problem(Denied::Wrong);
    assert_eq!(problem.status, StatusCode::UNAUTHORIZED);
    assert!(problem.error.contains("--client-ca-file"), "{}", problem.error);
}

#[test]
fn the_token_file_is_trimmed_and_must_not_be_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "  s3cret\n").unwrap();
    let config = Auth { token_file: Some(path.clone()), ..Auth::default() };
    let auth = Authenticator::load(&config).unwrap();
    assert_eq!(auth.check(&headers(Some("Bearer s3cret")), None), Ok(Method::Token));
    assert!(!format!("{auth:?}").contains("s3cret"), "Debug must not show the token");

    std::fs::write(&path, " \n\t").unwrap();
    let error = Authenticator::load(&config).unwrap_err();
    assert!(matches!(error, Error::EmptyToken { .. }), "{error}");
    assert!(error.to_string().contains(&path.display().to_string()), "{error}");

    let missing = Auth { token_file: Some(dir.path().join("nope")), ..Auth::default() };
    let error = Authenticator::load(&missing).unwrap_err();
    assert!(matches!(error, Error::TokenFile { .. }), "{error}");
    assert!(error.to_string().contains("nope"), "{error}");
}
