use k8s_openapi::api::core::v1::{ContainerStateRunning, ContainerStatus};
use serde_json::json;

use super::*;

fn status(value: Value) -> PodStatus {
    serde_json::from_value(value).unwrap()
}

fn running() -> PodStatus {
    status(json!({
        "phase": "Running",
        "podIP": "10.0.0.2",
        "conditions": [
            { "type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z" },
            { "type": "ContainersReady", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z" },
            { "type": "Initialized", "status": "True" },
        ],
        "containerStatuses": [
            { "name": "done", "image": "i", "imageID": "", "ready": false, "started": false, "restartCount": 0,
              "state": { "terminated": { "exitCode": 0, "reason": "Completed" } } },
            { "name": "web", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
              "state": { "running": { "startedAt": "2025-01-01T00:00:00Z" } } },
        ],
    }))
}

#[test]
fn merged_keeps_the_conditions_others_own() {
    let api = status(json!({
        "phase": "Pending",
        "conditions": [
            { "type": "Ready", "status": "False" },
            { "type": "example.com/gate", "status": "True" },
        ],
    }));
    let both = merged(&running(), Some(&api));
    let types: Vec<_> = both.conditions.iter().flatten().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["Ready", "ContainersReady", "Initialized", "example.com/gate"]);
    assert_eq!(both.conditions.as_ref().unwrap()[0].status, "True", "ours win");
    assert_eq!(merged(&running(), None), running());
}

#[test]
fn terminal_status_of_a_deleted_pod() {
    let now: Timestamp = "2025-02-02T00:00:00Z".parse().unwrap();
    let last = terminal(&running(), now);
    assert_eq!(last.phase.as_deref(), Some("Failed"), "a container did not end with 0");
    let containers = last.container_statuses.as_ref().unwrap();
    assert_eq!(containers[0], running().container_statuses.unwrap()[0], "ended: kept");
    let gone = containers[1].state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((gone.exit_code, gone.reason.as_deref()), (137, Some("ContainerStatusUnknown")));
    assert!(gone.message.as_deref().unwrap().ends_with("used to be Running"));
    assert!(!containers[1].ready);
    for c in last.conditions.iter().flatten().filter(|c| c.type_ != "Initialized") {
        assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", Some("PodCompleted")));
        assert_eq!(c.last_transition_time, Some(Time(now)));
    }
    // Idempotent: made again from itself (later), it is the same status.
    let later: Timestamp = "2025-03-03T00:00:00Z".parse().unwrap();
    assert_eq!(terminal(&last, later), last);
}

#[test]
fn terminal_phase_is_succeeded_only_if_every_container_ended_with_zero() {
    let now = Timestamp::UNIX_EPOCH;
    let mut all_done = running();
    all_done.container_statuses.as_mut().unwrap().truncate(1);
    assert_eq!(terminal(&all_done, now).phase.as_deref(), Some("Succeeded"));
    let none = status(json!({ "phase": "Pending" }));
    assert_eq!(terminal(&none, now).phase.as_deref(), Some("Failed"));
    // An already terminal phase stays.
    let mut failed = all_done.clone();
    failed.phase = Some("Failed".into());
    assert_eq!(terminal(&failed, now).phase.as_deref(), Some("Failed"));
    // A waiting container is reported as it was.
    let mut waiting = all_done;
    waiting.container_statuses.as_mut().unwrap().push(ContainerStatus {
        name: "late".into(),
        state: Some(ContainerState::default()),
        ..ContainerStatus::default()
    });
    let made = terminal(&waiting, now);
    let late = &made.container_statuses.as_ref().unwrap()[1];
    let message = late.state.as_ref().unwrap().terminated.as_ref().unwrap().message.clone();
    assert!(message.unwrap().ends_with("used to be Waiting"));
    assert_eq!(made.phase.as_deref(), Some("Failed"));
}

#[test]
fn patch_carries_the_uid_the_changes_and_nulls_for_dropped_fields() {
    let full = patch("u1", None, &running());
    assert_eq!(full["metadata"], json!({ "uid": "u1" }));
    assert_eq!(full["status"], serde_json::to_value(running()).unwrap());

    let mut next = running();
    next.pod_ip = None;
    next.phase = Some("Failed".into());
    next.container_statuses.as_mut().unwrap()[1].state = Some(ContainerState {
        running: Some(ContainerStateRunning::default()),
        ..ContainerState::default()
    });
    let diff = patch("u1", Some(&running()), &next);
    let status = diff["status"].as_object().unwrap();
    let mut keys: Vec<_> = status.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["containerStatuses", "phase", "podIP"]);
    assert_eq!(status["podIP"], Value::Null);
    assert_eq!(status["phase"], "Failed");
    assert_eq!(status["containerStatuses"].as_array().unwrap().len(), 2, "lists whole");
    // Nothing changed: only the precondition.
    assert_eq!(patch("u1", Some(&next), &next)["status"], json!({}));
}
