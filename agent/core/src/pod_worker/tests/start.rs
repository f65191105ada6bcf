//! Starting a pod's containers, CrashLoopBackOff, image pulls backing off, and the sandbox.

use super::*;

#[test]
fn sets_up_the_sandbox_then_starts_every_container() {
    let mut d = Driver::new();
    let p = pod("u1", &[("a", "img:a"), ("b", "img:b")]);
    assert_eq!(shown(&d.step(p.input())), ["TrackPod u1", "SetUpSandbox u1"]);
    assert_eq!(d.wake, None, "waits for the sandbox's result");
    assert_eq!(d.phase(), "Pending");
    assert_eq!(d.waiting("a").reason.as_deref(), Some("ContainerCreating"));

    let actions = d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false });
    assert_eq!(shown(&actions), ["StartContainer u1/a rc=0", "StartContainer u1/b rc=0"]);
    let Action::StartContainer { hash, .. } = &actions[0] else { unreachable!() };
    assert_eq!(hash, &p.hash("a"), "the container's spec hash labels it");
    assert_eq!(d.waiting("a").reason.as_deref(), Some("ContainerCreating"));
    assert_eq!(d.phase(), "Pending");

    assert!(d.step(d.started("a", "a-1")).is_empty());
    assert_eq!(d.phase(), "Pending", "b still waits");
    assert!(d.step(d.started("b", "b-2")).is_empty());
    assert_eq!(d.wake, None);

    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.pod_ip.as_deref(), Some("10.0.0.7"));
    assert_eq!(status.host_ip.as_deref(), Some("192.168.1.10"));
    assert_eq!(status.start_time, Some(Time(wall0())));
    assert_eq!(d.condition("Ready").status, "True");
    assert_eq!(d.condition("ContainersReady").status, "True");
    assert_eq!(d.condition("PodReadyToStartContainers").status, "True");
    let a = d.container("a");
    assert_eq!(a.container_id.as_deref(), Some("containerd://a-1"));
    assert_eq!(a.image, "img:a");
    assert_eq!(a.image_id, "sha256:a-1");
    assert_eq!(a.restart_count, 0);
    assert!(a.ready);
    assert_eq!(a.state.unwrap().running.unwrap().started_at, Some(Time(wall0())));
    assert_eq!(d.w.uid(), Some("u1"));
    assert_eq!(d.w.container_name("b-2"), Some("b"));
    assert_eq!(d.w.container_name("x"), None);
    assert!(!d.w.is_done());
}

#[test]
fn an_exit_reads_the_termination_message_into_the_status() {
    let mut d = Driver::new();
    d.run(&web().policy("Never"));
    let actions = d.step(d.exit("c-1", 2));
    let asked: Vec<String> = actions
        .iter()
        .filter(|a| matches!(a, Action::ReadTerminationMessage { .. }))
        .map(show)
        .collect();
    assert_eq!(asked, ["ReadTerminationMessage c-1"]);
    assert_eq!(d.terminated("c").message, None, "nothing until it is read");
    let message = Input::TerminationMessage {
        container_id: "c-1".into(),
        message: "config invalid: port".into(),
    };
    assert!(shown(&d.step(message)).is_empty());
    assert_eq!(d.terminated("c").message.as_deref(), Some("config invalid: port"));
    // A message for a container the pod no longer knows changes nothing.
    let stray = Input::TerminationMessage { container_id: "c-9".into(), message: "x".into() };
    assert!(shown(&d.step(stray)).is_empty());
    assert_eq!(d.terminated("c").message.as_deref(), Some("config invalid: port"));
}

