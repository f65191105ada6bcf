//! kubelet's stats and metrics endpoints (N2), with kubelet's paths and shapes:
//! `/stats/summary` (the Summary API, `?only_cpu_and_memory=true`), `/metrics/resource`
//! (what metrics-server reads), `/metrics/cadvisor` (cAdvisor's series),
//! `/metrics/probes` (`prober_probe_total`), `/configz` (the effective configuration as
//! `{"kubeletconfig": {...}}`) and `/runningpods` (a PodList of the pods with running
//! containers). Each path has its own figures: `/metrics` stays the agent's own.

use std::sync::Arc;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use outpost_core::stats::{cadvisor, exposition, resource, running, summary};
use prometheus_client::registry::Registry;

use super::AppState;
use crate::stats::{Scope, Stats};

/// What these endpoints read.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    pub stats: Stats,
    /// `/metrics/probes`' registry (the pod workers' probe counters, unprefixed).
    pub probes: Arc<Registry>,
    /// `/configz`'s body.
    pub configz: Arc<serde_json::Value>,
}

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/stats/summary", get(summary))
        .route("/metrics/resource", get(metrics_resource))
        .route("/metrics/cadvisor", get(metrics_cadvisor))
        .route("/metrics/probes", get(metrics_probes))
        .route("/configz", get(configz))
        .route("/runningpods", get(running_pods))
        .route("/runningpods/", get(running_pods))
}

/// The container runtime, when connected (a summary without it lacks the writable
/// layers and the image filesystem).
fn containerd(state: &AppState) -> Option<&crate::runtime::Containerd> {
    state.runtime_slot.as_ref().and_then(|slot| slot.get()).map(|r| &r.containerd)
}

async fn summary(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let only = summary::only_cpu_and_memory(query.as_deref());
    let scope = if only { Scope::CpuAndMemory } else { Scope::All };
    let mut summary = state.stats.stats.read(containerd(&state), scope).await.summary;
    if only {
        summary = summary.cpu_and_memory();
    }
    axum::Json(summary).into_response()
}

fn text(families: &[exposition::Family]) -> Response {
    ([(header::CONTENT_TYPE, exposition::CONTENT_TYPE)], exposition::encode(families))
        .into_response()
}

async fn metrics_resource(State(state): State<AppState>) -> Response {
    let reading = state.stats.stats.read(containerd(&state), Scope::CpuAndMemory).await;
    text(&resource::families(&reading.summary, reading.failed))
}

async fn metrics_cadvisor(State(state): State<AppState>) -> Response {
    let reading = state.stats.stats.read(containerd(&state), Scope::All).await;
    text(&cadvisor::families(&reading))
}

async fn metrics_probes(State(state): State<AppState>) -> Response {
    match crate::metrics::render(&state.stats.probes) {
        Ok(text) => ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn configz(State(state): State<AppState>) -> Response {
    axum::Json(state.stats.configz.as_ref().clone()).into_response()
}

async fn running_pods(State(state): State<AppState>) -> Response {
    let snap = state.snapshot.load();
    let statuses = state.statuses.all();
    let pods = snap.pods.iter().map(|(_, pod)| pod.as_ref());
    axum::Json(running::pod_list(pods, &statuses)).into_response()
}
