//! kubectl's way of summing up a pod on one line (`kubectl get pods`): READY, STATUS
//! (the reason a container waits or ended, else the phase), RESTARTS and AGE, and the
//! aligned table they are printed in. Pure: every function takes the time it compares
//! against.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};
use k8s_openapi::jiff::Timestamp;
use outpost_core::pod::{CONFIG_SEEN, CONFIG_SOURCE};

/// One row of `outpost pods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRow {
    pub namespace: String,
    pub name: String,
    /// `ready/total`, e.g. `1/2`.
    pub ready: String,
    pub status: String,
    /// The count, and how long ago the last restart ended: `3 (5m ago)`.
    pub restarts: String,
    pub age: String,
    pub ip: String,
    pub node: String,
    /// `file`, `url`, `push` or `api` (the `kubernetes.io/config.source` annotation).
    pub source: String,
}

/// The row kubectl would print for `pod` at `now`.
pub fn pod_row(pod: &Pod, now: Timestamp) -> PodRow {
    let summary = summarize(pod);
    let restarts = match summary.last_restart {
        Some(at) if summary.restarts > 0 => {
            format!("{} ({} ago)", summary.restarts, human_duration(now.duration_since(at)))
        }
        _ => summary.restarts.to_string(),
    };
    let meta = &pod.metadata;
    let status = pod.status.as_ref();
    PodRow {
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".to_owned()),
        name: meta.name.clone().unwrap_or_default(),
        ready: format!("{}/{}", summary.ready, summary.total),
        status: summary.reason,
        restarts,
        age: created(pod).map_or_else(|| "<unknown>".to_owned(), |t| age(t, now)),
        ip: status.and_then(|s| s.pod_ip.clone()).unwrap_or_else(|| "<none>".to_owned()),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_else(none),
        source: annotation(pod, CONFIG_SOURCE).unwrap_or("<none>").to_owned(),
    }
}

fn none() -> String {
    "<none>".to_owned()
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// When the pod came to be: its creationTimestamp; for a static pod, which has none, when
/// the agent first saw it (`kubernetes.io/config.seen`), else when it started.
pub fn created(pod: &Pod) -> Option<Timestamp> {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| annotation(pod, CONFIG_SEEN)?.parse().ok())
        .or_else(|| pod.status.as_ref()?.start_time.as_ref().map(|t| t.0))
}

/// How long ago `then` was, kubectl's way (`5s`, `3m`, `2d4h`).
pub fn age(then: Timestamp, now: Timestamp) -> String {
    human_duration(now.duration_since(then))
}

/// What STATUS, READY and RESTARTS are computed from, in one pass over the containers.
#[derive(Debug)]
struct Summary {
    reason: String,
    ready: usize,
    total: usize,
    restarts: i64,
    last_restart: Option<Timestamp>,
}

