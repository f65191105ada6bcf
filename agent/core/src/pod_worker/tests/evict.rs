//! Eviction (E2) through the pod worker's step: the chosen pod's containers stop within
//! the grace the eviction manager gives, nothing restarts, and the pod is Failed with
//! reason `Evicted`, kubelet's message, a Warning Event and a DisruptionTarget condition.

use super::*;

const MESSAGE: &str = "The node was low on resource: memory. Threshold quantity: 100Mi, \
                       available: 42Mi. Container c was using 400Mi, request is 0, has larger \
                       consumption of memory. ";

fn evict(uid: &str, grace: Duration) -> Input {
    Input::Evict { uid: uid.into(), message: MESSAGE.into(), grace }
}

#[test]
fn e2_an_evicted_pod_stops_within_the_given_grace_and_fails() {
    let mut d = Driver::new();
    d.run(&web().grace(30).policy("Always"));
    let actions = d.drive(evict("u1", secs(1)));
    let listed = shown(&actions);
    assert!(listed.contains(&format!("Event Warning Evicted -: {MESSAGE}")), "{listed:?}");
    assert_eq!(signalled(&actions), ["Term c-1"]);
    assert_eq!(d.wake_in(), Some(secs(1)), "the eviction's grace, not the pod's 30 s");
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    assert_eq!(status.message.as_deref(), Some(MESSAGE));
    let disruption = d.condition("DisruptionTarget");
    assert_eq!(disruption.status, "True");
    assert_eq!(disruption.reason.as_deref(), Some("TerminationByKubelet"));
    d.pass(secs(1));
    assert_eq!(signalled(&d.step(Input::Tick)), ["Kill c-1"]);
    let after = d.drive(d.exit("c-1", 137));
    assert!(started(&after).is_empty(), "restartPolicy Always does not bring it back");
    // What it filled (an emptyDir) is given back once nothing of it runs.
    assert_eq!(shown(&after).last().map(String::as_str), Some("ReleaseVolumes u1"));
    d.pass(secs(600));
    assert!(started(&d.drive(Input::Tick)).is_empty());
    assert_eq!(d.phase(), "Failed");
    assert_eq!(d.terminated("c").exit_code, 137);
}

#[test]
fn e2_an_eviction_for_another_uid_or_a_second_one_changes_nothing() {
    let mut d = Driver::new();
    d.run(&web());
    assert!(d.drive(evict("someone-else", secs(1))).is_empty());
    assert_eq!(d.phase(), "Running");
    assert_eq!(signalled(&d.drive(evict("u1", secs(1)))), ["Term c-1"]);
    assert!(shown(&d.drive(evict("u1", secs(1)))).is_empty(), "evicted once");
}

#[test]
fn e2_an_api_pod_the_server_has_as_evicted_does_not_start_again() {
    let mut p = web();
    p.0.status = Some(PodStatus {
        phase: Some("Failed".into()),
        reason: Some("Evicted".into()),
        message: Some(MESSAGE.into()),
        ..PodStatus::default()
    });
    let mut d = Driver::new();
    let actions = d.drive(p.input());
    assert!(started(&actions).is_empty(), "{:?}", shown(&actions));
    assert_eq!(d.status().reason.as_deref(), Some("Evicted"));
    assert_eq!(d.phase(), "Failed");
}
