//! The local HTTP API (kubelet-style read endpoints). Handlers read the merge's lock-free
//! snapshot; none of them can block the merge.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use crate::config::Auth;
use crate::podconfig::{SnapshotHandle, SourceState};
use crate::source::Refresh;
use crate::source::push::PushHandle;

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
}

/// The routes, over a snapshot handle.
pub fn router(snapshot: SnapshotHandle) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/pods", get(pods))
        .with_state(snapshot)
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
}

/// Binds the listen address (so a bad address fails at start) and returns the server
/// future.
pub async fn bind(options: Options) -> Result<impl Future<Output = Result<(), Error>>, Error> {
    let Options { listen: addr, snapshot, .. } = options;
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|source| Error::Bind { addr, source })?;
    let addr = listener.local_addr().unwrap_or(addr);
    tracing::info!(%addr, "local API listening");
    Ok(async move {
        axum::serve(listener, router(snapshot))
            .await
            .map_err(|source| Error::Serve { addr, source })
    })
}

async fn healthz() -> &'static str {
    "ok"
}

/// Ready once every configured source has delivered its first SET, live or from its
/// checkpoint (M9). One line per source says which, and the source's latest failure.
async fn readyz(State(snapshot): State<SnapshotHandle>) -> Response {
    let snap = snapshot.load();
    let mut body = String::new();
    for health in &snap.sources {
        let (mark, state) = match health.state {
            SourceState::Live => ("+", "live"),
            SourceState::Checkpoint => ("+", "from checkpoint"),
            SourceState::NeverSeen => ("-", "never seen"),
        };
        body.push_str(&format!("[{mark}]source-{} {state}", health.source));
        if let Some(error) = &health.last_error {
            body.push_str(&format!(" (failing: {error})"));
        }
        body.push('\n');
    }
    let status = if snap.synced() {
        body.push_str("readyz check passed\n");
        StatusCode::OK
    } else {
        body.push_str("readyz check failed\n");
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}

/// kubelet's `/pods`: a `v1 PodList` of the desired pods.
async fn pods(State(snapshot): State<SnapshotHandle>) -> Response {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct PodList<'a> {
        kind: &'static str,
        api_version: &'static str,
        metadata: serde_json::Map<String, serde_json::Value>,
        items: Vec<&'a Arc<Pod>>,
    }
    let snap = snapshot.load();
    let list = PodList {
        kind: "PodList",
        api_version: "v1",
        metadata: serde_json::Map::new(),
        items: snap.pods.iter().map(|(_, p)| p).collect(),
    };
    match serde_json::to_vec(&list) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