#[test]
fn restart_policy_decides_on_every_exit() {
    // (policy, exit code, restarted, phase, reason)
    let cases = [
        ("Always", 0, true, "Running", "Completed"),
        ("Always", 1, true, "Running", "Error"),
        ("OnFailure", 0, false, "Succeeded", "Completed"),
        ("OnFailure", 1, true, "Running", "Error"),
        ("Never", 0, false, "Succeeded", "Completed"),
        ("Never", 1, false, "Failed", "Error"),
    ];
    for (policy, code, restarted, phase, reason) in cases {
        let case = format!("{policy} after exit {code}");
        let mut d = Driver::new();
        d.run(&web().policy(policy));
        d.pass(secs(5));
        let actions = d.step(d.exit("c-1", code));
        if restarted {
            // The first restart is immediate: no record of the exit, no BackOff event.
            assert_eq!(
                shown(&actions),
                ["DeleteTask c-1", "KeepDead c-1", "StartContainer u1/c rc=1"],
                "{case}"
            );
            assert_eq!(d.waiting("c").reason.as_deref(), Some("ContainerCreating"), "{case}");
            let last = d.last_terminated("c");
            assert_eq!((last.exit_code, last.reason.as_deref()), (code, Some(reason)), "{case}");
            assert_eq!(last.started_at, Some(Time(wall0())), "{case}");
            assert_eq!(last.finished_at, Some(Time(wall(secs(5)))), "{case}");
            assert_eq!(d.restart_count("c"), 0, "{case}: counted once started");
            assert_eq!(
                shown(&d.step(d.started("c", "c-2"))),
                ["Count ContainerRestarted file"],
                "{case}"
            );
            assert_eq!(d.restart_count("c"), 1, "{case}");
        } else {
            assert_eq!(
                shown(&actions),
                [
                    "DeleteTask c-1".to_owned(),
                    format!("RecordExit c-1 {code} {reason}"),
                    "ReleaseVolumes u1".to_owned()
                ],
                "{case}"
            );
            let t = d.terminated("c");
            assert_eq!((t.exit_code, t.reason.as_deref()), (code, Some(reason)), "{case}");
            assert_eq!(t.container_id.as_deref(), Some("containerd://c-1"), "{case}");
            assert_eq!(d.wake, None, "{case}");
            assert!(d.step(Input::Tick).is_empty(), "{case}");
        }
        assert_eq!(d.phase(), phase, "{case}");
        let ready = if restarted { "True" } else { "False" };
        assert_eq!(d.condition("Ready").status, ready, "{case}");
    }
}

#[test]
fn phase_adds_up_every_container() {
    let mut d = Driver::new();
    d.run(&pod("u1", &[("a", "img:a"), ("b", "img:b")]).policy("Never"));
    d.step(d.exit("a-1", 0));
    assert_eq!(d.phase(), "Running", "b still runs");
    assert_eq!(
        d.condition("Ready").message.as_deref(),
        Some("containers with unready status: [a]")
    );
    d.step(d.exit("b-2", 2));
    assert_eq!(d.phase(), "Failed", "Never and one failed");
    assert!(!d.w.is_done(), "a pod that ended stays desired");
}

// ---------------------------------------------------------------------------------------
// CrashLoopBackOff

#[test]
fn crash_loop_waits_longer_after_every_exit_up_to_the_max() {
    let mut d = Driver::new();
    d.run(&web());
    let delays = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300];
    let mut id = "c-1".to_owned();
    for (n, delay) in (1u32..).zip(delays) {
        let delay = secs(delay);
        let actions = d.step(d.exit(&id, 1));
        let restart = [format!("KeepDead {id}"), format!("StartContainer u1/c rc={n}")];
        if delay.is_zero() {
            assert_eq!(shown(&actions)[1..], restart, "the first restart is at once");
            assert_eq!(shown(&actions)[0], format!("DeleteTask {id}"));
        } else {
            assert_eq!(
                shown(&actions),
                [
                    format!("DeleteTask {id}"),
                    format!("RecordExit {id} 1 Error"),
                    format!("Event Warning BackOff c: {CRASH_MESSAGE}"),
                ],
                "exit {n}"
            );
            assert_eq!(d.wake_in(), Some(delay), "exit {n}");
            let waiting = d.waiting("c");
            assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
            assert_eq!(
                waiting.message,
                Some(format!(
                    "back-off {delay:?} restarting failed container=c pod=web_default(u1)"
                ))
            );
            assert_eq!(d.restart_count("c"), i32::try_from(n - 1).unwrap());
            let at = d.wake.unwrap();
            assert!(d.tick_at_instant(at - NS).is_empty(), "no start before the wake time");
            d.set_time(at - d.base);
            assert_eq!(shown(&d.step(Input::Tick)), restart, "exit {n}: one start at the wake");
        }
        id = d.next_id("c");
        assert_eq!(shown(&d.step(d.started("c", &id))), ["Count ContainerRestarted file"]);
        assert_eq!(d.restart_count("c"), i32::try_from(n).unwrap());
        assert!(d.wake_in().is_none());
    }
}

