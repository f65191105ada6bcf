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
//!
//! N1, kubelet's authentication and authorization, sits on top ([`admit`]): the user a
//! client certificate names, bearer tokens reviewed by the API server (TokenReview),
//! anonymous callers, and the `Webhook` authorization mode (SubjectAccessReview), each
//! opted into with kubelet's settings; with none of them, the rules above are all.
//!
//! - `admit`: the guard's decision, kubelet's and the rules above together.
//! - `review`: TokenReview and SubjectAccessReview through the API client, cached.
//! - `user`: who a caller is (kubelet's `user.Info`).

use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method as HttpMethod, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use self::admit::Incoming;
#[cfg(test)]
use self::admit::Refused;
use self::review::Reviewer;
pub use self::user::User;
use super::Auth;
use super::{AppState, Error, Problem};
use crate::apiserver::ApiClient;
use crate::config::node_api::{Access, Authorization};

mod admit;
mod review;
mod user;

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
    /// The token of `--token-file`.
    Token,
    ClientCert,
    /// A bearer token the API server's TokenReview authenticated.
    TokenReview,
    /// No credentials: `system:anonymous`, which the API server allowed (`Webhook`).
    Anonymous,
}

/// Who the connection's verified client certificate names; the accept loop inserts it
/// into each request's extensions.
#[derive(Debug, Clone)]
pub struct CertificateUser(pub Arc<User>);

/// Who a request is from, as far as the local API knows; [`guard`] inserts it into the
/// request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// Sent the token or a verified client certificate.
    Authenticated(Method),
    /// Nothing sent, reading from a loopback address with anonymous loopback reads on.
    AnonymousLoopback,
    /// Nothing sent, `--anonymous-auth` on, `AlwaysAllow`: may read.
    Anonymous,
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
    /// kubelet's settings (N1).
    access: Access,
    /// The API server's reviews, when a webhook is on.
    reviewer: Option<Reviewer>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("token", &self.token.map(|_| "<redacted>"))
            .field("client_certs", &self.client_certs)
            .field("anonymous_loopback_reads", &self.anonymous_loopback_reads)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Reads the token file (once, at start); an unreadable, empty or non-private file
    /// is an error. The webhooks (N1) ask the API server through `client` about the
    /// node `node_name`.
    pub fn load(
        auth: &Auth,
        client: Option<ApiClient>,
        node_name: &str,
    ) -> Result<Authenticator, Error> {
        let token = match &auth.token_file {
            Some(path) => Some(read_token(path)?),
            None => None,
        };
        let access = auth.access;
        let webhook = access.token_webhook.is_some()
            || matches!(access.authorization, Authorization::Webhook { .. });
        let reviewer = match (webhook, client) {
            (false, _) => None,
            (true, Some(client)) => Some(Reviewer::new(
                client,
                node_name.to_owned(),
                access.token_webhook,
                access.authorization,
            )),
            (true, None) => return Err(Error::NoApiServer),
        };
        let mut authenticator = Authenticator::new(token.as_deref(), auth.client_ca_file.is_some())
            .with_anonymous_loopback_reads(auth.anonymous_loopback_reads);
        authenticator.access = access;
        authenticator.reviewer = reviewer;
        Ok(authenticator)
    }

    /// Credentials from a token (if any) and whether client certificates are verified.
    pub fn new(token: Option<&str>, client_certs: bool) -> Authenticator {
        Authenticator {
            token: token.map(digest),
            client_certs,
            anonymous_loopback_reads: false,
            access: Access::default(),
            reviewer: None,
        }
    }

    /// Lets callers on a loopback address read without credentials.
    pub fn with_anonymous_loopback_reads(mut self, on: bool) -> Authenticator {
        self.anonymous_loopback_reads = on;
        self
    }

    /// Whether any way to authenticate is configured.
    pub fn enabled(&self) -> bool {
        self.token.is_some() || self.client_certs || self.reviews_tokens()
    }

    fn reviews_tokens(&self) -> bool {
        self.reviewer.as_ref().is_some_and(Reviewer::reviews_tokens)
    }

    /// Whether anything but the open endpoints can be reached at all.
    pub fn serves_reads(&self) -> bool {
        self.enabled() || self.anonymous_loopback_reads || self.access.anonymous
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
        let how = match (self.token.is_some() || self.reviews_tokens(), self.client_certs) {
            (true, true) if self.reviews_tokens() => {
                "send `Authorization: Bearer <token>` with a token the API server accepts (TokenReview) or the token of --token-file, or a client certificate signed by a CA in --client-ca-file"
            }
            (true, false) if self.reviews_tokens() => {
                "send `Authorization: Bearer <token>` with a token the API server accepts (TokenReview) or the token of --token-file"
            }
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
    let peer = request.extensions().get::<Peer>().copied();
    let certificate = request.extensions().get::<CertificateUser>().map(|c| c.0.clone());
    let incoming = Incoming {
        method: request.method(),
        path: request.uri().path(),
        headers: request.headers(),
        peer: peer.as_ref(),
        certificate: certificate.as_ref(),
    };
    match state.auth.admit(incoming).await {
        Ok((caller, user)) => {
            if caller != Caller::Anyone {
                tracing::debug!(
                    method = %request.method(), path = %request.uri().path(),
                    remote = ?peer.map(|p| p.remote), by = ?caller,
                    user = user.as_ref().map(|u| u.name.as_str()),
                    "local API request allowed"
                );
            }
            request.extensions_mut().insert(caller);
            if let Some(user) = user {
                request.extensions_mut().insert(user);
            }
            next.run(request).await
        }
        Err(refused) => {
            tracing::warn!(
                method = %request.method(), path = %request.uri().path(),
                remote = ?peer.map(|p| p.remote), reason = ?refused,
                "local API request refused"
            );
            refused.problem(&state.auth).into_response()
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
    judge_private(flag, path, (metadata.uid(), metadata.mode()), euid)
}

/// [`check_private`]'s rule, for a file of `owner` and `mode` and an agent running as
/// `euid`.
fn judge_private(
    flag: &'static str,
    path: &Path,
    (owner, mode): (u32, u32),
    euid: u32,
) -> Result<(), Error> {
    if owner != euid {
        return Err(Error::SecretOwner { flag, path: path.into(), owner, euid });
    }
    let mode = mode & 0o777;
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
