//! Who may do what through the local API. Requests fall into three classes
//! ([`Class`]): `/healthz` and `/readyz` are open to anyone (as kubelet's health port
//! and the API server's default RBAC for health checks); other GETs read; everything
//! else changes state, and so do `/exec/...` and `/run/...` whatever their method (a
//! WebSocket upgrade is a GET, yet running a command in a container is the most
//! powerful thing the API does). A write needs credentials: the bearer token of `--token-file`,
//! or a client certificate the TLS handshake verified against `--client-ca-file`. A
//! read needs the same, unless `--anonymous-loopback-reads` lets a caller on a loopback
//! address read without any. [`guard`] applies the rule to every route, so a new route
//! cannot forget it; [`Authorized`] lets a handler state that it changes state.
//!
//! The token file and the TLS private key must be private to the agent's user
//! ([`check_private`]); no token is ever logged or shown by `Debug`.

use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method as HttpMethod, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{AppState, Error, Problem};
use crate::config::Auth;

/// The connection a request came over; the accept loop inserts it into each request's
/// extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The client's address.
    pub remote: SocketAddr,
    /// The client presented a certificate that chains to `--client-ca-file`.
    pub client_cert: bool,
}

impl Peer {
    /// Whether the client is on this host: 127.0.0.0/8, ::1, or an IPv4-mapped
    /// loopback address (a dual-stack listener).
    pub fn is_loopback(&self) -> bool {
        is_loopback(self.remote.ip())
    }
}

pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// What a request does, which decides what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `/healthz`, `/readyz`: anyone.
    Open,
    /// Any other GET (or HEAD): credentials, or a loopback caller when anonymous
    /// loopback reads are on.
    Read,
    /// Everything else: credentials.
    Write,
}

/// The class of a request by its method and path.
pub fn classify(method: &HttpMethod, path: &str) -> Class {
    match path {
        "/healthz" | "/readyz" => Class::Open,
        _ if runs_commands(path) => Class::Write,
        _ if method == HttpMethod::GET || method == HttpMethod::HEAD => Class::Read,
        _ => Class::Write,
    }
}

/// Whether the path is one of kubelet's endpoints that run commands in containers or
/// reach into pods (`/exec/...`, `/run/...`, `/attach/...`, `/portForward/...`; each alone
/// too, so that no spelling of them is a read). Paths are matched as sent: a `..` segment
/// or a doubled slash is no route.
fn runs_commands(path: &str) -> bool {
    ["/exec", "/run", "/attach", "/portForward"].iter().any(|prefix| {
        path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// How a caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Token,
    ClientCert,
}

/// Who a request is from, as far as the local API knows; [`guard`] inserts it into the
/// request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// Sent the token or a verified client certificate.
    Authenticated(Method),
    /// Nothing sent, reading from a loopback address with anonymous loopback reads on.
    AnonymousLoopback,
    /// Nothing checked: an open endpoint.
    Anyone,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// No way to authenticate is configured (and, for a read, no anonymous loopback
    /// read applies): nobody may do this.
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
    anonymous_loopback_reads: bool,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("token", &self.token.map(|_| "<redacted>"))
            .field("client_certs", &self.client_certs)
            .field("anonymous_loopback_reads", &self.anonymous_loopback_reads)
            .finish()
    }
}

impl Authenticator {
    /// Reads the token file (once, at start); an unreadable, empty or non-private file
    /// is an error.
    pub fn load(auth: &Auth) -> Result<Authenticator, Error> {
        let token = match &auth.token_file {
            Some(path) => Some(read_token(path)?),
            None => None,
        };
        Ok(Authenticator::new(token.as_deref(), auth.client_ca_file.is_some())
            .with_anonymous_loopback_reads(auth.anonymous_loopback_reads))
    }

    /// Credentials from a token (if any) and whether client certificates are verified.
    pub fn new(token: Option<&str>, client_certs: bool) -> Authenticator {
        Authenticator { token: token.map(digest), client_certs, anonymous_loopback_reads: false }
    }

    /// Lets callers on a loopback address read without credentials.
    pub fn with_anonymous_loopback_reads(mut self, on: bool) -> Authenticator {
        self.anonymous_loopback_reads = on;
        self
    }

    /// Whether any way to authenticate is configured.
    pub fn enabled(&self) -> bool {
        self.token.is_some() || self.client_certs
    }

    /// Whether anything but the open endpoints can be reached at all.
    pub fn serves_reads(&self) -> bool {
        self.enabled() || self.anonymous_loopback_reads
    }

