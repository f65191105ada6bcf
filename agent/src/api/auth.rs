//! Who may change state through the local API: a caller that sends the bearer token of
//! `--token-file`, or that presented a client certificate the TLS handshake verified
//! against `--client-ca-file`. Read endpoints need neither.

use std::path::{Path, PathBuf};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{AppState, Error, Problem};
use crate::config::Auth;

/// What the TLS handshake established about a connection; the TLS server inserts it into
/// each request's extensions. Plain HTTP requests carry none.
#[derive(Debug, Clone, Copy, Default)]
pub struct Peer {
    /// The client presented a certificate that chains to `--client-ca-file`.
    pub client_cert: bool,
}

/// How a caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Token,
    ClientCert,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// Neither a token file nor a client CA is configured: nobody may change state.
    Off,
    /// No credentials were sent.
    Missing,
    /// An `Authorization` header that is not a bearer token, or not the right one.
    Wrong,
}

/// The configured credentials.
pub struct Authenticator {
    /// SHA-256 of the token: compared in constant time with the digest of what a caller
    /// sends, so neither the token's bytes nor its length leak through timing.
    token: Option<[u8; 32]>,
    client_certs: bool,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("token", &self.token.map(|_| "<redacted>"))
            .field("client_certs", &self.client_certs)
            .finish()
    }
}

impl Authenticator {
    /// Reads the token file (once, at start); an unreadable or empty file is an error.
    pub fn load(auth: &Auth) -> Result<Authenticator, Error> {
        let token = match &auth.token_file {
            Some(path) => Some(read_token(path)?),
            None => None,
        };
        Ok(Authenticator::new(token.as_deref(), auth.client_ca_file.is_some()))
    }

    /// Credentials from a token (if any) and whether client certificates are verified.
    pub fn new(token: Option<&str>, client_certs: bool) -> Authenticator {
        Authenticator { token: token.map(digest), client_certs }
    }

    /// Whether any way to authenticate is configured.
    pub fn enabled(&self) -> bool {
        self.token.is_some() || self.client_certs
    }

    /// Decides whether a request with these headers, over a connection with this TLS
    /// peer, may change state.
    pub fn check(&self, headers: &HeaderMap, peer: Option<&Peer>) -> Result<Method, Denied> {
        if !self.enabled() {
            return Err(Denied::Off);
        }
        if self.client_certs && peer.is_some_and(|p| p.client_cert) {
            return Ok(Method::ClientCert);
        }
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(Denied::Missing);
        };
        match (&self.token, bearer(value.as_bytes())) {
            (Some(expected), Some(sent)) if bool::from(digest_bytes(sent).ct_eq(expected)) => {
                Ok(Method::Token)
            }
            _ => Err(Denied::Wrong),
        }
    }

    /// The answer to a refused request.
    pub fn problem(&self, denied: Denied) -> Problem {
        let how = match (self.token.is_some(), self.client_certs) {
            (true, true) => {
                "send `Authorization: Bearer <token>` with the token of --token-file, or a client certificate signed by a CA in --client-ca-file"
            }
            (true, false) => "send `Authorization: Bearer <token>` with the token of --token-file",
            _ => "present a client certificate signed by a CA in --client-ca-file",
        };
        match denied {
            Denied::Off => Problem::new(
                StatusCode::FORBIDDEN,
                "changing state through the local API is off: configure --token-file or --client-ca-file (with --tls-cert-file and --tls-private-key-file) to enable /manifests and /refresh",
            ),
            Denied::Missing => {
                Problem::new(StatusCode::UNAUTHORIZED, format!("authentication required: {how}"))
            }
            Denied::Wrong => Problem::new(
                StatusCode::UNAUTHORIZED,
                format!("the credentials sent are not valid: {how}"),
            ),
        }
    }
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    let (scheme, token) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || !token.first()?.is_ascii_whitespace() {
        return None;
    }
    let token = token.trim_ascii();
    (!token.is_empty()).then_some(token)
}

fn digest(token: &str) -> [u8; 32] {
    digest_bytes(token.as_bytes())
}

fn digest_bytes(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// The token in `path`, surrounding whitespace removed.
fn read_token(path: &Path) -> Result<String, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| Error::TokenFile { path: PathBuf::from(path), source })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(Error::EmptyToken { path: path.into() });
    }
    Ok(token.to_owned())
}

/// Extracts proof that the caller may change state; refuses the request (401, or 403
/// when no authentication is configured) before its body is read.
#[derive(Debug, Clone, Copy)]
pub struct Authorized;

impl FromRequestParts<AppState> for Authorized {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        match state.auth.check(&parts.headers, parts.extensions.get::<Peer>()) {
            Ok(method) => {
                tracing::debug!(method = %parts.method, path = %parts.uri.path(), by = ?method, "local API caller authenticated");
                Ok(Authorized)
            }
            Err(denied) => {
                tracing::warn!(
                    method = %parts.method, path = %parts.uri.path(), reason = ?denied,
                    "local API request refused"
                );
                Err(state.auth.problem(denied))
            }
        }
    }
}

#[cfg(test)]
mod tests;
