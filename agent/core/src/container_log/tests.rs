use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PodStatus,
};

use super::{Unavailable, choose, named_instances};

fn terminated(id: &str) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            container_id: Some(id.to_owned()),
            exit_code: 1,
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

fn running() -> ContainerState {
    ContainerState { running: Some(ContainerStateRunning::default()), ..ContainerState::default() }
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting { reason: Some(reason.to_owned()), message: None }),
        ..ContainerState::default()
    }
}

fn status(
    id: Option<&str>,
    state: Option<ContainerState>,
    last: Option<ContainerState>,
) -> PodStatus {
    PodStatus {
        container_statuses: Some(vec![ContainerStatus {
            name: "c".to_owned(),
            container_id: id.map(str::to_owned),
            state,
            last_state: last,
            ..ContainerStatus::default()
        }]),
        ..PodStatus::default()
    }
}

fn chosen(status: &PodStatus, previous: bool) -> Result<String, Unavailable> {
    choose(status, "ns/p", "c", previous)
}

#[test]
fn previous_is_the_last_termination_the_status_names() {
    // A crash loop: waiting in back-off, the run that just ended is lastState.
    let looping =
        status(None, Some(waiting("CrashLoopBackOff")), Some(terminated("containerd://r2")));
    assert_eq!(chosen(&looping, true).unwrap(), "r2");
    // Running again: the run before this one.
    let again =
        status(Some("containerd://r3"), Some(running()), Some(terminated("containerd://r2")));
    assert_eq!(chosen(&again, true).unwrap(), "r2");
}

#[test]
fn previous_without_a_last_termination_is_kubelets_error() {
    let first = status(Some("containerd://r0"), Some(running()), None);
    assert_eq!(
        chosen(&first, true).unwrap_err().to_string(),
        "previous terminated container \"c\" in pod \"ns/p\" not found"
    );
    let empty_id = status(Some("containerd://r0"), Some(running()), Some(terminated("")));
    assert!(matches!(chosen(&empty_id, true), Err(Unavailable::NoPrevious { .. })));
}

#[test]
fn current_is_the_running_instance() {
    let again =
        status(Some("containerd://r3"), Some(running()), Some(terminated("containerd://r2")));
    assert_eq!(chosen(&again, false).unwrap(), "r3");
}

#[test]
fn current_of_a_container_in_back_off_is_the_run_that_ended() {
    let looping =
        status(None, Some(waiting("CrashLoopBackOff")), Some(terminated("containerd://r2")));
    assert_eq!(chosen(&looping, false).unwrap(), "r2");
}

#[test]
fn current_of_a_terminated_container_is_its_run_or_else_the_last() {
    let done = status(Some("containerd://r1"), Some(terminated("containerd://r1")), None);
    assert_eq!(chosen(&done, false).unwrap(), "r1");
    let next_did_not_start =
        status(None, Some(terminated("")), Some(terminated("containerd://r0")));
    assert_eq!(chosen(&next_did_not_start, false).unwrap(), "r0");
    let nothing = status(None, Some(terminated("")), None);
    assert!(matches!(chosen(&nothing, false), Err(Unavailable::Terminated { .. })));
}

#[test]
fn a_waiting_container_says_why_as_kubelet_does() {
    let pull = status(None, Some(waiting("ErrImagePull")), None);
    assert_eq!(
        chosen(&pull, false).unwrap_err().to_string(),
        "container \"c\" in pod \"ns/p\" is waiting to start: image can't be pulled"
    );
    let backoff = status(None, Some(waiting("ImagePullBackOff")), None);
    assert!(
        chosen(&backoff, false)
            .unwrap_err()
            .to_string()
            .ends_with("trying and failing to pull image")
    );
    let creating = status(None, Some(waiting("ContainerCreating")), None);
    assert!(
        chosen(&creating, false)
            .unwrap_err()
            .to_string()
            .ends_with("waiting to start: ContainerCreating")
    );
    let none = status(None, None, None);
    assert!(matches!(chosen(&none, false), Err(Unavailable::NoState { .. })));
}

#[test]
fn init_and_unknown_containers() {
    let init = PodStatus {
        init_container_statuses: status(Some("containerd://i1"), Some(running()), None)
            .container_statuses,
        ..PodStatus::default()
    };
    assert_eq!(chosen(&init, false).unwrap(), "i1");
    assert!(matches!(choose(&init, "ns/p", "other", false), Err(Unavailable::NoStatus { .. })));
}

#[test]
fn named_instances_are_current_terminated_and_last() {
    let again =
        status(Some("containerd://r3"), Some(running()), Some(terminated("containerd://r2")));
    assert_eq!(named_instances(&again).collect::<Vec<_>>(), ["r3", "r2"]);
    let looping =
        status(None, Some(waiting("CrashLoopBackOff")), Some(terminated("containerd://r2")));
    assert_eq!(named_instances(&looping).collect::<Vec<_>>(), ["r2"]);
    let done =
        status(Some("containerd://r1"), Some(terminated("containerd://r1")), Some(terminated("")));
    assert_eq!(named_instances(&done).collect::<Vec<_>>(), ["r1", "r1"]);
}
