//! The local HTTP API: kubelet-style read endpoints, and the push source under
//! `/manifests` and `POST /refresh`, which change state and need authentication.
//! Handlers read the merge's lock-free snapshot; none of them can block the merge.
//!
//! - `auth`: bearer token and client certificate checks.
//! - `pod`: one pod and its events (`/pods/{namespace}/{name}[/events]`).
//! - `push`: the `/manifests` and `/refresh` handlers.
//! - `status`: `/status`, the agent at a glance (`outpost status`).
//! - `tls`: serving over TLS (optionally verifying client certificates).

mod auth;
mod pod;
mod push;
pub mod status;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde::Serialize;

use self::auth::Authenticator;
use crate::config::Auth;
use crate::podconfig::{SnapshotHandle, SourceState};
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
    #[error("local API server on {addr} failed: {source}")]
    Serve {
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
    #[error("{flag} {path}: {reason}")]
    Tls { flag: &'static str, path: PathBuf, reason: String },
    #[error("cannot set up TLS for the local API: {0}")]
    TlsConfig(#[source] rustls::Error),
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
    info: Arc<status::Info>,
    events: crate::sync::Recorder,
}

impl FromRef<AppState> for SnapshotHandle {
    fn from_ref(state: &AppState) -> SnapshotHandle {
        state.snapshot.clone()
    }
}

/// The routes.
fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/pods", get(pods))
        .route("/metrics", get(metrics))
        .route("/status", get(status::status))
        .merge(pod::routes())
        .merge(push::routes())
        .with_state(state)
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
    /// What `/metrics` reads besides the merge's snapshot.
    pub metrics: crate::metrics::Sources,
    /// What `/status` reads besides the snapshot and the pod statuses.
    pub info: status::Info,
}

/// Reads the credentials (token file, TLS certificate, key and client CAs), binds the
/// listen address (so a bad address or file fails at start) and returns the server
/// future.
pub async fn bind(options: Options) -> Result<impl Future<Output = Result<(), Error>>, Error> {
    let Options { listen: addr, auth, snapshot, push, refresh, statuses, runtime, metrics, info } =
        options;
    let authenticator = Authenticator::load(&auth)?;
    let acceptor = match &auth.tls {
        Some(files) => Some(tls::acceptor(files, auth.client_ca_file.as_deref())?),
        None => None,
    };
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|source| Error::Bind { addr, source })?;
    let addr = listener.local_addr().unwrap_or(addr);
    if auth.token_file.is_some() && acceptor.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(
            %addr,
            "the local API takes bearer tokens over plain HTTP on a non-loopback address; \
             serve it over TLS (--tls-cert-file, --tls-private-key-file) or listen on loopback"
        );
    }
    let tls = acceptor.is_some();
    tracing::info!(%addr, tls, "local API listening");
    let events = metrics.events.clone();
    let metrics = Arc::new(crate::metrics::registry(snapshot.clone(), metrics));
    let app = router(AppState {
        snapshot,
        metrics,
        auth: Arc::new(authenticator),
        push,
        refresh,
        statuses,
        runtime,
        info: Arc::new(info),
        events,
    });
    Ok(async move {
        let served = match acceptor {
            Some(acceptor) => tls::serve(listener, acceptor, app).await,
            None => axum::serve(listener, app).await,
        };
        served.map_err(|source| Error::Serve { addr, source })
    })
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

async fn healthz() -> &'static str {
    "ok"
}

/// Ready once every configured source has delivered its first SET, live or from its
/// checkpoint (M9), and containerd has answered. One line per check says which, and a
/// source's latest failure.
async fn readyz(State(state): State<AppState>) -> Response {
    let snap = state.snapshot.load();
    let mut body = String::new();
    for health in &snap.sources {
        let (mark, text) = match health.state {
            SourceState::Live => ("+", "live"),
            SourceState::Checkpoint => ("+", "from checkpoint"),
            SourceState::NeverSeen => ("-", "never seen"),
        };
        body.push_str(&format!("[{mark}]source-{} {text}", health.source));
        if let Some(error) = &health.last_error {
            body.push_str(&format!(" (failing: {error})"));
        }
        body.push('\n');
    }
    let runtime =
        state.runtime.as_ref().is_none_or(|r| r.load(std::sync::atomic::Ordering::Relaxed));
    if state.runtime.is_some() {
        body.push_str(if runtime {
            "[+]runtime containerd connected\n"
        } else {
            "[-]runtime containerd not connected\n"
        });
    }
    let status = if snap.synced() && runtime {
        body.push_str("readyz check passed\n");
        StatusCode::OK
    } else {
        body.push_str("readyz check failed\n");
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}

/// Prometheus metrics (OpenMetrics text).
async fn metrics(State(state): State<AppState>) -> Response {
    match crate::metrics::render(&state.metrics) {
        Ok(text) => ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// kubelet's `/pods`: a `v1 PodList` of the desired pods, with the status the pod
/// workers report (the source's own status until a worker has one).
async fn pods(State(state): State<AppState>) -> Response {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct PodList {
        kind: &'static str,
        api_version: &'static str,
        metadata: serde_json::Map<String, serde_json::Value>,
        items: Vec<Arc<Pod>>,
    }
    let snap = state.snapshot.load();
    let items = snap
        .pods
        .iter()
        .map(|(_, pod)| match state.statuses.get(outpost_core::pod::uid(pod)) {
            Some(status) => {
                let mut pod = Pod::clone(pod);
                pod.status = Some(PodStatus::clone(&status));
                Arc::new(pod)
            }
            None => pod.clone(),
        })
        .collect();
    let list =
        PodList { kind: "PodList", api_version: "v1", metadata: serde_json::Map::new(), items };
    match serde_json::to_vec(&list) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