/// kubectl's `printPod`: init containers first (the first that has not completed gives
/// `Init:<reason>` or `Init:N/M`), then the containers from last to first (the last
/// waiting or terminated reason found wins, so the first container's shows), then
/// `Terminating` over everything once the pod is being deleted.
fn summarize(pod: &Pod) -> Summary {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let init_specs = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or_default();
    let sidecar =
        |name: &str| init_specs.iter().any(|c| c.name == name && outpost_core::pod::is_sidecar(c));
    let containers = spec.map_or(0, |s| s.containers.len());
    let mut summary = Summary {
        reason: status
            .and_then(|s| s.reason.clone().filter(|r| !r.is_empty()).or_else(|| s.phase.clone()))
            .unwrap_or_else(|| "Pending".to_owned()),
        ready: 0,
        total: containers + init_specs.iter().filter(|c| sidecar(&c.name)).count(),
        restarts: 0,
        last_restart: None,
    };
    let mut sidecar_restarts = 0;
    let mut sidecar_last = None;
    let mut initializing = false;
    let inits = status.and_then(|s| s.init_container_statuses.as_deref()).unwrap_or_default();
    for (i, c) in inits.iter().enumerate() {
        summary.restarts += i64::from(c.restart_count);
        let finished = last_finished(c);
        summary.last_restart = later(summary.last_restart, finished);
        let state = c.state.as_ref();
        let terminated = state.and_then(|s| s.terminated.as_ref());
        let waiting = state.and_then(|s| s.waiting.as_ref());
        if sidecar(&c.name) {
            sidecar_restarts += i64::from(c.restart_count);
            sidecar_last = later(sidecar_last, finished);
            if c.started == Some(true) && state.is_some_and(|s| s.running.is_some()) {
                if c.ready {
                    summary.ready += 1;
                }
                continue;
            }
        }
        summary.reason = match (terminated, waiting.and_then(|w| w.reason.as_deref())) {
            (Some(t), _) if t.exit_code == 0 => continue,
            (Some(t), _) => match t.reason.as_deref() {
                Some(reason) if !reason.is_empty() => format!("Init:{reason}"),
                _ if t.signal.is_some_and(|s| s != 0) => {
                    format!("Init:Signal:{}", t.signal.unwrap_or_default())
                }
                _ => format!("Init:ExitCode:{}", t.exit_code),
            },
            (None, Some(reason)) if !reason.is_empty() && reason != "PodInitializing" => {
                format!("Init:{reason}")
            }
            _ => format!("Init:{i}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }
    if !initializing || condition_true(conditions, "Initialized") {
        summary.restarts = sidecar_restarts;
        summary.last_restart = sidecar_last;
        let mut running = false;
        let statuses = status.and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
        for c in statuses.iter().rev() {
            summary.restarts += i64::from(c.restart_count);
            summary.last_restart = later(summary.last_restart, last_finished(c));
            let state = c.state.as_ref();
            let waiting = state.and_then(|s| s.waiting.as_ref());
            let terminated = state.and_then(|s| s.terminated.as_ref());
            if let Some(reason) = waiting.and_then(|w| w.reason.clone()).filter(|r| !r.is_empty()) {
                summary.reason = reason;
            } else if let Some(t) = terminated {
                summary.reason = match t.reason.clone().filter(|r| !r.is_empty()) {
                    Some(reason) => reason,
                    None if t.signal.is_some_and(|s| s != 0) => {
                        format!("Signal:{}", t.signal.unwrap_or_default())
                    }
                    None => format!("ExitCode:{}", t.exit_code),
                };
            } else if c.ready && state.is_some_and(|s| s.running.is_some()) {
                running = true;
                summary.ready += 1;
            }
        }
        // A container still running keeps a pod whose others completed from "Completed".
        if summary.reason == "Completed" && running {
            summary.reason =
                if condition_true(conditions, "Ready") { "Running" } else { "NotReady" }.to_owned();
        }
    }
    if pod.metadata.deletion_timestamp.is_some() {
        summary.reason = if status.and_then(|s| s.reason.as_deref()) == Some("NodeLost") {
            "Unknown".to_owned()
        } else {
            "Terminating".to_owned()
        };
    }
    summary
}

fn last_finished(c: &ContainerStatus) -> Option<Timestamp> {
    let last = c.last_state.as_ref()?.terminated.as_ref()?;
    last.finished_at.as_ref().map(|t| t.0)
}

fn later(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    a.max(b)
}

fn condition_true(conditions: &[PodCondition], kind: &str) -> bool {
    conditions.iter().any(|c| c.type_ == kind && c.status == "True")
}

/// kubectl's `HumanDuration`: two significant units at most, coarser as it grows
/// (`45s`, `2m5s`, `15m`, `3h20m`, `30h`, `3d4h`, `120d`, `2y30d`, `9y`).
pub fn human_duration(d: k8s_openapi::jiff::SignedDuration) -> String {
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let years = hours / 24 / 365;
        return match (hours / 24) % 365 {
            0 => format!("{years}y"),
            days => format!("{years}y{days}d"),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Rows as kubectl prints them: each column as wide as its widest cell, three spaces
/// apart, no trailing spaces.
pub fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + 3;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