#[test]
fn crash_loop_starts_over_after_a_container_ran_ten_minutes() {
    let mut d = Driver::new();
    d.run(&web());
    // Three quick exits: 0 s, 1 s, 2 s; the next would wait 4 s.
    for id in ["c-1", "c-2", "c-3"] {
        d.drive(d.exit(id, 1));
        if let Some(at) = d.wake {
            d.tick_at_instant(at);
        }
    }
    assert_eq!(d.container("c").container_id.as_deref(), Some("containerd://c-4"));
    // 599 s is not enough to start over.
    d.pass(secs(599));
    d.step(d.exit("c-4", 1));
    assert_eq!(d.wake_in(), Some(secs(4)));
    d.tick_at_instant(d.wake.unwrap());
    // 600 s is: the restart is at once again, unrecorded, without an event.
    d.pass(secs(600));
    assert_eq!(
        shown(&d.step(d.exit("c-5", 1))),
        ["DeleteTask c-5", "KeepDead c-5", "StartContainer u1/c rc=5"]
    );
    assert_eq!(d.waiting("c").reason.as_deref(), Some("ContainerCreating"));
    d.step(d.started("c", "c-6"));
    // And the one after waits the initial second.
    d.step(d.exit("c-6", 1));
    assert_eq!(d.wake_in(), Some(SECOND));
}

// ---------------------------------------------------------------------------------------
// Image pulls

#[test]
fn image_pulls_back_off_apart_with_jitter() {
    let mut d = starting(&web().image("c", "nginx:1.27"));
    assert_eq!(
        shown(&d.step(pull_failed("pull access denied"))),
        ["Event Warning Failed c: Error: ErrImagePull"],
        "the first failure: ErrImagePull, no back-off event"
    );
    let waiting = d.waiting("c");
    assert_eq!(waiting.reason.as_deref(), Some("ErrImagePull"));
    assert_eq!(waiting.message.as_deref(), Some("pull access denied"));
    assert_eq!(d.phase(), "Pending");
    let mut base = SECOND;
    for round in 0..12 {
        let delay = d.wake_in().unwrap();
        assert!(delay >= base / 2 && delay <= base, "round {round}: {delay:?} within {base:?}");
        let at = d.wake.unwrap();
        assert!(d.tick_at_instant(at - NS).is_empty());
        d.set_time(at - d.base);
        assert_eq!(shown(&d.step(Input::Tick)), ["StartContainer u1/c rc=0"]);
        assert_eq!(
            shown(&d.step(pull_failed("pull access denied"))),
            [
                "Event Normal BackOff c: Back-off pulling image \"nginx:1.27\"",
                "Event Warning Failed c: Error: ImagePullBackOff",
            ]
        );
        assert_eq!(d.waiting("c").reason.as_deref(), Some("ImagePullBackOff"));
        assert_eq!(d.waiting("c").message.as_deref(), Some("pull access denied"));
        base = (base * 2).min(secs(300));
    }
    assert!(d.wake_in().unwrap() <= secs(300));
}

#[test]
fn image_pull_backoff_starts_over_after_a_start() {
    let mut d = starting(&web());
    for _ in 0..3 {
        d.step(pull_failed("timeout"));
        let at = d.wake.unwrap();
        d.set_time(at - d.base);
        d.step(Input::Tick);
    }
    assert!(d.wake_in().is_none());
    assert!(d.step(d.started("c", "c-1")).is_empty(), "a first start is no restart");
    assert!(d.container("c").ready);
    // Restarted at once after an exit, the pull fails: ErrImagePull again, 0.5–1 s.
    d.pass(secs(1));
    assert_eq!(starts(&d.step(d.exit("c-1", 0))), 1);
    assert_eq!(
        shown(&d.step(pull_failed("timeout"))),
        ["Event Warning Failed c: Error: ErrImagePull"]
    );
    assert_eq!(d.waiting("c").reason.as_deref(), Some("ErrImagePull"));
    let delay = d.wake_in().unwrap();
    assert!(delay >= SECOND / 2 && delay <= SECOND, "{delay:?}");
}

#[test]
fn other_start_failures_use_the_crash_loop() {
    let mut d = starting(&web());
    assert_eq!(
        shown(&d.step(start_failed(WaitingReason::CreateContainerError, "no such file"))),
        ["Event Warning Failed c: Error: no such file", "StartContainer u1/c rc=0"],
        "the first retry is at once"
    );
    assert_eq!(d.wake, None);
    for (round, delay) in [1, 2, 4].into_iter().enumerate() {
        assert_eq!(
            shown(&d.step(start_failed(WaitingReason::RunContainerError, "exec format error"))),
            ["Event Warning Failed c: Error: exec format error"],
            "round {round}"
        );
        let waiting = d.waiting("c");
        assert_eq!(waiting.reason.as_deref(), Some("RunContainerError"));
        assert_eq!(waiting.message.as_deref(), Some("exec format error"));
        assert_eq!(d.wake_in(), Some(secs(delay)));
        d.tick_at_instant(d.wake.unwrap() - NS);
        let at = d.wake.unwrap();
        d.set_time(at - d.base);
        assert_eq!(shown(&d.step(Input::Tick)), ["StartContainer u1/c rc=0"]);
    }
    // The pull backoff was not touched: a pull failure now is a first one.
    assert_eq!(
        shown(&d.step(pull_failed("denied"))),
        ["Event Warning Failed c: Error: ErrImagePull"]
    );
}

