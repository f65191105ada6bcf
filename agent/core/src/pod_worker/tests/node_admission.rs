//! K4 through the pod worker's step: a pod the node rejected is Failed with kubelet's
//! reason and `Pod was rejected: <message>` and nothing of it runs; a preempted pod
//! stops within its own grace period, Failed with `Preempting`.

use super::*;
use crate::node_admission::{PREEMPTED_CONDITION_MESSAGE, PREEMPTED_MESSAGE, Rejection};

fn rejected(p: &P) -> Input {
    let rejected = Rejection {
        reason: "OutOfcpu".into(),
        message: "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"
            .into(),
    };
    Input::Desired(Some(Desired {
        source: Source::Api,
        pod: Arc::new(p.0.clone()),
        rejected: Some(rejected),
        answers: Answers::ALL,
        resize_pending: None,
    }))
}

#[test]
fn k4_a_rejected_pod_is_failed_and_never_runs() {
    let mut d = Driver::new();
    let actions = shown(&d.drive(rejected(&web())));
    assert!(started(&d.drive(Input::Tick)).is_empty());
    assert!(actions.is_empty(), "the dispatcher sends the Event: {actions:?}");
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("OutOfcpu"));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"
        )
    );
    // An update of the same pod keeps it rejected.
    assert!(started(&d.drive(rejected(&web()))).is_empty());
    assert_eq!(d.phase(), "Failed");
}

#[test]
fn k4_a_preempted_pod_stops_and_fails_with_kubelets_reason() {
    let mut d = Driver::new();
    d.run(&web().grace(5).policy("Always"));
    let actions = d.drive(Input::Preempt { uid: "u1".into() });
    let listed = shown(&actions);
    assert!(
        listed.contains(&format!("Event Warning Preempting -: {PREEMPTED_MESSAGE}")),
        "{listed:?}"
    );
    assert_eq!(signalled(&actions), ["Term c-1"]);
    assert_eq!(d.wake_in(), Some(secs(5)), "the pod's own grace period");
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Preempting"));
    assert_eq!(status.message.as_deref(), Some(PREEMPTED_MESSAGE));
    let disruption = d.condition("DisruptionTarget");
    assert_eq!(disruption.reason.as_deref(), Some("TerminationByKubelet"));
    assert_eq!(disruption.message.as_deref(), Some(PREEMPTED_CONDITION_MESSAGE));
    let after = d.drive(d.exit("c-1", 143));
    assert!(started(&after).is_empty(), "restartPolicy Always does not bring it back");
}
