//! `GET /status`: the agent at a glance, for `outpost status`: the node, the version and
//! uptime, each pod source, the API server, the runtime, the manifest watcher and pod
//! counts. [`AgentStatus`] is the answer's shape, shared by the server and the CLI.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::AppState;
use crate::apiserver::Health;
use crate::podconfig::SourceState;
use crate::source::problems::ManifestProblem;

/// What `GET /status` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    pub node_name: String,
    pub version: String,
    /// When the agent started.
    pub started: Timestamp,
    /// When this answer was made (the CLI computes ages against it, not its own clock).
    pub now: Timestamp,
    /// What `/readyz` says: every source seen, and the runtime connected.
    pub ready: bool,
    /// Configured pod sources, in configuration order.
    pub sources: Vec<SourceStatus>,
    pub api_server: ApiServerStatus,
    /// `None` in a dry run: no runtime.
    pub runtime: Option<RuntimeStatus>,
    /// The manifest directory's watcher backend (`fanotify` or `inotify`).
    pub watcher: String,
    pub pods: PodCounts,
    /// J2: the node's certificates the agent manages (none without rotation or
    /// bootstrapping).
    #[serde(default)]
    pub certificates: Vec<CertificateInfo>,
}

/// J2: one of the node's certificates, as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateInfo {
    /// `client`.
    pub name: String,
    pub not_after: Option<Timestamp>,
    /// When it is renewed, with rotation.
    pub rotation_deadline: Option<Timestamp>,
    /// `valid`, `expiring-soon` (inside 7 days: a warning), `expired` or `none`.
    pub state: String,
    /// What keeps it from being renewed, if anything.
    pub problem: Option<String>,
}