    /// Decides whether a request of this class, with these headers, over a connection
    /// from this peer, may go on. Credentials sent are always checked: a wrong token is
    /// refused even where nothing would have been accepted.
    pub fn allow(
        &self,
        class: Class,
        headers: &HeaderMap,
        peer: Option<&Peer>,
    ) -> Result<Caller, Denied> {
        match class {
            Class::Open => Ok(Caller::Anyone),
            Class::Read
                if self.anonymous_loopback_reads
                    && !headers.contains_key(header::AUTHORIZATION)
                    && !peer.is_some_and(|p| p.client_cert)
                    && peer.is_some_and(Peer::is_loopback) =>
            {
                Ok(Caller::AnonymousLoopback)
            }
            Class::Read | Class::Write => self.check(headers, peer).map(Caller::Authenticated),
        }
    }

    /// Decides whether a request with these headers, over a connection from this peer,
    /// carries valid credentials.
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

    /// The answer to a refused request of this class.
    pub fn problem(&self, class: Class, denied: Denied) -> Problem {
        let how = match (self.token.is_some(), self.client_certs) {
            (true, true) => {
                "send `Authorization: Bearer <token>` with the token of --token-file, or a client certificate signed by a CA in --client-ca-file"
            }
            (true, false) => "send `Authorization: Bearer <token>` with the token of --token-file",
            _ => "present a client certificate signed by a CA in --client-ca-file",
        };
        match (denied, class) {
            (Denied::Off, Class::Read) if self.anonymous_loopback_reads => Problem::new(
                StatusCode::FORBIDDEN,
                "only callers on a loopback address may read without credentials (--anonymous-loopback-reads); configure --token-file or --client-ca-file to read from elsewhere",
            ),
            (Denied::Off, Class::Read) => Problem::new(
                StatusCode::FORBIDDEN,
                "reading through the local API is off: configure --token-file or --client-ca-file (with --tls-cert-file and --tls-private-key-file), or --anonymous-loopback-reads to let callers on this host read",
            ),
            (Denied::Off, _) => Problem::new(
                StatusCode::FORBIDDEN,
                "changing state through the local API is off: configure --token-file or --client-ca-file (with --tls-cert-file and --tls-private-key-file) to enable /manifests, /refresh, /exec and /run",
            ),
            (Denied::Missing, _) => {
                Problem::new(StatusCode::UNAUTHORIZED, format!("authentication required: {how}"))
            }
            (Denied::Wrong, _) => Problem::new(
                StatusCode::UNAUTHORIZED,
                format!("the credentials sent are not valid: {how}"),
            ),
        }
    }
}

/// The middleware every route goes through: classifies the request, refuses it (before
/// its body is read) or lets it on with its [`Caller`] in the extensions.
pub async fn guard(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let class = classify(request.method(), request.uri().path());
    let peer = request.extensions().get::<Peer>().copied();
    match state.auth.allow(class, request.headers(), peer.as_ref()) {
        Ok(caller) => {
            if class != Class::Open {
                tracing::debug!(
                    method = %request.method(), path = %request.uri().path(),
                    remote = ?peer.map(|p| p.remote), by = ?caller,
                    "local API request allowed"
                );
            }
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(denied) => {
            tracing::warn!(
                method = %request.method(), path = %request.uri().path(),
                remote = ?peer.map(|p| p.remote), reason = ?denied,
                "local API request refused"
            );
            state.auth.problem(class, denied).into_response()
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
    check_private("--token-file", path)?;
    let text = std::fs::read_to_string(path)
        .map_err(|source| Error::TokenFile { path: PathBuf::from(path), source })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(Error::EmptyToken { path: path.into() });
    }
    Ok(token.to_owned())
}

/// Refuses a secret file (the token, the TLS private key) that group or others may
/// read or write, or that another user than the agent's owns: anyone who can read it
/// can act as an operator.
pub fn check_private(flag: &'static str, path: &Path) -> Result<(), Error> {
    let metadata = std::fs::metadata(path).map_err(|source| Error::SecretFile {
        flag,
        path: path.into(),
        source,
    })?;
    let euid = nix::unistd::geteuid().as_raw();
    if metadata.uid() != euid {
        return Err(Error::SecretOwner { flag, path: path.into(), owner: metadata.uid(), euid });
    }
    let mode = metadata.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::SecretMode { flag, path: path.into(), mode });
    }
    Ok(())
}

/// Proof that the caller may change state: a handler that takes it cannot run for a
/// caller without credentials, whatever its path and method.
#[derive(Debug, Clone, Copy)]
pub struct Authorized(pub Method);

impl FromRequestParts<AppState> for Authorized {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        if let Some(Caller::Authenticated(method)) = parts.extensions.get::<Caller>() {
            return Ok(Authorized(*method));
        }
        state.auth.check(&parts.headers, parts.extensions.get::<Peer>()).map(Authorized).map_err(
            |denied| {
                tracing::warn!(
                    method = %parts.method, path = %parts.uri.path(), reason = ?denied,
                    "local API request refused"
                );
                state.auth.problem(Class::Write, denied)
            },
        )
    }
}

#[cfg(test)]
mod tests;
