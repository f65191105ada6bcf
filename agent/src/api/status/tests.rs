use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, PodStatus,
};

use super::PodCounts;

fn status(phase: &str, states: &[ContainerState]) -> PodStatus {
    PodStatus {
        phase: Some(phase.to_owned()),
        container_statuses: Some(
            states
                .iter()
                .map(|s| ContainerStatus { state: Some(s.clone()), ..ContainerStatus::default() })
                .collect(),
        ),
        ..PodStatus::default()
    }
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_owned()),
            ..ContainerStateWaiting::default()
        }),
        ..ContainerState::default()
    }
}

fn exited(code: i32) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

#[test]
fn pods_are_counted_by_phase_and_failing() {
    let pods = [
        Some(status("Running", &[ContainerState::default()])),
        Some(status("Running", &[waiting("CrashLoopBackOff")])),
        Some(status("Pending", &[waiting("ContainerCreating")])),
        Some(status("Pending", &[waiting("ErrImagePull")])),
        Some(status("Succeeded", &[exited(0)])),
        Some(status("Failed", &[exited(0)])),
        Some(status("Running", &[exited(2)])),
        None,
    ];
    let counts = PodCounts::of(pods.iter().map(Option::as_ref));
    assert_eq!(
        counts,
        PodCounts { total: 8, pending: 3, running: 3, succeeded: 1, failed: 1, failing: 4 }
    );
}

#[test]
fn an_init_container_failing_makes_the_pod_failing() {
    let mut pending = status("Pending", &[waiting("PodInitializing")]);
    pending.init_container_statuses = Some(vec![ContainerStatus {
        state: Some(waiting("CrashLoopBackOff")),
        ..ContainerStatus::default()
    }]);
    assert_eq!(PodCounts::of([Some(&pending)]).failing, 1);
    pending.init_container_statuses = None;
    assert_eq!(PodCounts::of([Some(&pending)]).failing, 0, "PodInitializing is a normal step");
}
