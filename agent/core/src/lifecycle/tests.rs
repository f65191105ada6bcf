use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use proptest::prelude::*;

use super::*;

fn pod(policy: Option<&str>, grace: Option<i64>, deletion_grace: Option<i64>) -> Pod {
    let mut pod = Pod {
        spec: Some(PodSpec {
            restart_policy: policy.map(str::to_owned),
            termination_grace_period_seconds: grace,
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    pod.metadata.deletion_grace_period_seconds = deletion_grace;
    pod
}

#[test]
fn restart_policy_defaults_to_always_and_decides_by_exit_code() {
    assert_eq!(RestartPolicy::of(&pod(None, None, None)), RestartPolicy::Always);
    assert_eq!(RestartPolicy::of(&Pod::default()), RestartPolicy::Always);
    let cases = [
        ("Always", 0, true),
        ("Always", 1, true),
        ("OnFailure", 0, false),
        ("OnFailure", 137, true),
        ("OnFailure", -1, true),
        ("Never", 0, false),
        ("Never", 2, false),
    ];
    for (policy, code, restarts) in cases {
        let p = RestartPolicy::of(&pod(Some(policy), None, None));
        assert_eq!(p.restarts(code), restarts, "{policy} after exit {code}");
    }
}

#[test]
fn grace_period_is_the_shorter_of_spec_and_deletion_defaulting_to_30s() {
    let secs = Duration::from_secs;
    assert_eq!(grace_period(&pod(None, None, None)), secs(30));
    assert_eq!(grace_period(&pod(None, Some(5), None)), secs(5));
    assert_eq!(grace_period(&pod(None, None, Some(7)),), secs(7));
    assert_eq!(grace_period(&pod(None, Some(60), Some(2))), secs(2));
    assert_eq!(grace_period(&pod(None, Some(1), Some(20))), secs(1));
    assert_eq!(grace_period(&pod(None, Some(0), None)), secs(0));
    assert_eq!(grace_period(&pod(None, Some(-3), None)), secs(0), "negative is no grace");
}

#[test]
fn pull_policy_defaults_by_tag() {
    let c = |image: &str, policy: Option<&str>| Container {
        image: Some(image.to_owned()),
        image_pull_policy: policy.map(str::to_owned),
        ..Container::default()
    };
    let cases = [
        ("busybox", None, PullPolicy::Always),
        ("busybox:latest", None, PullPolicy::Always),
        ("localhost:5000/busybox", None, PullPolicy::Always),
        ("localhost:5000/busybox:1.36", None, PullPolicy::IfNotPresent),
        ("busybox:1.36", None, PullPolicy::IfNotPresent),
        ("busybox@sha256:abcd", None, PullPolicy::IfNotPresent),
        ("busybox:latest", Some("IfNotPresent"), PullPolicy::IfNotPresent),
        ("busybox:1", Some("Always"), PullPolicy::Always),
        ("busybox:1", Some("Never"), PullPolicy::Never),
    ];
    for (image, policy, expected) in cases {
        assert_eq!(PullPolicy::of(&c(image, policy)), expected, "{image} {policy:?}");
    }
}

#[test]
fn v4_image_volume_pull_policy_defaults_by_tag_as_the_api_server_does() {
    let v = |reference: &str, policy: Option<&str>| ImageVolumeSource {
        reference: Some(reference.to_owned()),
        pull_policy: policy.map(str::to_owned),
    };
    let cases = [
        ("outpost.test/model", None, PullPolicy::Always),
        ("outpost.test/model:latest", None, PullPolicy::Always),
        ("localhost:5000/model", None, PullPolicy::Always),
        ("localhost:5000/model:v1", None, PullPolicy::IfNotPresent),
        ("model@sha256:abcd", None, PullPolicy::IfNotPresent),
        ("model:latest", Some("IfNotPresent"), PullPolicy::IfNotPresent),
        ("model:v1", Some("Always"), PullPolicy::Always),
        ("model:v1", Some("Never"), PullPolicy::Never),
        ("model:v1", Some(""), PullPolicy::IfNotPresent),
    ];
    for (reference, policy, expected) in cases {
        let got = PullPolicy::of_image_volume(&v(reference, policy));
        assert_eq!(got, expected, "{reference} {policy:?}");
    }
    let empty = ImageVolumeSource::default();
    assert_eq!(PullPolicy::of_image_volume(&empty), PullPolicy::Always, "no reference: untagged");
}

#[test]
fn crash_loop_doubles_to_the_cap_and_resets_after_a_long_run() {
    let mut b = CrashLoop::new(CrashLoopConfig::default());
    let short = Duration::from_secs(1);
    let waits: Vec<u64> = (0..12).map(|_| b.after_exit(short).as_secs()).collect();
    assert_eq!(waits, [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    assert_eq!(b.after_exit(Duration::from_secs(600)), Duration::ZERO, "ran 10 min");
    assert_eq!(b.after_exit(short), Duration::from_secs(1));
}

proptest! {
    #[test]
    fn crash_loop_stays_within_bounds(
        initial_ms in 1u64..5_000, max_ms in 1u64..400_000,
        runs in prop::collection::vec(0u64..1_200, 1..40),
    ) {
        let config = CrashLoopConfig {
            initial: Duration::from_millis(initial_ms),
            max: Duration::from_millis(max_ms),
            reset_after: Duration::from_secs(600),
        };
        let floor = config.initial.min(config.max);
        let mut b = CrashLoop::new(config);
        let mut previous: Option<Duration> = None;
        for ran in runs {
            let ran = Duration::from_secs(ran);
            let wait = b.after_exit(ran);
            prop_assert!(wait <= config.max);
            match previous {
                _ if ran >= config.reset_after => prop_assert_eq!(wait, Duration::ZERO),
                None => prop_assert_eq!(wait, Duration::ZERO, "the first restart is immediate"),
                Some(p) if p.is_zero() => prop_assert_eq!(wait, floor),
                Some(p) => prop_assert!(wait == config.max || wait == p * 2, "doubles: {p:?} → {wait:?}"),
            }
            previous = Some(wait);
        }
    }
}

#[test]
fn phase_follows_kubelet() {
    use ContainerPhase::{Restarting, Waiting};
    use RestartPolicy::{Always, Never, OnFailure};
    const RUN: ContainerPhase = ContainerPhase::Running;
    let (pending, running) = (Phase::Pending, Phase::Running);
    let (succeeded, failed) = (Phase::Succeeded, Phase::Failed);
    let cases: &[(RestartPolicy, &[Option<i32>], Phase)] = &[
        (Always, &[], pending),
        (Always, &[Some(0)], running),
        (OnFailure, &[Some(0)], succeeded),
        (OnFailure, &[Some(0), Some(0)], succeeded),
        (OnFailure, &[Some(0), Some(3)], running),
        (Never, &[Some(0)], succeeded),
        (Never, &[Some(1)], failed),
        (Never, &[Some(0), Some(2)], failed),
        (Never, &[None, Some(2)], running),
    ];
    for (policy, containers, phase) in cases {
        let containers: Vec<ContainerPhase> =
            containers.iter().map(|c| c.map_or(RUN, |code| exited(*policy, code))).collect();
        assert_eq!(pod_phase(&containers), *phase, "{policy:?} {containers:?}");
    }
    assert_eq!(pod_phase(&[Waiting]), pending);
    assert_eq!(pod_phase(&[RUN, Waiting]), pending);
    assert_eq!(pod_phase(&[RUN]), running);
    assert_eq!(pod_phase(&[Restarting]), running);
    assert_eq!(pod_phase(&[exited(Never, 0), Restarting]), running);
}

/// I4: a container's own policy and rules decide whether its exit keeps the pod running.
#[test]
fn i4_phase_counts_what_each_container_would_restart() {
    let exited = |exit_code, restarts| ContainerPhase::Exited { exit_code, restarts };
    // Under restartPolicy: Always, a container with its own Never that exited 0: done.
    assert_eq!(pod_phase(&[exited(0, false)]), Phase::Succeeded);
    assert_eq!(pod_phase(&[exited(1, false), exited(0, false)]), Phase::Failed);
    // Under Never, a container whose rule restarts exit code 42.
    assert_eq!(pod_phase(&[exited(42, true)]), Phase::Running);
    assert_eq!(pod_phase(&[exited(42, true), exited(1, false)]), Phase::Running);
}

fn exited(policy: RestartPolicy, exit_code: i32) -> ContainerPhase {
    ContainerPhase::Exited { exit_code, restarts: policy.restarts(exit_code) }
}

/// kubelet's `getPhase` before container restart rules: by the pod's policy alone.
fn phase_by_pod_policy(policy: RestartPolicy, containers: &[ContainerPhase]) -> Phase {
    let waiting = containers.contains(&ContainerPhase::Waiting);
    if waiting || containers.is_empty() {
        return Phase::Pending;
    }
    if containers.contains(&ContainerPhase::Running) {
        return Phase::Running;
    }
    let all_succeeded =
        containers.iter().all(|c| matches!(c, ContainerPhase::Exited { exit_code: 0, .. }));
    match policy {
        RestartPolicy::Always => Phase::Running,
        _ if all_succeeded => Phase::Succeeded,
        RestartPolicy::Never => Phase::Failed,
        RestartPolicy::OnFailure => Phase::Running,
    }
}

fn restart_policy() -> impl Strategy<Value = RestartPolicy> {
    prop_oneof![
        Just(RestartPolicy::Always),
        Just(RestartPolicy::OnFailure),
        Just(RestartPolicy::Never)
    ]
}

proptest! {
    /// I4: without container policies, the phase is what the pod's policy alone made it.
    #[test]
    fn i4_without_container_policies_the_phase_is_the_pod_policys(
        policy in restart_policy(),
        containers in prop::collection::vec((0u8..4, -2i32..3), 0..5),
    ) {
        let containers: Vec<ContainerPhase> = containers
            .into_iter()
            .map(|(kind, code)| match kind {
                0 => ContainerPhase::Waiting,
                1 => ContainerPhase::Running,
                // Restarting only where the pod's policy restarts anything.
                2 if policy != RestartPolicy::Never => ContainerPhase::Restarting,
                _ => exited(policy, code),
            })
            .collect();
        prop_assert_eq!(pod_phase(&containers), phase_by_pod_policy(policy, &containers));
    }
}
