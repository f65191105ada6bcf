//! API objects an API pod refers to, through the pod worker's step (V1): a change writes
//! the volumes again; what waits for the objects goes on at once, not at its backoff.

use super::*;
use crate::pod_worker::objects::{FIRST_ANSWER, SERVICES_NOT_READ};

fn volumes_not_ready(message: &str) -> Input {
    Input::SandboxFailed(SandboxProblem {
        reason: SandboxReason::VolumesNotReady,
        message: message.into(),
    })
}

const NOT_FOUND: &str =
    "MountVolume.SetUp failed for volume \"config\" : configmap \"app\" not found";

#[test]
fn v1_a_missing_object_is_a_failed_mount_retried_as_soon_as_it_comes() {
    let mut d = Driver::new();
    d.step(web().input());
    assert_eq!(
        shown(&d.step(volumes_not_ready(NOT_FOUND))),
        [format!("Event Warning FailedMount -: {NOT_FOUND}")],
        "kubelet's reason, the runtime's message as it is"
    );
    let waiting = d.waiting("c");
    assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
    assert_eq!(waiting.message.as_deref(), Some(NOT_FOUND));
    assert!(d.wake_in().unwrap() > Duration::ZERO, "backs off");
    // The object comes: the set-up goes on now, not at the backoff's end.
    assert_eq!(shown(&d.step(Input::ObjectsChanged(Answers::ALL))), ["SetUpSandbox u1"]);
}

#[test]
fn v1_a_change_writes_a_ready_sandboxs_volumes_again() {
    let mut d = Driver::new();
    d.drive(web().input());
    assert_eq!(d.phase(), "Running");
    assert_eq!(shown(&d.step(Input::ObjectsChanged(Answers::ALL))), ["RefreshVolumes u1"]);
}

#[test]
fn v1_a_change_during_the_set_up_is_written_once_the_sandbox_is_ready() {
    let mut d = Driver::new();
    assert_eq!(shown(&d.step(web().input())), ["TrackPod u1", "SetUpSandbox u1"]);
    assert!(d.step(Input::ObjectsChanged(Answers::ALL)).is_empty(), "not while the set-up runs");
    let ready = shown(&d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: true }));
    assert_eq!(ready, ["RefreshVolumes u1", "StartContainer u1/c rc=0"]);
    // Once only.
    d.step(d.started("c", "c-1"));
    assert!(shown(&d.step(Input::Tick)).is_empty());
}

#[test]
fn v1_a_container_waiting_for_its_env_is_retried_when_an_object_changes() {
    let mut d = starting(&web());
    let message = "configmap \"app\" not found";
    // The first retry is at once (the crash loop's first delay is nothing); the second waits.
    for _ in 0..2 {
        d.step(start_failed(WaitingReason::CreateContainerConfigError, message));
    }
    assert_eq!(d.waiting("c").reason.as_deref(), Some("CreateContainerConfigError"));
    assert!(d.wake_in().unwrap() > Duration::ZERO);
    let actions = shown(&d.step(Input::ObjectsChanged(Answers::ALL)));
    assert_eq!(actions, ["RefreshVolumes u1", "StartContainer u1/c rc=0"]);
}

#[test]
fn v1_new_labels_are_written_to_the_downward_api_volumes() {
    let mut d = Driver::new();
    let p = web();
    d.drive(p.input());
    let mut relabelled = p.clone();
    relabelled.0.metadata.labels = Some([("tier".to_owned(), "web".to_owned())].into());
    assert_eq!(shown(&d.step(relabelled.input())), ["RefreshVolumes u1"]);
    assert!(shown(&d.step(relabelled.input())).is_empty(), "only when they change");
}

#[test]
fn v1_objects_changing_for_no_pod_do_nothing() {
    let mut d = Driver::new();
    assert!(d.step(Input::ObjectsChanged(Answers::ALL)).is_empty());
    assert!(d.w.is_done());
}

// The wait for the first answers (`pod_worker::objects`), on the driver's clock.

/// `p` as the dispatcher hands it over with `answers`.
fn answered(p: &P, answers: Answers) -> Input {
    Input::Desired(Some(Desired {
        source: Source::Api,
        pod: Arc::new(p.0.clone()),
        rejected: None,
        answers,
        resize_pending: None,
    }))
}

const OBJECTS_MISSING: Answers = Answers { objects: false, services: true, reachable: true };
const SERVICES_MISSING: Answers = Answers { objects: true, services: false, reachable: true };

#[test]
fn v1_the_sandbox_waits_for_its_objects_and_goes_on_as_they_come() {
    let mut d = Driver::new();
    assert_eq!(shown(&d.step(answered(&web(), OBJECTS_MISSING))), ["TrackPod u1"]);
    assert_eq!(d.wake_in(), Some(FIRST_ANSWER), "woken when the wait ends");
    d.pass(secs(2));
    assert!(shown(&d.step(Input::Tick)).is_empty(), "still waiting");
    assert_eq!(shown(&d.step(Input::ObjectsChanged(Answers::ALL))), ["SetUpSandbox u1"]);
}

#[test]
fn v1_after_the_wait_the_sandbox_is_set_up_with_what_is_known() {
    let mut d = Driver::new();
    d.step(answered(&web(), OBJECTS_MISSING));
    d.set_time(FIRST_ANSWER);
    assert_eq!(shown(&d.step(Input::Tick)), ["SetUpSandbox u1"]);
}

#[test]
fn v1_offline_nothing_waits_for_answers_that_cannot_come() {
    let mut d = Driver::new();
    let offline = Answers { reachable: false, ..OBJECTS_MISSING };
    assert_eq!(shown(&d.step(answered(&web(), offline))), ["TrackPod u1", "SetUpSandbox u1"]);
}

#[test]
fn v1_a_container_waits_for_its_objects_once_the_sandbox_is_up() {
    let mut d = Driver::new();
    d.drive(answered(&web(), Answers::ALL));
    assert_eq!(d.phase(), "Running");
    // The pod now refers to an object not answered yet, and its container restarts.
    let mut p = web();
    p.spec().restart_policy = Some("Always".into());
    d.step(answered(&p, OBJECTS_MISSING));
    d.step(d.exit("c-1", 1));
    assert!(started(&d.step(Input::Tick)).is_empty(), "held for the object's answer");
    assert_eq!(d.wake_in(), Some(FIRST_ANSWER));
    d.pass(secs(1));
    assert_eq!(started(&d.step(Input::ObjectsChanged(Answers::ALL))), ["c"]);
}

#[test]
fn k1_an_api_pods_container_is_not_started_without_its_services() {
    let mut d = Driver::new();
    d.drive(answered(&web(), SERVICES_MISSING));
    assert_eq!(starts(&d.drive(Input::Tick)), 0, "held for the Services");
    d.set_time(FIRST_ANSWER);
    let actions = shown(&d.drive(Input::Tick));
    assert_eq!(
        actions,
        [format!("Event Warning Failed c: Error: {}", SERVICES_NOT_READ)],
        "kubelet's event, decided here: no start reaches the runtime"
    );
    let waiting = d.waiting("c");
    assert_eq!(waiting.reason.as_deref(), Some("CreateContainerConfigError"));
    assert_eq!(waiting.message.as_deref(), Some(SERVICES_NOT_READ));
    // They are read: the container starts now, not at its backoff's end.
    d.pass(secs(1));
    assert_eq!(started(&d.drive(Input::ObjectsChanged(Answers::ALL))), ["c"]);
    assert_eq!(d.phase(), "Running");
}
