//! `POST /pods/{namespace}/{name}/ephemeralcontainers` (X4, what `outpost debug` sends):
//! adds an ephemeral container (a `v1 EphemeralContainer`, JSON) to a static pod, which
//! the API server will not change. It needs write credentials ([`Authorized`]), is
//! checked as kube-apiserver checks an addition, and is recorded in the manifest audit.
//! An API pod is the API server's to change: `kubectl debug` adds to it.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::core::v1::EphemeralContainer;
use k8s_openapi::jiff::Timestamp;
use outpost_core::pod::FullName;

use super::auth::{Authorized, Peer};
use super::{AppState, Problem};
use crate::audit::{self, Action, Entry, ManifestSource, Writer};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/pods/{namespace}/{name}/ephemeralcontainers", post(add))
}

async fn add(
    Authorized(by): Authorized,
    peer: Option<Extension<Peer>>,
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, Problem> {
    let shown = format!("{namespace}/{name}");
    let Some((source, pod)) = super::pod::desired(&state, &namespace, &name) else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            format!("pod {shown} not found on this node"),
        ));
    };
    let Some(manifest) = ManifestSource::of(source) else {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            format!(
                "pod {shown} comes from the API server, which keeps its ephemeral containers: \
                 use kubectl debug -it -n {namespace} {name} --image IMAGE"
            ),
        ));
    };
    let value: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            format!("the body is not a JSON EphemeralContainer: {e}"),
        )
    })?;
    let mut current = k8s_openapi::api::core::v1::Pod::clone(&pod);
    state.debug.apply(&mut current);
    let problems = outpost_core::ephemeral::addition_problems(&current, &value);
    if !problems.is_empty() {
        let mut problem = Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("pod {shown}: the ephemeral container is not valid; nothing changed"),
        );
        problem.details = problems;
        return Err(problem);
    }
    let container: EphemeralContainer = serde_json::from_value(value).map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            format!("the body is not a JSON EphemeralContainer: {e}"),
        )
    })?;
    let summary = describe(&container);
    state.debug.add(&current, container.clone()).map_err(|e| {
        Problem::new(StatusCode::INTERNAL_SERVER_ERROR, crate::error_chain::describe(&e))
    })?;
    let remote = peer.map_or_else(|| "?".to_owned(), |Extension(p)| p.remote.to_string());
    let writer = format!("POST from {remote} with {}: {summary}", super::push::credential(by));
    tracing::info!(
        pod.namespace = %namespace, pod.name = %name, pod.uid = %outpost_core::pod::uid(&pod),
        container = %container.name, writer = %writer,
        "ephemeral container added to a static pod (X4)"
    );
    state.audit.record(Entry {
        time: Timestamp::now().to_string(),
        source: manifest,
        file: FullName::of(&pod).to_string(),
        path: format!("/pods/{namespace}/{name}/ephemeralcontainers"),
        action: Action::Debugged,
        cause: audit::Cause::Debug,
        pods: vec![shown],
        sha256: None,
        error: None,
        writer: Writer::remote(&writer),
    });
    Ok((StatusCode::CREATED, axum::Json(container)).into_response())
}

/// `ephemeral container debugger-x (busybox), target app`.
fn describe(container: &EphemeralContainer) -> String {
    let image = container.image.as_deref().unwrap_or_default();
    let mut text = format!("ephemeral container {} ({image})", container.name);
    if let Some(target) = container.target_container_name.as_deref().filter(|t| !t.is_empty()) {
        text.push_str(&format!(", target {target}"));
    }
    text
}