#[test]
fn a_start_result_for_no_start_under_way_is_ignored() {
    let mut d = Driver::new();
    d.run(&web());
    assert!(d.step(d.started("c", "c-9")).is_empty());
    assert!(d.step(pull_failed("x")).is_empty());
    assert_eq!(d.container("c").container_id.as_deref(), Some("containerd://c-1"));
    assert!(d.step(d.started("nope", "n-1")).is_empty());
}

// ---------------------------------------------------------------------------------------
// The sandbox

#[test]
fn sandbox_failures_back_off_and_show_in_the_status() {
    let mut d = Driver::new();
    d.step(web().input());
    let mut base = SECOND;
    for round in 0..9 {
        assert_eq!(
            shown(&d.step(sandbox_failed("cni: no route"))),
            ["Event Warning FailedCreatePodSandBox -: Failed to create pod sandbox: cni: no route"]
        );
        let ready = d.condition("PodReadyToStartContainers");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("NetworkNotReady"));
        assert_eq!(ready.message.as_deref(), Some("cni: no route"));
        let waiting = d.waiting("c");
        assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
        assert_eq!(waiting.message.as_deref(), Some("cni: no route"));
        assert_eq!(d.phase(), "Pending");
        let delay = d.wake_in().unwrap();
        assert!(delay >= base / 2 && delay <= base, "round {round}: {delay:?} within {base:?}");
        let at = d.wake.unwrap();
        assert!(d.tick_at_instant(at - NS).is_empty());
        d.set_time(at - d.base);
        assert_eq!(shown(&d.step(Input::Tick)), ["SetUpSandbox u1"]);
        assert_eq!(d.wake, None);
        base = (base * 2).min(secs(10));
    }
    assert_eq!(base, secs(10), "capped at kubelet's pod-worker back-off");
    // Recovery: the containers start, the condition clears.
    assert_eq!(
        shown(&d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false })),
        ["StartContainer u1/c rc=0"]
    );
    let ready = d.condition("PodReadyToStartContainers");
    assert_eq!((ready.status.as_str(), ready.reason), ("True", None));
    assert_eq!(d.waiting("c").message, None);
    d.step(d.started("c", "c-1"));
    assert_eq!(d.phase(), "Running");
}

/// D5: a class the API server does not have fails the sandbox with kubelet's Event and
/// `CreatePodSandboxError`, and is tried again at the sandbox's backoff.
#[test]
fn d5_an_unknown_runtime_class_fails_the_sandbox_as_kubelet() {
    let mut d = Driver::new();
    d.step(web().input());
    let message = "runtimeclass.node.k8s.io \"gpu\" not found";
    let failed = Input::SandboxFailed(SandboxProblem {
        reason: SandboxReason::CreatePodSandboxError,
        message: message.into(),
    });
    assert_eq!(
        shown(&d.step(failed)),
        [format!(
            "Event Warning FailedCreatePodSandBox -: Failed to create pod sandbox: {message}"
        )]
    );
    let ready = d.condition("PodReadyToStartContainers");
    assert_eq!(ready.reason.as_deref(), Some("CreatePodSandboxError"));
    assert_eq!(ready.message.as_deref(), Some(message));
    assert_eq!(d.waiting("c").reason.as_deref(), Some("ContainerCreating"));
    assert_eq!(d.phase(), "Pending");
    let at = d.wake.unwrap();
    d.set_time(at - d.base);
    assert_eq!(shown(&d.step(Input::Tick)), ["SetUpSandbox u1"]);
}

#[test]
fn sandbox_results_without_a_pod_are_ignored() {
    let mut d = Driver::new();
    assert!(d.step(sandbox_failed("x")).is_empty());
    assert!(d.step(Input::SandboxReady { ips: vec![], fresh: false }).is_empty());
    assert!(d.step(Input::Tick).is_empty());
    assert!(d.w.is_done());
}
