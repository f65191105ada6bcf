//! The local HTTP API: kubelet-style read endpoints (`/pods`, `/containerLogs`,
//! `/metrics`), kubelet's streaming `/exec`, `/attach` and `/portForward` and its `/run`, health (`/healthz`, `/readyz`), the
//! push source under `/manifests` and `POST /refresh`, and `/debug/log-level`. Every route goes through [`auth::guard`]:
//! health is open, reads and writes need credentials (reads from loopback may be
//! anonymous, see [`auth`]); with kubelet's `Webhook` authorization, every request is
//! authorized by the API server as kubelet's are (N1). Handlers read the merge's lock-free snapshot; none of them
//! can block the merge, and [`serve`]'s limits keep a slow client from stalling the agent.
//!
//! - `audit`: `/manifests/audit`, who changed which manifest.
//! - `auth`: who may do what; bearer token and client certificate checks, and kubelet's
//!   TokenReview and SubjectAccessReview (N1) when configured.
//! - `container_logs`: `/containerLogs/{namespace}/{pod}/{container}`.
//! - `exec`: `/exec/...`, `/attach/...` and `/portForward/...` (SPDY or WebSocket), and
//!   `/run/...`: commands in, attaches to and connections into running pods.
//! - `health`: `/healthz` and `/readyz` with their checks.
//! - `healthz_port`: `/healthz` alone on kubelet's healthz port (127.0.0.1:10248).
//! - `log_level`: `/debug/log-level`.
//! - `pod`: one pod and its events (`/pods/{namespace}/{name}[/events]`).
//! - `push`: the `/manifests` and `/refresh` handlers.
//! - `runtime`: the container runtime as the handlers reach it, once connected.
//! - `serve`: the accept loop and its limits.
//! - `spdy`: SPDY/3.1, the other transport of the streaming endpoints.
//! - `stats`: kubelet's `/stats/summary`, `/metrics/{resource,cadvisor,probes}`,
//!   `/configz` and `/runningpods` (N2).
//! - `status`: `/status`, the agent at a glance (`outpost status`).
//! - `streams`: what `/exec`, `/attach` and `/portForward` carry, whatever the transport.
//! - `tls`: the TLS configuration (optionally verifying client certificates).

mod audit;
mod auth;
mod container_logs;
mod debug;
pub mod exec;
mod health;
mod healthz_port;
mod log_level;
mod pod;
mod push;
pub mod runtime;
mod serve;
mod spdy;
pub mod start;
pub mod stats;
pub mod status;
pub mod streams;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use self::auth::Authenticator;
pub use self::healthz_port::healthz_port;
pub use crate::config::api::{Auth, Config, Tls};
use crate::logging::LogLevel;
use crate::podconfig::SnapshotHandle;
use crate::source::Refresh;
use crate::source::push::PushHandle;
use crate::status::{RuntimeReady, StatusStore};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {addr}: {source}; pick another address with --listen")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the token file {path} (--token-file): {source}")]
    TokenFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {path} (--token-file) is empty; write the bearer token into it")]
    EmptyToken { path: PathBuf },
    #[error("cannot read {flag} {path}: {source}")]
    SecretFile {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{flag} {path} is readable or writable by group or others (mode {mode:03o}); make it private to the agent's user: chmod 600 {path}"
    )]
    SecretMode { flag: &'static str, path: PathBuf, mode: u32 },
    #[error(
        "{flag} {path} is owned by uid {owner}, not by the agent's user (uid {euid}); chown {euid} {path}"
    )]
    SecretOwner { flag: &'static str, path: PathBuf, owner: u32, euid: u32 },
    #[error("{flag} {path}: {reason}")]
    Tls { flag: &'static str, path: PathBuf, reason: String },
    #[error("cannot set up TLS for the local API: {0}")]
    TlsConfig(#[source] rustls::Error),
    #[error(
        "the node API's webhooks (--authentication-token-webhook, --authorization-mode=Webhook) need the API server: pass --kubeconfig"
    )]
    NoApiServer,
    #[error("--client-ca-file {path}: {source}")]
    ClientCa {
        path: PathBuf,
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
}

/// What every handler can reach.
#[derive(Debug, Clone)]
struct AppState {
    snapshot: SnapshotHandle,
    metrics: Arc<prometheus_client::registry::Registry>,
    auth: Arc<Authenticator>,
    push: Option<PushHandle>,
    refresh: Option<Refresh>,
    statuses: StatusStore,
    runtime: Option<RuntimeReady>,
    pod_log_dir: Arc<std::path::Path>,
    log_level: LogLevel,
    info: Arc<status::Info>,
    events: crate::apiserver::Recorder,
    ebpf: crate::ebpf::Handle,
    audit: crate::audit::ManifestAudit,
    /// The container runtime (`None` in a dry run).
    runtime_slot: Option<runtime::RuntimeSlot>,
    /// Caps the exec sessions open at once ([`exec::MAX_SESSIONS`]).
    exec_sessions: Arc<tokio::sync::Semaphore>,
    /// The streaming sessions each user holds ([`streams::SESSIONS_PER_USER`]).
    stream_users: exec::Users,
    /// The bounds on streaming connections.
    streaming: streams::Limits,
    /// kubelet's stats and metrics endpoints.
    stats: stats::Endpoints,
    /// X4: the ephemeral containers `outpost debug` adds to static pods.
    debug: crate::debug_containers::DebugContainers,
}

impl FromRef<AppState> for SnapshotHandle {
    fn from_ref(state: &AppState) -> SnapshotHandle {
        state.snapshot.clone()
    }
}

/// The routes, every one behind the authentication guard and the request timeout.
fn router(state: AppState) -> Router {
    routes()
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::guard))
        .layer(axum::middleware::from_fn(serve::request_timeout))
        .with_state(state)
}

fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics))
        .route("/containerLogs/{namespace}/{pod}/{container}", get(container_logs::container_logs))
        .route("/status", get(status::status))
        .merge(log_level::routes())
        .merge(pod::routes())
        .merge(debug::routes())
        .merge(audit::routes())
        .merge(push::routes())
        .merge(exec::routes())
        .merge(stats::routes())
}

/// What the local API serves and how it authenticates.
#[derive(Debug)]
pub struct Options {
    pub listen: SocketAddr,
    pub auth: Auth,
    pub snapshot: SnapshotHandle,
    /// The push source's handle, when the push source is configured.
    pub push: Option<PushHandle>,
    /// Refreshes the manifest URL source, when one is configured.
    pub refresh: Option<Refresh>,
    /// The pods' live status from the pod workers.
    pub statuses: StatusStore,
    /// Whether containerd is connected (`None` in a dry run: no runtime to wait for).
    pub runtime: Option<RuntimeReady>,
    /// What `/metrics` renders: the agent's one registry.
    pub metrics: prometheus_client::registry::Registry,
    /// The Kubernetes Events recorder (a pod's events).
    pub events: crate::apiserver::Recorder,
    /// Where the pods' CRI log files are (`/containerLogs`).
    pub pod_log_dir: PathBuf,
    /// The agent's log filter (`/debug/log-level`).
    pub log_level: LogLevel,
    /// What `/status` reads besides the snapshot and the pod statuses.
    pub info: status::Info,
    /// The BPF side (`/pods/{namespace}/{name}/exec-audit`).
    pub ebpf: crate::ebpf::Handle,
    /// The file source's audit log (`/manifests/audit`).
    pub audit: crate::audit::ManifestAudit,
    /// The container runtime once containerd is connected (`/exec`, `/run`, and which run
    /// a container is for `/containerLogs`); `None` in a dry run.
    pub runtime_slot: Option<runtime::RuntimeSlot>,
    /// The API server's client, for the reviews of N1 (`None` without a kubeconfig).
    pub apiserver: Option<crate::apiserver::ApiClient>,
    /// What kubelet's stats and metrics endpoints read.
    pub stats: stats::Endpoints,
    /// J2: the serving certificate the cluster signed (`serverTLSBootstrap`), instead of
    /// `--tls-cert-file`.
    pub serving: Option<Arc<dyn rustls::server::ResolvesServerCert>>,
    /// X4: the ephemeral containers `outpost debug` adds to static pods.
    pub debug: crate::debug_containers::DebugContainers,
    /// The bounds on streaming connections.
    pub streaming: streams::Limits,
}

