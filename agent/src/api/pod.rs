//! The pods, as kubelet and the API server serve them: `GET /pods` (kubelet's `v1 PodList`
//! of the desired pods with their live status), `GET /pods/{namespace}/{name}` (one `v1 Pod`) and `GET /pods/{namespace}/{name}/events` (the
//! Events the agent recorded about it, a `v1 EventList`, oldest first as
//! `kubectl describe` lists them). They work offline: events are kept in memory with or
//! without an API server. An unknown pod is a 404 `metav1.Status`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::{Event, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusDetails};
use outpost_core::pod::Source;
use serde::Serialize;

use super::AppState;

/// The routes of this module.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/pods", get(pods))
        .route("/pods/{namespace}/{name}", get(pod))
        .route("/pods/{namespace}/{name}/events", get(events))
        .route("/pods/{namespace}/{name}/exec-audit", get(exec_audit))
}

/// Every desired pod, with the status the pod workers report (the source's own until a
/// worker has one).
async fn pods(State(state): State<AppState>) -> Response {
    let snap = state.snapshot.load();
    // `k8s_openapi::List` would need owned pods: this serializes the shared ones as they are.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct PodList {
        kind: &'static str,
        api_version: &'static str,
        metadata: serde_json::Map<String, serde_json::Value>,
        items: Vec<Arc<Pod>>,
    }
    let items = snap
        .pods
        .iter()
        .map(|(source, pod)| with_live_status(&debugged(*source, pod, &state), &state.statuses))
        .collect();
    let list =
        PodList { kind: "PodList", api_version: "v1", metadata: serde_json::Map::new(), items };
    json(StatusCode::OK, &list)
}

async fn pod(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    match find(&state, &namespace, &name) {
        Some(pod) => json(StatusCode::OK, &*pod),
        None => not_found(&name),
    }
}

async fn events(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let Some(pod) = find(&state, &namespace, &name) else { return not_found(&name) };
    let uid = outpost_core::pod::uid(&pod);
    let mut items: Vec<Event> = state
        .events
        .recent(usize::MAX)
        .into_iter()
        .filter(|(key, _)| {
            let object = &key.object;
            object.kind == "Pod"
                && object.namespace == namespace
                && object.name == name
                && (object.uid.is_empty() || object.uid == uid)
        })
        .map(|(key, series)| crate::apiserver::events::event(&key, &series, &state.info.node_name))
        .collect();
    items.sort_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
    json(StatusCode::OK, &k8s_openapi::List { items, metadata: Default::default() })
}

/// The pod's exec audit log (eBPF): what ran in its containers and how it ended, oldest
/// first. 503 when the BPF programs are not loaded.
async fn exec_audit(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let Some(pod) = find(&state, &namespace, &name) else { return not_found(&name) };
    if !state.ebpf.is_loaded() {
        let status = Status {
            status: Some("Failure".to_owned()),
            message: Some(
                "eBPF is not loaded on this node (--ebpf=false, or BPF is unavailable: see the agent's log), so there is no exec audit".to_owned(),
            ),
            reason: Some("ServiceUnavailable".to_owned()),
            code: Some(503),
            ..Status::default()
        };
        return json(StatusCode::SERVICE_UNAVAILABLE, &status);
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ExecAudit<'a> {
        namespace: &'a str,
        name: &'a str,
        uid: &'a str,
        items: Vec<crate::ebpf::audit::Entry>,
    }
    let uid = outpost_core::pod::uid(&pod);
    let items = state.ebpf.audit(uid);
    json(StatusCode::OK, &ExecAudit { namespace: &namespace, name: &name, uid, items })
}

/// The desired pod `namespace/name`, with the status its worker reports (the source's
/// own until a worker has one).
pub(super) fn find(state: &AppState, namespace: &str, name: &str) -> Option<Arc<Pod>> {
    let (source, pod) = desired(state, namespace, name)?;
    Some(with_live_status(&debugged(source, &pod, state), &state.statuses))
}

/// The desired pod `namespace/name` as the merge has it, and its source.
pub(super) fn desired(state: &AppState, namespace: &str, name: &str) -> Option<(Source, Arc<Pod>)> {
    let snap = state.snapshot.load();
    snap.pods
        .iter()
        .find(|(_, pod)| {
            pod.metadata.namespace.as_deref().unwrap_or("default") == namespace
                && pod.metadata.name.as_deref() == Some(name)
        })
        .cloned()
}

/// X4: a static pod with the ephemeral containers `outpost debug` added to it.
fn debugged(source: Source, pod: &Arc<Pod>, state: &AppState) -> Arc<Pod> {
    match source {
        Source::Api => pod.clone(),
        _ => state.debug.applied(pod.clone()),
    }
}

/// `pod` with the status its worker last reported, if any.
pub(super) fn with_live_status(pod: &Arc<Pod>, statuses: &crate::status::StatusStore) -> Arc<Pod> {
    match statuses.get(outpost_core::pod::uid(pod)) {
        Some(status) => {
            let mut pod = Pod::clone(pod);
            pod.status = Some(PodStatus::clone(&status));
            Arc::new(pod)
        }
        None => pod.clone(),
    }
}

/// The API server's answer for a pod it does not have.
pub(super) fn not_found(name: &str) -> Response {
    let status = Status {
        status: Some("Failure".to_owned()),
        message: Some(format!("pods \"{name}\" not found")),
        reason: Some("NotFound".to_owned()),
        details: Some(StatusDetails {
            name: Some(name.to_owned()),
            kind: Some("pods".to_owned()),
            ..StatusDetails::default()
        }),
        code: Some(404),
        ..Status::default()
    };
    json(StatusCode::NOT_FOUND, &status)
}

fn json(code: StatusCode, body: &impl Serialize) -> Response {
    match serde_json::to_vec(body) {
        Ok(body) => (code, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
