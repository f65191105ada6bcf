//! Lifecycle hooks through the pod worker's step: postStart before a container counts as
//! running, a failed one kills it (L1); preStop before SIGTERM, within the grace period it
//! does not extend (L2), for pod stops, node shutdowns and a container's own kills.

use k8s_openapi::api::core::v1::HTTPGetAction;

use super::*;

/// `c` with a postStart hook (`warm-up`) and a readiness probe.
fn warming() -> P {
    web().hook("c", PostStart, exec("warm-up")).probe("c", Readiness, every(5, 10))
}

const POST_START: &str = "RunHook PostStart c/c-1 exec [warm-up] None";
const FAILED_POST_START: &str = "Event Warning FailedPostStartHook c: PostStartHook failed";

// ---------------------------------------------------------------------------------------
// postStart (L1)

#[test]
fn post_start_runs_before_the_container_counts_as_running() {
    let mut d = Driver::new();
    assert_eq!(
        shown(&d.run(&warming())),
        ["TrackPod u1", "SetUpSandbox u1", "StartContainer u1/c rc=0", POST_START],
        "the hook, no probe"
    );
    let waiting = d.waiting("c");
    assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
    assert_eq!(d.started_ready("c"), (Some(false), false));
    assert_eq!(d.container("c").container_id.as_deref(), Some("containerd://c-1"));
    assert_eq!(d.phase(), "Pending");
    assert_eq!(d.condition("Ready").status, "False");
    assert_eq!(d.wake, None, "a postStart hook has no deadline; no probe is due");
    assert!(d.tick_at(secs(3)).is_empty());
    assert!(d.step(success("c-1", Readiness)).is_empty(), "no probe runs yet");

    // It returns at 3 s: running since its start; the probe's delay counts from then.
    assert!(d.step(hook_done("c-1", PostStart, Ok(()))).is_empty());
    let running = d.container("c").state.unwrap().running.unwrap();
    assert_eq!(running.started_at, Some(Time(wall0())));
    assert_eq!(d.phase(), "Running");
    assert_eq!(d.started_ready("c"), (Some(true), false));
    assert_eq!(d.wake_in(), Some(secs(2)));
    assert_eq!(shown(&d.tick_at(secs(5))), ["Probe Readiness c/c-1 exec [check] 1s"]);
    d.step(success("c-1", Readiness));
    assert_eq!(d.started_ready("c"), (Some(true), true));
    assert_eq!(d.condition("Ready").status, "True");
    // A second word of the same hook changes nothing.
    assert!(d.step(hook_done("c-1", PostStart, Err("late"))).is_empty());
    assert!(d.container("c").ready);
}

#[test]
fn probes_overdue_when_post_start_returns_run_at_once() {
    let p = web().hook("c", PostStart, exec("warm-up")).probe("c", Startup, every(0, 1)).probe(
        "c",
        Liveness,
        every(2, 10),
    );
    let mut d = Driver::new();
    assert_eq!(shown(&d.run(&p))[3..], [POST_START]);
    assert!(d.tick_at(secs(8)).is_empty(), "the startup probe waits for the hook");
    assert_eq!(
        shown(&d.step(hook_done("c-1", PostStart, Ok(())))),
        ["Probe Startup c/c-1 exec [check] 1s"]
    );
    assert_eq!(d.started_ready("c"), (Some(false), false));
    assert_eq!(
        shown(&d.step(success("c-1", Startup))),
        ["Probe Liveness c/c-1 exec [check] 1s"],
        "its delay ran out during the hook"
    );
    assert_eq!(d.started_ready("c"), (Some(true), true));
}