/// Reads the credentials (token file, TLS certificate, key and client CAs), binds the
/// listen address (so a bad address or file fails at start) and returns the server
/// future.
pub async fn bind(options: Options) -> Result<impl Future<Output = Result<(), Error>>, Error> {
    let authenticator =
        Authenticator::load(&options.auth, options.apiserver.clone(), &options.info.node_name)?;
    let client_ca = options.auth.client_ca_file.as_deref();
    let acceptor = match (&options.auth.tls, &options.serving) {
        (Some(files), _) => Some(tls::acceptor(files, client_ca)?),
        (None, Some(serving)) => Some(tls::acceptor_resolving(serving.clone(), client_ca)?),
        (None, None) => None,
    };
    let addr = options.listen;
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|source| Error::Bind { addr, source })?;
    let addr = listener.local_addr().unwrap_or(addr);
    let takes_tokens =
        options.auth.token_file.is_some() || options.auth.access.token_webhook.is_some();
    if takes_tokens && acceptor.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(
            %addr,
            "the local API takes bearer tokens over plain HTTP on a non-loopback address; \
             serve it over TLS (--tls-cert-file, --tls-private-key-file) or listen on loopback"
        );
    }
    if !authenticator.serves_reads() {
        tracing::warn!(
            %addr,
            "the local API serves only /healthz and /readyz: configure --token-file or \
             --client-ca-file (with TLS) for authenticated access, or --anonymous-loopback-reads \
             to let callers on this host read /pods, /containerLogs and /metrics"
        );
    }
    let tls = acceptor.is_some();
    tracing::info!(%addr, tls, "local API listening");
    let app = router(state(options, authenticator));
    Ok(async move {
        serve::serve(listener, acceptor, app).await;
        Ok(())
    })
}

/// The local API's routes over `options`, with its authentication and request timeout
/// but no listener (`options.listen` and the TLS files are not used): what [`bind`]
/// serves, for a caller that drives it in-process (the fuzz harness). Reads the token
/// file.
pub fn app(options: Options) -> Result<Router, Error> {
    let authenticator =
        Authenticator::load(&options.auth, options.apiserver.clone(), &options.info.node_name)?;
    Ok(router(state(options, authenticator)))
}

fn state(options: Options, authenticator: Authenticator) -> AppState {
    let Options {
        listen: _,
        auth: _,
        serving: _,
        snapshot,
        push,
        refresh,
        statuses,
        runtime,
        metrics,
        events,
        pod_log_dir,
        log_level,
        info,
        ebpf,
        audit,
        runtime_slot,
        apiserver: _,
        stats,
        debug,
        streaming,
    } = options;
    AppState {
        snapshot,
        metrics: Arc::new(metrics),
        auth: Arc::new(authenticator),
        push,
        refresh,
        statuses,
        runtime,
        pod_log_dir: Arc::from(pod_log_dir),
        log_level,
        info: Arc::new(info),
        events,
        ebpf,
        audit,
        runtime_slot,
        exec_sessions: Arc::new(tokio::sync::Semaphore::new(exec::MAX_SESSIONS)),
        stream_users: exec::Users::default(),
        streaming,
        stats,
        debug,
    }
}

/// An error answer, the same shape on every state-changing endpoint:
/// `{"error": "<what went wrong and what to do>", "details": ["<key>:L:C: ...", ...]}`.
#[derive(Debug)]
pub struct Problem {
    status: StatusCode,
    error: String,
    details: Vec<String>,
}

impl Problem {
    fn new(status: StatusCode, error: impl Into<String>) -> Problem {
        Problem { status, error: error.into(), details: Vec::new() }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        #[derive(Serialize)]
        struct Body {
            error: String,
            details: Vec<String>,
        }
        let mut response =
            (self.status, axum::Json(Body { error: self.error, details: self.details }))
                .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"outpost\""),
            );
        }
        response
    }
}

/// Prometheus metrics (OpenMetrics text).
async fn metrics(State(state): State<AppState>) -> Response {
    match crate::metrics::render(&state.metrics) {
        Ok(text) => ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
