//! K4 through the dispatcher: new pods are admitted in creation-time order against the
//! node and the active admitted pods; a rejected pod is Failed and never started;
//! adopted pods are not admitted again; a critical static pod preempts an API pod.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use outpost_core::node_admission::Node;
use serde_json::json;

use super::*;
use crate::worker::fake::shared_on;

fn node(cpu_milli: i64, pods: i64) -> Node {
    Node {
        name: "edge-1".into(),
        labels: BTreeMap::from([("kubernetes.io/os".into(), "linux".into())]),
        taints: Vec::new(),
        allocatable: BTreeMap::from([("cpu".into(), cpu_milli), ("pods".into(), pods)]),
    }
}

/// `named(name, uid)` created at `second`, requesting `cpu`.
fn created(name: &str, uid: &str, second: i64, cpu: &str) -> Pod {
    let mut p = named(name, uid);
    p.metadata.creation_timestamp = Some(Time(Timestamp::from_second(second).unwrap()));
    let requests = json!({"requests": {"cpu": cpu}});
    p.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(requests).unwrap());
    p
}

fn api(p: &Pod) -> PodDelta {
    PodDelta { op: DeltaOp::Add, source: Source::Api, pod: Arc::new(p.clone()) }
}

fn reason(d: &Dispatcher, uid: &str) -> Option<String> {
    d.shared.statuses.get(uid).and_then(|s| s.reason.clone())
}

#[tokio::test(start_paused = true)]
async fn k4_pods_of_a_batch_are_admitted_oldest_first_and_the_rest_rejected() {
    let d = Dispatcher::start_with(shared_on(node(4000, 1)), vec![]).await;
    let newer = created("newer", "u-new", 2000, "100m");
    let older = created("older", "u-old", 1000, "100m");
    d.batch(vec![api(&newer), api(&older)], true).await;
    let calls = d.calls();
    assert!(calls.contains(&"set_up_sandbox u-old".to_owned()), "{calls:?}");
    assert!(!calls.contains(&"set_up_sandbox u-new".to_owned()), "{calls:?}");
    assert_eq!(d.phase("u-new").as_deref(), Some("Failed"));
    assert_eq!(reason(&d, "u-new").as_deref(), Some("OutOfpods"));
    let message = d.shared.statuses.get("u-new").unwrap().message.clone().unwrap();
    assert_eq!(
        message,
        "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"
    );
    // An update of the rejected pod keeps it rejected.
    d.batch(vec![PodDelta { op: DeltaOp::Update, ..api(&newer) }], true).await;
    assert!(!d.calls().iter().any(|c| c.contains("u-new")));
    assert_eq!(reason(&d, "u-new").as_deref(), Some("OutOfpods"));
    // Once the older pod is gone, a new pod fits again.
    d.batch(vec![PodDelta { op: DeltaOp::Remove, ..api(&older) }], true).await;
    d.calls();
    d.batch(vec![api(&created("third", "u-3", 3000, "100m"))], true).await;
    assert!(d.calls().contains(&"set_up_sandbox u-3".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn k4_a_pod_running_before_a_restart_is_adopted_not_rejected() {
    let p = created("web", "u1", 1000, "8");
    let found = vec![(full_name("web"), found_running("old-c", "u1", &first_container(&p), 0))];
    let d = Dispatcher::start_with(shared_on(node(1000, 110)), found).await;
    d.batch(vec![api(&p)], true).await;
    assert_eq!(d.calls(), ["remove_orphans but u1", "set_up_sandbox u1"]);
    assert_eq!(d.phase("u1").as_deref(), Some("Running"));
}

#[tokio::test(start_paused = true)]
async fn k4_a_critical_static_pod_preempts_an_api_pod() {
    let d = Dispatcher::start_with(shared_on(node(1000, 110)), vec![]).await;
    let low = created("low", "u-low", 1000, "800m");
    d.batch(vec![api(&low)], true).await;
    assert_eq!(d.phase("u-low").as_deref(), Some("Running"));
    d.calls();
    // A static pod (Source::File) is critical: the API pod makes room for it.
    d.batch(vec![add(&created("static", "u-static", 2000, "500m"))], true).await;
    let calls = d.calls();
    assert!(calls.contains(&"kill c1 TERM".to_owned()), "{calls:?}");
    assert!(calls.contains(&"set_up_sandbox u-static".to_owned()), "{calls:?}");
    assert_eq!(d.phase("u-low").as_deref(), Some("Failed"));
    assert_eq!(reason(&d, "u-low").as_deref(), Some("Preempting"));
    assert_eq!(d.phase("u-static").as_deref(), Some("Running"));
}

#[tokio::test(start_paused = true)]
async fn k4_adopted_pods_take_their_place_before_new_ones_are_admitted() {
    let running = created("running", "u-run", 2000, "100m");
    let found = vec![(
        full_name("running"),
        found_running("old-c", "u-run", &first_container(&running), 0),
    )];
    let d = Dispatcher::start_with(shared_on(node(4000, 1)), found).await;
    // Older, but new to the node: it comes after the pod that was running.
    let pending = created("pending", "u-pend", 1000, "100m");
    d.batch(vec![api(&pending), api(&running)], true).await;
    assert_eq!(d.phase("u-run").as_deref(), Some("Running"));
    assert_eq!(reason(&d, "u-pend").as_deref(), Some("OutOfpods"));
}
