use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use serde_json::json;

use super::*;

fn pod(uid: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-edge-1", "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}
    }))
    .unwrap()
}

fn debugger(name: &str) -> EphemeralContainer {
    EphemeralContainer {
        name: name.to_owned(),
        image: Some("busybox".to_owned()),
        target_container_name: Some("app".to_owned()),
        ..EphemeralContainer::default()
    }
}

fn names(pod: &Pod) -> Vec<String> {
    outpost_core::ephemeral::all(pod).map(|c| c.name.clone()).collect()
}

#[tokio::test]
async fn x4_added_containers_are_applied_recorded_and_found_again_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let debug = DebugContainers::new(dir.path().to_path_buf());
    let web = pod("u1");
    debug.add(&web, debugger("debugger-1")).unwrap();
    debug.add(&web, debugger("debugger-2")).unwrap();
    assert_eq!(debug.added().await, vec![FullName::of(&web), FullName::of(&web)]);
    let mut desired = web.clone();
    debug.apply(&mut desired);
    assert_eq!(names(&desired), ["debugger-1", "debugger-2"]);
    // Applied twice (a SET of the same manifest), each is there once.
    debug.apply(&mut desired);
    assert_eq!(names(&desired), ["debugger-1", "debugger-2"]);
    // Another pod, or the same name with a new UID (a changed manifest), has none.
    let mut other = pod("u2");
    debug.apply(&mut other);
    assert!(names(&other).is_empty());
    // A new agent reads them back from the pod's directory.
    let restarted = DebugContainers::new(dir.path().to_path_buf());
    let mut again = web.clone();
    restarted.apply(&mut again);
    assert_eq!(names(&again), ["debugger-1", "debugger-2"]);
    assert!(dir.path().join("u1").join(FILE).is_file());
    // Forgotten with the pod.
    debug.forget("u1");
    std::fs::remove_dir_all(dir.path().join("u1")).unwrap();
    let mut gone = web.clone();
    debug.apply(&mut gone);
    assert!(names(&gone).is_empty());
}

#[test]
fn x4_a_file_that_is_not_valid_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("u1")).unwrap();
    std::fs::write(dir.path().join("u1").join(FILE), b"not json").unwrap();
    let debug = DebugContainers::new(dir.path().to_path_buf());
    assert!(debug.containers("u1").is_empty());
}
