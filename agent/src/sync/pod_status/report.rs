//! The status sent for a pod (pure): the runtime's status with the conditions others
//! own kept, a deleted pod's final status, and the patch that carries it.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

/// The runtime's status, plus the conditions of the API object's status whose type it
/// does not report (readiness gates, `DisruptionTarget`: other controllers own them),
/// as kubelet's status manager merges them.
pub fn merged(ours: &PodStatus, api: Option<&PodStatus>) -> PodStatus {
    let mut status = ours.clone();
    let foreign = api
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| !ours.conditions.iter().flatten().any(|o| o.type_ == c.type_));
    let foreign: Vec<PodCondition> = foreign.cloned().collect();
    if !foreign.is_empty() {
        status.conditions.get_or_insert_with(Vec::new).extend(foreign);
    }
    status
}

/// The final status of a deleted API pod whose containers the worker stopped and
/// removed: kubelet's terminal status for a deleted pod. A container not already
/// terminated is reported as kubelet reports a container it cannot find once the pod
/// is deleted (`ContainerStatusUnknown`, exit code 137); the phase is `Succeeded` if
/// every container ended with 0, else `Failed`; the pod and its containers are not
/// ready (`PodCompleted`).
pub fn terminal(last: &PodStatus, now: Timestamp) -> PodStatus {
    let mut status = last.clone();
    let mut succeeded = status.container_statuses.as_ref().is_some_and(|c| !c.is_empty());
    for container in status.container_statuses.iter_mut().flatten() {
        let state = container.state.get_or_insert_with(ContainerState::default);
        if state.terminated.is_none() {
            let was = if state.running.is_some() { "Running" } else { "Waiting" };
            *state = ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    reason: Some("ContainerStatusUnknown".to_owned()),
                    message: Some(format!(
                        "The container could not be located when the pod was deleted.  \
                         The container used to be {was}"
                    )),
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            };
        }
        succeeded &= state.terminated.as_ref().is_some_and(|t| t.exit_code == 0);
        container.ready = false;
        container.started = Some(false);
    }
    let phase = if succeeded { "Succeeded" } else { "Failed" };
    if !matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        status.phase = Some(phase.to_owned());
    }
    for condition in status.conditions.iter_mut().flatten() {
        if matches!(condition.type_.as_str(), "Ready" | "ContainersReady") {
            if condition.status != "False" {
                condition.last_transition_time = Some(Time(now));
            }
            condition.status = "False".to_owned();
            condition.reason = Some("PodCompleted".to_owned());
            condition.message = None;
        }
    }
    status
}

/// The JSON merge patch of `pods/{name}/status` from `previous` (what was last sent, if
/// known) to `status`: the object's UID as a precondition (kubelet's
/// `statusutil.PatchPodStatus`: a replaced pod answers 409 Conflict), every status
/// field that changed (a list whole: merge patches replace lists) and `null` for the
/// fields this agent sent before and no longer reports.
pub fn patch(uid: &str, previous: Option<&PodStatus>, status: &PodStatus) -> Value {
    let fields = |s: Option<&PodStatus>| match s.map(serde_json::to_value) {
        Some(Ok(Value::Object(map))) => map,
        _ => Map::new(),
    };
    let before = fields(previous);
    let after = fields(Some(status));
    let mut diff = Map::new();
    for (key, value) in &after {
        if before.get(key) != Some(value) {
            diff.insert(key.clone(), value.clone());
        }
    }
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        diff.insert(key.clone(), Value::Null);
    }
    json!({ "metadata": { "uid": uid }, "status": diff })
}

#[cfg(test)]
mod tests;
