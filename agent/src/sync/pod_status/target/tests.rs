use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodCondition;
use serde_json::json;

use super::*;
use crate::apiserver::MirrorPod;

fn pod(name: &str, uid: &str, extra: serde_json::Value) -> Arc<Pod> {
    let mut value = json!({
        "metadata": { "name": name, "namespace": "default", "uid": uid,
                      "creationTimestamp": "2025-01-01T00:00:00Z" },
        "spec": { "containers": [{ "name": "c", "image": "i" }] },
    });
    merge(&mut value, extra);
    Arc::new(serde_json::from_value(value).unwrap())
}

fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
    match (into, from) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

fn status(phase: &str) -> Arc<PodStatus> {
    Arc::new(PodStatus { phase: Some(phase.into()), ..PodStatus::default() })
}

fn now() -> Timestamp {
    "2025-06-01T00:00:00Z".parse().unwrap()
}

#[test]
fn api_pods_get_the_runtime_status_by_their_uid() {
    let pods = vec![
        (Source::Api, pod("a", "ua", json!({}))),
        (
            Source::Api,
            pod("b", "ub", json!({ "metadata": { "creationTimestamp": "2024-01-01T00:00:00Z" } })),
        ),
    ];
    let statuses = HashMap::from([("ua".to_owned(), status("Running"))]);
    let mut seen = LastSeen::new();
    let found = targets(&pods, &statuses, None, &mut seen, now());
    assert_eq!(found.list.len(), 1, "b does not run yet: nothing to report");
    let a = &found.list[0];
    assert_eq!((a.uid.as_str(), a.name.as_str(), a.finish), ("ua", "a", false));
    assert_eq!(a.created, "2025-01-01T00:00:00Z".parse().unwrap());
    assert_eq!(a.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    assert!(seen.contains_key("ua"));
    assert_eq!(found.deadline, None);
}

#[test]
fn a_deleted_pod_gets_its_final_status_once_the_worker_dropped_it() {
    let deleting = json!({ "metadata": { "deletionTimestamp": "2025-06-01T00:00:30Z" } });
    let pods = vec![(Source::Api, pod("a", "ua", deleting))];
    let mut seen = LastSeen::new();
    // Still running while it stops: the runtime's status, not finished.
    let running = HashMap::from([("ua".to_owned(), status("Running"))]);
    let found = targets(&pods, &running, None, &mut seen, now());
    assert!(!found.list[0].finish);
    // Stopped and dropped: the final status, made from the last one seen.
    let found = targets(&pods, &HashMap::new(), None, &mut seen, now());
    let a = &found.list[0];
    assert!(a.finish);
    assert_eq!(a.status.as_ref().unwrap().phase.as_deref(), Some("Failed"));
    // The same on the next pass (nothing new to send).
    let again = targets(&pods, &HashMap::new(), None, &mut seen, now());
    assert_eq!(again.list, found.list);
    // Gone from the desired pods: forgotten.
    targets(&[], &HashMap::new(), None, &mut seen, now());
    assert!(seen.is_empty());
}

#[test]
fn a_deleted_pod_that_never_ran_here_is_finished_after_its_grace_period() {
    let deleting = json!({ "metadata": { "deletionTimestamp": "2025-06-01T00:00:30Z" } });
    let pods = vec![(Source::Api, pod("a", "ua", deleting))];
    let mut seen = LastSeen::new();
    let found = targets(&pods, &HashMap::new(), None, &mut seen, now());
    assert!(found.list.is_empty());
    assert_eq!(found.deadline, Some("2025-06-01T00:00:30Z".parse().unwrap()));
    let later = "2025-06-01T00:00:31Z".parse().unwrap();
    let found = targets(&pods, &HashMap::new(), None, &mut seen, later);
    assert_eq!((found.list[0].finish, found.list[0].status.is_none()), (true, true));
}

#[test]
fn a_static_pod_writes_to_its_current_mirror() {
    let annotations = json!({ "metadata": { "annotations": {
        "kubernetes.io/config.hash": "h1",
        "kubernetes.io/config.seen": "2025-03-01T00:00:00Z",
    } } });
    let static_pod = pod("s", "h1", annotations);
    let pods = vec![(Source::File, static_pod)];
    let statuses = HashMap::from([("h1".to_owned(), status("Running"))]);
    let mut seen = LastSeen::new();
    let mirror = |hash: &str, deleting: bool| {
        let mut extra =
            json!({ "metadata": { "annotations": { "kubernetes.io/config.mirror": hash } } });
        if deleting {
            extra["metadata"]["deletionTimestamp"] = json!("2025-06-01T00:00:00Z");
        }
        let mut mirror = pod("s", "mirror-uid", extra);
        Arc::make_mut(&mut mirror).status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "example.com/gate".into(),
                status: "True".into(),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        });
        let view: Mirrors =
            Arc::new(BTreeMap::from([(FullName::of(&mirror), MirrorPod::of(&mirror).unwrap())]));
        view
    };
    // No mirror (or no list yet): nothing.
    assert!(targets(&pods, &statuses, None, &mut seen, now()).list.is_empty());
    let found = targets(&pods, &statuses, Some(&mirror("h1", false)), &mut seen, now());
    let t = &found.list[0];
    assert_eq!(t.uid, "mirror-uid");
    assert_eq!(t.created, "2025-03-01T00:00:00Z".parse().unwrap());
    let status = t.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.conditions.as_ref().unwrap()[0].type_, "example.com/gate");
    // A stale or deleting mirror is not written to.
    assert!(
        targets(&pods, &statuses, Some(&mirror("old", false)), &mut seen, now()).list.is_empty()
    );
    assert!(targets(&pods, &statuses, Some(&mirror("h1", true)), &mut seen, now()).list.is_empty());
}