#[test]
fn a_failed_post_start_kills_the_container_and_it_is_restarted() {
    let mut d = Driver::new();
    d.run(&warming());
    d.set_time(secs(1));
    // The hook's own message stays out of the event (it may carry secrets).
    assert_eq!(
        shown(&d.step(hook_done("c-1", PostStart, Err("exit status 1: token=s3cret")))),
        [FAILED_POST_START, "Signal Term c-1", "CheckExited c-1"]
    );
    assert_eq!(d.wake_in(), Some(secs(30)), "the pod's grace period");
    assert!(d.tick_at(secs(10)).is_empty(), "not probed while killed");
    assert_eq!(
        shown(&d.drive(d.exit("c-1", 143))),
        [
            "DeleteTask c-1",
            "KeepDead c-1",
            "StartContainer u1/c rc=1",
            "Count ContainerRestarted file",
            "RunHook PostStart c/c-2 exec [warm-up] None",
        ]
    );
    assert_eq!(d.restart_count("c"), 1);
    assert_eq!(d.waiting("c").reason.as_deref(), Some("ContainerCreating"), "its hook runs");
    assert_eq!(d.last_terminated("c").exit_code, 143);
    // Failing again: CrashLoopBackOff.
    d.step(hook_done("c-2", PostStart, Err("exit status 1")));
    let actions = shown(&d.step(d.exit("c-2", 143)));
    assert_eq!(
        actions[1..],
        [
            "RecordExit c-2 143 Error".to_owned(),
            format!("Event Warning BackOff c: {CRASH_MESSAGE}")
        ]
    );
    assert_eq!(d.waiting("c").reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(d.wake_in(), Some(SECOND));
}

#[test]
fn the_restart_policy_decides_after_a_failed_post_start() {
    // The kill's exit goes by its exit code. (policy, exit code, phase if not restarted)
    let cases = [
        ("Always", 0, None),
        ("OnFailure", 143, None),
        ("OnFailure", 0, Some("Succeeded")),
        ("Never", 143, Some("Failed")),
    ];
    for (policy, code, ended) in cases {
        let case = format!("{policy}, exit {code}");
        let mut d = Driver::new();
        d.run(&warming().policy(policy));
        d.step(hook_done("c-1", PostStart, Err("exit status 1")));
        let actions = shown(&d.drive(d.exit("c-1", code)));
        let restarted = actions.contains(&"StartContainer u1/c rc=1".to_owned());
        assert_eq!(restarted, ended.is_none(), "{case}: {actions:?}");
        match ended {
            Some(phase) => {
                assert_eq!(d.terminated("c").exit_code, code, "{case}");
                assert_eq!(d.phase(), phase, "{case}");
                assert_eq!(d.wake, None, "{case}");
            }
            None => {
                assert_eq!(actions.last().unwrap(), "RunHook PostStart c/c-2 exec [warm-up] None");
                assert_eq!(d.last_terminated("c").exit_code, code, "{case}");
            }
        }
    }
}

#[test]
fn a_restarted_container_whose_post_start_runs_keeps_the_pod_running() {
    // kubelet's getPhase counts a waiting container that has a last termination as
    // stopped (restarting), so a pod whose container is restarted stays Running.
    let mut d = Driver::new();
    d.run(&warming());
    d.step(hook_done("c-1", PostStart, Ok(())));
    assert_eq!(d.phase(), "Running");
    d.drive(d.exit("c-1", 1));
    assert!(d.container("c").last_state.is_some());
    assert_eq!(d.waiting("c").reason.as_deref(), Some("ContainerCreating"), "c-2's hook runs");
    assert_eq!(d.phase(), "Running");
}

#[test]
fn a_failed_post_start_runs_pre_stop_before_sigterm() {
    let mut d = Driver::new();
    d.run(&warming().hook("c", PreStop, exec("drain")));
    assert_eq!(
        shown(&d.step(hook_done("c-1", PostStart, Err("exit status 1")))),
        [FAILED_POST_START, "RunHook PreStop c/c-1 exec [drain] Some(30s)"]
    );
    d.set_time(secs(4));
    assert_eq!(
        shown(&d.step(hook_done("c-1", PreStop, Ok(())))),
        ["Signal Term c-1", "CheckExited c-1"]
    );
    assert_eq!(d.wake, Some(d.at(secs(30))), "the hook's time counts in the grace period");
}

#[test]
fn a_post_start_that_cannot_run_fails_as_it_starts() {
    // An API pod is not refused for it: the hook fails as kubelet's would.
    let hook = LifecycleHandler {
        http_get: Some(HTTPGetAction {
            port: IntOrString::String("admin".into()),
            ..Default::default()
        }),
        ..LifecycleHandler::default()
    };
    let mut d = Driver::new();
    assert_eq!(
        shown(&d.run(&web().hook("c", PostStart, hook)))[2..],
        ["StartContainer u1/c rc=0", FAILED_POST_START, "Signal Term c-1", "CheckExited c-1"]
    );
}

#[test]
fn hook_results_for_other_containers_are_ignored() {
    let mut d = Driver::new();
    d.run(&warming());
    assert!(d.step(hook_done("x", PostStart, Err("x"))).is_empty());
    assert!(d.step(hook_done("c-1", PreStop, Ok(()))).is_empty(), "no preStop runs");
    assert_eq!(d.waiting("c").reason.as_deref(), Some("ContainerCreating"));
    // A restarted container's hook result is not the old one's.
    d.step(hook_done("c-1", PostStart, Ok(())));
    d.drive(d.exit("c-1", 1));
    assert!(d.step(hook_done("c-1", PostStart, Err("late"))).is_empty());
    assert_eq!(d.waiting("c").reason.as_deref(), Some("ContainerCreating"), "c-2's hook runs");
    assert!(d.step(hook_done("c-2", PostStart, Ok(()))).is_empty());
    assert!(d.container("c").state.unwrap().running.is_some());
}

#[test]
fn a_pod_stopped_while_its_post_start_runs_is_stopped_as_usual() {
    let mut d = Driver::new();
    d.run(&warming());
    assert_eq!(
        shown(&d.step(undesired())),
        ["Event Normal Killing c: Stopping container c", "Signal Term c-1", "CheckExited c-1"]
    );
    assert!(d.step(hook_done("c-1", PostStart, Err("killed"))).is_empty(), "no second kill");
    assert_eq!(
        shown(&d.step(d.exit("c-1", 143))),
        ["RemoveContainer c-1", "TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"]
    );
}

// ---------------------------------------------------------------------------------------
// preStop when the pod stops (L2)

const REMOVE_C: [&str; 4] =
    ["RemoveContainer c-1", "TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"];

#[test]
fn deletion_runs_pre_stop_then_sigterm_within_the_grace_period() {
    let p =
        pod("u1", &[("a", "img:a"), ("b", "img:b")]).hook("a", PreStop, exec("drain")).grace(20);
    let mut d = Driver::new();
    d.run(&p);
    d.set_time(secs(10));
    assert_eq!(
        shown(&d.step(p.clone().deleting(None).input())),
        [
            "Event Normal Killing a: Stopping container a",
            "Event Normal Killing b: Stopping container b",
            "RunHook PreStop a/a-1 exec [drain] Some(20s)",
            "Signal Term b-2",
            "CheckExited b-2",
        ],
        "SIGTERM waits for a's hook; b has none"
    );
    assert_eq!(d.wake, Some(d.at(secs(30))));
    assert!(d.step(d.exit("b-2", 0)).is_empty());
    d.set_time(secs(25));
    assert_eq!(
        shown(&d.step(hook_done("a-1", PreStop, Ok(())))),
        ["Signal Term a-1", "CheckExited a-1"]
    );
    assert_eq!(d.wake, Some(d.at(secs(30))), "the hook took 15 s of the 20");
    assert_eq!(shown(&d.tick_at(secs(30))), ["Signal Kill a-1"]);
    assert_eq!(
        shown(&d.step(d.exit("a-1", 137))),
        [
            "RemoveContainer a-1",
            "RemoveContainer b-2",
            "TearDownSandbox u1",
            "RemoveStatus u1",
            "ForgetPod u1"
        ]
    );
}

#[test]
fn a_hanging_pre_stop_is_cut_at_the_grace_period_then_sigterm_gets_kubelets_window() {
    let p = web().hook("c", PreStop, exec("hang")).grace(10);
    let mut d = Driver::new();
    d.run(&p);
    assert_eq!(
        shown(&d.step(undesired())),
        [
            "Event Normal Killing c: Stopping container c",
            "RunHook PreStop c/c-1 exec [hang] Some(10s)"
        ]
    );
    assert_eq!(d.wake_in(), Some(secs(10)));
    assert!(d.tick_at(secs(10) - NS).is_empty());
    assert_eq!(
        shown(&d.tick_at(secs(10))),
        ["Signal Term c-1", "CheckExited c-1"],
        "the hook is cut at the grace period: SIGTERM, as kubelet"
    );
    assert_eq!(d.wake_in(), Some(MIN_SHUTDOWN_WINDOW), "kubelet's minimum shutdown window");
    assert_eq!(shown(&d.tick_at(secs(12))), ["Signal Kill c-1"]);
    assert_eq!(d.wake_in(), Some(KILL_WAIT));
    // The hook returns after all: no SIGTERM after SIGKILL.
    assert!(d.step(hook_done("c-1", PreStop, Ok(()))).is_empty());
    assert!(d.step(hook_done("c-1", PreStop, Err("killed"))).is_empty());
    assert_eq!(shown(&d.step(d.exit("c-1", 137))), REMOVE_C);
    assert!(d.w.is_done());
}

#[test]
fn a_failed_pre_stop_is_reported_and_sigterm_follows() {
    let mut d = Driver::new();
    d.run(&web().hook("c", PreStop, exec("drain")));
    d.step(undesired());
    assert_eq!(
        shown(&d.step(hook_done("c-1", PreStop, Err("exit status 2: password=hunter2")))),
        [
            "Event Warning FailedPreStopHook c: PreStopHook failed",
            "Signal Term c-1",
            "CheckExited c-1"
        ]
    );
}

#[test]
fn a_pre_stop_that_cannot_run_is_reported_and_sigterm_goes_at_once() {
    let bad = LifecycleHandler {
        http_get: Some(HTTPGetAction {
            port: IntOrString::String("admin".into()),
            ..Default::default()
        }),
        ..LifecycleHandler::default()
    };
    let p = web().hook("c", PreStop, bad).probe("c", Liveness, failing_after(1));
    let failed = "Event Warning FailedPreStopHook c: PreStopHook failed";
    // A pod stop.
    let mut d = Driver::new();
    d.run(&p);
    assert_eq!(
        shown(&d.step(undesired())),
        [
            "Event Normal Killing c: Stopping container c",
            failed,
            "Signal Term c-1",
            "CheckExited c-1"
        ]
    );
    // A container's own kill.
    let mut d = Driver::new();
    d.run(&p);
    assert_eq!(
        shown(&d.step(failure("c-1", Liveness, "x")))[1..],
        [LIVENESS_KILLING, failed, "Signal Term c-1", "CheckExited c-1"]
    );
}

#[test]
fn a_shorter_deletion_grace_period_bounds_the_hook() {
    let p = web().hook("c", PreStop, exec("drain")).grace(60);
    let mut d = Driver::new();
    d.run(&p);
    let actions = shown(&d.step(p.clone().deleting(Some(5)).input()));
    assert_eq!(actions[1], "RunHook PreStop c/c-1 exec [drain] Some(5s)");
    assert_eq!(d.wake_in(), Some(secs(5)));
}

#[test]
fn a_container_that_exits_while_its_pre_stop_runs_gets_no_signal() {
    let mut d = Driver::new();
    d.run(&web().hook("c", PreStop, exec("drain")));
    d.step(undesired());
    assert_eq!(shown(&d.step(d.exit("c-1", 0))), REMOVE_C);
    assert!(d.step(hook_done("c-1", PreStop, Ok(()))).is_empty());
    assert!(d.w.is_done());
}

#[test]
fn a_replaced_pod_runs_pre_stop_before_the_new_one_starts() {
    let p = web().hook("c", PreStop, exec("drain"));
    let mut d = Driver::new();
    d.run(&p);
    let new = pod("u2", &[("c", "img:2")]);
    assert_eq!(
        shown(&d.drive(new.input())),
        [
            "Event Normal Killing c: Stopping container c",
            "RunHook PreStop c/c-1 exec [drain] Some(30s)"
        ]
    );
    assert_eq!(
        shown(&d.drive(hook_done("c-1", PreStop, Ok(())))),
        ["Signal Term c-1", "CheckExited c-1"]
    );
    let actions = shown(&d.drive(d.exit("c-1", 0)));
    assert_eq!(actions[..4], REMOVE_C);
    assert_eq!(actions[4..7], ["TrackPod u2", "SetUpSandbox u2", "StartContainer u2/c rc=0"]);
}

#[test]
fn node_shutdown_runs_pre_stop_too() {
    let p = pod("u1", &[("a", "img:a"), ("b", "img:b")])
        .hook("a", PreStop, exec("drain"))
        .hook("b", PreStop, exec("hang"))
        .grace(15);
    let mut d = Driver::new();
    d.run(&p);
    assert_eq!(
        shown(&d.step(Input::Shutdown)),
        [
            "RunHook PreStop a/a-1 exec [drain] Some(15s)",
            "RunHook PreStop b/b-2 exec [hang] Some(15s)"
        ]
    );
    assert_eq!(d.wake_in(), Some(secs(15)));
    d.set_time(secs(2));
    assert_eq!(
        shown(&d.step(hook_done("a-1", PreStop, Ok(())))),
        ["Signal Term a-1", "CheckExited a-1"]
    );
    assert!(d.step(d.exit("a-1", 0)).is_empty());
    assert_eq!(
        shown(&d.tick_at(secs(15))),
        ["Signal Term b-2", "CheckExited b-2"],
        "b's hook hangs: cut at the grace period"
    );
    assert!(d.step(hook_done("b-2", PreStop, Ok(()))).is_empty());
    assert_eq!(shown(&d.tick_at(secs(17))), ["Signal Kill b-2"]);
    assert!(d.step(d.exit("b-2", 137)).is_empty(), "left in place");
    assert!(d.w.is_done());
    assert_eq!(d.terminated("a").exit_code, 0);
    assert_eq!(d.terminated("b").exit_code, 137);
    assert_eq!(d.status().reason.as_deref(), Some("Terminated"));
}

// ---------------------------------------------------------------------------------------
// preStop when one container is killed (P3, spec changes)

#[test]
fn a_liveness_kill_runs_pre_stop_within_the_probes_grace_period() {
    let probe = Probe { termination_grace_period_seconds: Some(8), ..failing_after(1) };
    let p = web().probe("c", Liveness, probe).hook("c", PreStop, exec("drain"));
    let mut d = Driver::new();
    d.run(&p);
    assert_eq!(
        shown(&d.step(failure("c-1", Liveness, "x")))[1..],
        [LIVENESS_KILLING, "RunHook PreStop c/c-1 exec [drain] Some(8s)"]
    );
    assert_eq!(d.wake_in(), Some(secs(8)));
    d.set_time(secs(3));
    assert_eq!(shown(&d.step(hook_done("c-1", PreStop, Ok(())))), KILL);
    assert_eq!(d.wake, Some(d.at(secs(8))), "not extended by the hook");
    assert_eq!(shown(&d.drive(d.exit("c-1", 143)))[2], "StartContainer u1/c rc=1");

    // The hook hangs: cut at the deadline, SIGTERM, then SIGKILL after kubelet's
    // minimum window; nothing when the hook returns.
    d.step(failure("c-2", Liveness, "x"));
    let deadline = d.wake.unwrap();
    assert_eq!(deadline, d.now().at + secs(8));
    assert!(d.tick_at_instant(deadline - NS).is_empty());
    assert_eq!(shown(&d.tick_at_instant(deadline)), ["Signal Term c-2", "CheckExited c-2"]);
    let window = deadline + MIN_SHUTDOWN_WINDOW;
    assert_eq!(shown(&d.tick_at_instant(window)), ["Signal Kill c-2", "CheckExited c-2"]);
    assert!(d.step(hook_done("c-2", PreStop, Ok(()))).is_empty());
    assert!(d.step(hook_done("c-2", PreStop, Err("x"))).is_empty());
}

#[test]
fn a_changed_container_runs_pre_stop_then_is_recreated_at_once() {
    let p = web().hook("c", PreStop, exec("drain"));
    let mut d = Driver::new();
    d.run(&p);
    let changed = p.clone().image("c", "img:2");
    assert_eq!(
        shown(&d.drive(changed.input())),
        [
            "Event Normal Killing c: Container c definition changed, will be restarted",
            "RunHook PreStop c/c-1 exec [drain] Some(30s)",
        ]
    );
    assert_eq!(shown(&d.step(hook_done("c-1", PreStop, Ok(())))), KILL);
    assert_eq!(
        shown(&d.step(d.exit("c-1", 143))),
        ["DeleteTask c-1", "KeepDead c-1", "StartContainer u1/c rc=1"],
        "no back-off"
    );
}

#[test]
fn a_pod_stop_waits_for_a_pre_stop_already_running() {
    // L2: the stop signal comes after preStop returns. A liveness kill started c-1's
    // preStop; the pod is deleted while it runs.
    let p = web().probe("c", Liveness, failing_after(1)).hook("c", PreStop, exec("drain"));
    let mut d = Driver::new();
    d.run(&p);
    d.step(failure("c-1", Liveness, "x"));
    d.set_time(secs(1));
    assert_eq!(
        shown(&d.step(undesired())),
        ["Event Normal Killing c: Stopping container c"],
        "no SIGTERM while its preStop runs"
    );
    assert_eq!(shown(&d.step(hook_done("c-1", PreStop, Ok(())))), KILL);
}
