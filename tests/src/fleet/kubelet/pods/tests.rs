//! B13's model pods, without IO: the statuses kubelet would report as the PLEG sees a
//! pod start, a container exit and restart, and the pod's deletion; each change is one
//! new version for the status manager, and a relist that sees nothing new makes none.

use serde_json::{Value, json};

use super::Pods;
use crate::fleet::kubelet::reflector::Store;

fn bound_pod(uid: &str, deleting: bool) -> Store {
    let mut pod = json!({
        "metadata": { "name": "web", "namespace": "default", "uid": uid },
        "spec": { "nodeName": "hollow-0001", "containers": [{ "name": "main", "image": "app:1" }] },
        "status": { "phase": "Pending", "qosClass": "BestEffort" },
    });
    if deleting {
        pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    Store::from([("default/web".to_owned(), pod)])
}

/// The pod's latest status and its version.
fn latest(pods: &Pods) -> (Value, u64) {
    let pods = pods.lock();
    let pod = &pods["default/web"];
    (pod.status.clone(), pod.version)
}

fn container(status: &Value) -> &Value {
    &status["containerStatuses"][0]
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    let conditions = status["conditions"].as_array().unwrap();
    &conditions.iter().find(|c| c["type"] == kind).unwrap()["status"]
}

#[test]
fn b13_model_pod_starts_pending_then_running_at_the_next_relist() {
    let pods = Pods::new(1);
    pods.sync(&bound_pod("u1", false));
    let (status, version) = latest(&pods);
    assert_eq!((status["phase"].as_str(), version), (Some("Pending"), 1));
    assert_eq!(container(&status)["state"]["waiting"]["reason"], "ContainerCreating");
    assert_eq!(condition(&status, "Ready"), "False");

    pods.relist();
    let (status, version) = latest(&pods);
    assert_eq!((status["phase"].as_str(), version), (Some("Running"), 2));
    assert!(container(&status)["state"]["running"]["startedAt"].is_string());
    assert_eq!(
        (&container(&status)["ready"], &container(&status)["started"]),
        (&json!(true), &json!(true))
    );
    assert_eq!(condition(&status, "Ready"), "True");
    assert_eq!(status["qosClass"], "BestEffort");

    // Nothing new: no new version, nothing to write.
    pods.relist();
    assert_eq!(latest(&pods).1, 2);
}

#[test]
fn b13_model_exit_shows_terminated_then_running_with_one_more_restart() {
    let pods = Pods::new(1);
    pods.sync(&bound_pod("u1", false));
    pods.relist();
    assert!(pods.exit("default", "web", "main", 3));
    assert!(!pods.exit("default", "web", "main", 3), "already exited");
    assert!(!pods.exit("default", "web", "other", 3));
    assert!(!pods.exit("default", "nothing", "main", 3));
    // The PLEG has not seen it yet.
    assert_eq!(latest(&pods).1, 2);

    pods.relist();
    let (status, version) = latest(&pods);
    assert_eq!(version, 3);
    assert_eq!(container(&status)["state"]["terminated"]["exitCode"], 3);
    assert_eq!(container(&status)["ready"], false);
    assert_eq!(condition(&status, "Ready"), "False");

    pods.relist();
    let (status, version) = latest(&pods);
    assert_eq!(version, 4);
    assert_eq!(container(&status)["restartCount"], 1);
    assert!(container(&status)["state"]["running"].is_object());
    assert_eq!(container(&status)["lastState"]["terminated"]["exitCode"], 3);
    assert_eq!(condition(&status, "Ready"), "True");
    assert_eq!(status["phase"], "Running");
}

#[test]
fn b13_model_deleted_pod_is_killed_and_its_status_written_before_removal() {
    let pods = Pods::new(1);
    pods.sync(&bound_pod("u1", false));
    pods.relist();
    pods.sync(&bound_pod("u1", true));
    pods.relist();
    let (status, version) = latest(&pods);
    assert_eq!(version, 3);
    assert_eq!(status["phase"], "Succeeded");
    assert_eq!(container(&status)["state"]["terminated"]["exitCode"], 0);
    assert_eq!(pods.behind().len(), 1);

    // Written, then gone from the API: forgotten.
    pods.written("default/web", "u1", 3);
    assert!(pods.behind().is_empty());
    pods.sync(&Store::new());
    assert!(pods.lock().is_empty());
}

#[test]
fn b13_model_pod_recreated_under_the_same_name_starts_anew() {
    let pods = Pods::new(1);
    pods.sync(&bound_pod("u1", false));
    pods.relist();
    pods.sync(&bound_pod("u2", false));
    let (status, version) = latest(&pods);
    assert_eq!((status["phase"].as_str(), version), (Some("Pending"), 1));
    // A write for the old uid does not count for the new pod.
    pods.written("default/web", "u1", 1);
    assert_eq!(pods.behind().len(), 1);
}
