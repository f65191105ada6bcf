//! The local API's config: where it listens and how it authenticates callers (built by
//! `api::start`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::node_api;

/// Where the local API listens, and how it authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub listen: SocketAddr,
    /// Where plain `/healthz` is also served (kubelet's healthz port); `None`: not.
    pub healthz: Option<SocketAddr>,
    /// How the local API authenticates requests.
    pub auth: Auth,
    /// kubelet's `streamingConnectionIdleTimeout`.
    pub streaming_idle_timeout: Duration,
}

/// Authentication of the local API. Reads and writes need the token or a client
/// certificate; with neither configured, only `/healthz` and `/readyz` answer (and, with
/// `anonymous_loopback_reads`, reads from loopback).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Auth {
    /// File holding the bearer token (surrounding whitespace ignored).
    pub token_file: Option<PathBuf>,
    /// Serve the API over TLS with this certificate chain and key (kubelet's
    /// tlsCertFile/tlsPrivateKeyFile).
    pub tls: Option<Tls>,
    /// CAs whose client certificates authenticate a caller (kubelet's
    /// authentication.x509.clientCAFile); needs `tls`.
    pub client_ca_file: Option<PathBuf>,
    /// Callers on a loopback address may read (GET) without credentials.
    pub anonymous_loopback_reads: bool,
    /// kubelet's anonymous callers, TokenReview and authorization mode (N1).
    pub access: node_api::Access,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}