impl CertificateInfo {
    /// `status` of the certificate `name` at `now`.
    pub fn of(
        name: &str,
        status: &crate::certificates::CertificateStatus,
        now: std::time::SystemTime,
    ) -> CertificateInfo {
        use outpost_core::certificates::Expiry;
        let time = |t: Option<std::time::SystemTime>| t.and_then(|t| Timestamp::try_from(t).ok());
        CertificateInfo {
            name: name.to_owned(),
            not_after: time(status.not_after),
            rotation_deadline: time(status.rotation_deadline),
            state: match status.expiry(now) {
                None => "none",
                Some(Expiry::Valid) => "valid",
                Some(Expiry::ExpiringSoon) => "expiring-soon",
                Some(Expiry::Expired) => "expired",
            }
            .to_owned(),
            problem: status.problem.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    /// `file`, `url`, `push` or `api`.
    pub name: String,
    pub state: SourceState,
    pub last_error: Option<String>,
    pub last_success: Option<Timestamp>,
    /// The manifests the source rejects or warns about now, each with its first
    /// problem (they do not make the agent unready).
    #[serde(default)]
    pub problems: Vec<ManifestProblem>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServerStatus {
    /// Whether a kubeconfig is given.
    pub configured: bool,
    pub reachable: bool,
    /// Pod status updates waiting to be sent (offline, or backing off after an error).
    pub queued_status_updates: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStatus {
    pub connected: bool,
    pub socket: PathBuf,
    /// The containerd namespace of the agent's images and containers.
    pub namespace: String,
    /// Whether the agent runs containerd itself (else it is the system's).
    pub managed: bool,
}

/// Desired pods by what they are doing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCounts {
    pub total: usize,
    pub pending: usize,
    pub running: usize,
    pub succeeded: usize,
    pub failed: usize,
    /// Pods in phase Failed, or with a container waiting for a reason other than being
    /// created (CrashLoopBackOff, ErrImagePull, ...) or terminated with an error.
    pub failing: usize,
}

impl PodCounts {
    /// Counts `statuses` (pods without one are pending).
    pub fn of<'a>(statuses: impl IntoIterator<Item = Option<&'a PodStatus>>) -> PodCounts {
        let mut counts = PodCounts::default();
        for status in statuses {
            counts.total += 1;
            match status.and_then(|s| s.phase.as_deref()) {
                Some("Running") => counts.running += 1,
                Some("Succeeded") => counts.succeeded += 1,
                Some("Failed") => counts.failed += 1,
                _ => counts.pending += 1,
            }
            if status.is_some_and(failing) {
                counts.failing += 1;
            }
        }
        counts
    }
}

/// Waiting reasons that are steps of a normal start, not failures.
const STARTING: [&str; 2] = ["ContainerCreating", "PodInitializing"];

fn failing(status: &PodStatus) -> bool {
    if status.phase.as_deref() == Some("Failed") {
        return true;
    }
    let containers = status.init_container_statuses.iter().chain(&status.container_statuses);
    containers.flatten().any(|c| {
        let Some(state) = &c.state else { return false };
        let waiting = state.waiting.as_ref().and_then(|w| w.reason.as_deref());
        let error_exit = state.terminated.as_ref().is_some_and(|t| t.exit_code != 0);
        waiting.is_some_and(|r| !STARTING.contains(&r)) || error_exit
    })
}

/// What `/status` knows besides the merge's snapshot and the pod statuses.
#[derive(Debug, Clone)]
pub struct Info {
    pub node_name: String,
    pub started: Timestamp,
    pub watcher: String,
    /// `None` in a dry run.
    pub runtime: Option<RuntimeInfo>,
    /// The sync to the API server, when a kubeconfig is given.
    pub sync: Option<Health>,
    /// J2: the certificates the agent manages, by name (`client`).
    pub certificates: Vec<(String, crate::certificates::Status)>,
}

/// Where the runtime is (its connection state is read live).
#[derive(Debug, Clone)]
pub struct RuntimeInfo {
    pub socket: PathBuf,
    pub namespace: String,
    pub managed: bool,
}

impl RuntimeInfo {
    /// Where the containerd at `placement`, configured by `config`, is.
    pub fn of(
        placement: &crate::containerd::Placement,
        config: &crate::containerd::Config,
    ) -> Self {
        RuntimeInfo {
            socket: placement.socket(config),
            namespace: config.namespace.clone(),
            managed: placement.is_managed(),
        }
    }
}

pub(super) async fn status(State(state): State<AppState>) -> Response {
    let snap = state.snapshot.load();
    let info = &state.info;
    let connected = state.runtime.as_ref().is_none_or(|r| r.load(Ordering::Relaxed));
    let statuses: Vec<_> = snap
        .pods
        .iter()
        .map(|(_, pod)| live_status(&state, pod).or_else(|| pod.status.clone().map(Arc::new)))
        .collect();
    let answer = AgentStatus {
        node_name: info.node_name.clone(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        started: info.started,
        now: Timestamp::now(),
        ready: snap.synced() && connected,
        sources: snap
            .sources
            .iter()
            .map(|s| SourceStatus {
                name: s.source.as_str().to_owned(),
                state: s.state,
                last_error: s.last_error.clone(),
                last_success: s.last_success,
                problems: s.problems.clone(),
            })
            .collect(),
        api_server: match &info.sync {
            Some(health) => ApiServerStatus {
                configured: true,
                reachable: health.connectivity.is_reachable(),
                queued_status_updates: health.status_backlog.borrow().queued,
            },
            None => ApiServerStatus::default(),
        },
        runtime: info.runtime.as_ref().map(|r| RuntimeStatus {
            connected,
            socket: r.socket.clone(),
            namespace: r.namespace.clone(),
            managed: r.managed,
        }),
        watcher: info.watcher.clone(),
        pods: PodCounts::of(statuses.iter().map(|s| s.as_deref())),
        certificates: info
            .certificates
            .iter()
            .map(|(name, status)| {
                // Judged as the certificate manager judges it: by the API server's time.
                let now = crate::apiserver::server_time::trusted_now();
                CertificateInfo::of(name, &status.borrow(), now)
            })
            .collect(),
    };
    ([(header::CONTENT_TYPE, "application/json")], axum::Json(answer)).into_response()
}

fn live_status(state: &AppState, pod: &Pod) -> Option<Arc<PodStatus>> {
    state.statuses.get(outpost_core::pod::uid(pod))
}

#[cfg(test)]
mod tests;
