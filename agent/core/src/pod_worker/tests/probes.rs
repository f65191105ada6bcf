//! Probes through the pod worker's step (P1–P4): emitted only for running containers, on
//! the worker's one timer; their results drive `started`, `ready`, the pod's conditions,
//! events and kills, and a killed container is restarted by the restart policy. Hooks
//! (L1, L2) are in `probes/hooks.rs`.

mod hooks;

use k8s_openapi::api::core::v1::{
    Container, ExecAction, Lifecycle, LifecycleHandler, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;
use crate::probe::Hook::{self, PostStart, PreStop};
use crate::probe::Outcome;
use crate::probe::ProbeKind::{self, Liveness, Readiness, Startup};

// ---------------------------------------------------------------------------------------
// Pods with probes and hooks

/// Probes and hooks on the containers of a pod under construction.
trait Probing {
    fn probe(self, container: &str, kind: ProbeKind, probe: Probe) -> P;
    fn hook(self, container: &str, hook: Hook, handler: LifecycleHandler) -> P;
}

fn container_mut<'a>(p: &'a mut P, name: &str) -> &'a mut Container {
    p.spec().containers.iter_mut().find(|c| c.name == name).unwrap()
}

impl Probing for P {
    fn probe(mut self, container: &str, kind: ProbeKind, probe: Probe) -> P {
        let c = container_mut(&mut self, container);
        let slot = match kind {
            Startup => &mut c.startup_probe,
            Liveness => &mut c.liveness_probe,
            Readiness => &mut c.readiness_probe,
        };
        *slot = Some(probe);
        self
    }

    fn hook(mut self, container: &str, hook: Hook, handler: LifecycleHandler) -> P {
        let c = container_mut(&mut self, container);
        let lifecycle = c.lifecycle.get_or_insert_with(Lifecycle::default);
        match hook {
            PostStart => lifecycle.post_start = Some(handler),
            PreStop => lifecycle.pre_stop = Some(handler),
        }
        self
    }
}

/// `exec [check]`, first `initial_delay` seconds after the start, then every `period`.
fn every(initial_delay: i32, period: i32) -> Probe {
    Probe {
        exec: Some(ExecAction { command: Some(vec!["check".into()]) }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        ..Probe::default()
    }
}

/// `exec [check]` every 10 s from the start, failing after `failures` in a row.
fn failing_after(failures: i32) -> Probe {
    Probe { failure_threshold: Some(failures), ..every(0, 10) }
}

/// A hook that runs `command`.
fn exec(command: &str) -> LifecycleHandler {
    LifecycleHandler {
        exec: Some(ExecAction { command: Some(vec![command.into()]) }),
        ..LifecycleHandler::default()
    }
}

fn probed(id: &str, kind: ProbeKind, outcome: Outcome) -> Input {
    Input::Probed { container_id: id.into(), kind, outcome }
}

fn success(id: &str, kind: ProbeKind) -> Input {
    probed(id, kind, Outcome::Success)
}

fn failure(id: &str, kind: ProbeKind, message: &str) -> Input {
    probed(id, kind, Outcome::Failure(message.into()))
}

fn hook_done(id: &str, hook: Hook, result: Result<(), &str>) -> Input {
    Input::HookDone { container_id: id.into(), hook, result: result.map_err(str::to_owned) }
}

/// The probe runs among `actions`, shown.
fn probe_runs(actions: &[Action]) -> Vec<String> {
    shown(actions).into_iter().filter(|a| a.starts_with("Probe ")).collect()
}

const KILL: [&str; 2] = ["Signal Term c-1", "CheckExited c-1"];
const LIVENESS_KILLING: &str =
    "Event Normal Killing c: Container c failed liveness probe, will be restarted";

impl Driver {
    /// `container`'s `started` and `ready`, as its status shows them.
    fn started_ready(&self, container: &str) -> (Option<bool>, bool) {
        let c = self.container(container);
        (c.started, c.ready)
    }
}

// ---------------------------------------------------------------------------------------
// When probes run (P1)

#[test]
fn probes_begin_at_their_initial_delay_from_the_start_then_run_every_period() {
    let p = web().probe("c", Liveness, Probe { timeout_seconds: Some(2), ..every(5, 10) });
    let mut d = Driver::new();
    assert_eq!(
        shown(&d.run(&p)),
        ["TrackPod u1", "SetUpSandbox u1", "StartContainer u1/c rc=0"],
        "nothing is probed before the initial delay"
    );
    assert_eq!(d.wake_in(), Some(secs(5)), "the worker wakes for the probe");
    assert!(d.tick_at(secs(5) - NS).is_empty());
    assert_eq!(shown(&d.tick_at(secs(5))), ["Probe Liveness c/c-1 exec [check] 2s"]);
    assert_eq!(d.wake, None, "the probe runs: nothing else is due");
    assert!(d.tick_at(secs(30)).is_empty(), "no second run while one runs");
    // Its result came late: the next run (a period after the last began) is overdue.
    assert_eq!(shown(&d.step(success("c-1", Liveness))), ["Probe Liveness c/c-1 exec [check] 2s"]);
    assert!(d.step(success("c-1", Liveness)).is_empty());
    assert_eq!(d.wake_in(), Some(secs(10)));
    assert_eq!(d.wake, Some(d.at(secs(40))));
}

#[test]
fn a_probe_with_no_delay_runs_as_the_container_starts() {
    let p = web().probe("c", Readiness, every(0, 10));
    let mut d = Driver::new();
    assert_eq!(
        shown(&d.run(&p)),
        [
            "TrackPod u1",
            "SetUpSandbox u1",
            "StartContainer u1/c rc=0",
            "Probe Readiness c/c-1 exec [check] 1s",
        ]
    );
    assert_eq!(d.wake, None);
    assert!(d.step(success("c-1", Readiness)).is_empty());
    assert_eq!(d.wake_in(), Some(secs(10)));
}

#[test]
fn a_container_that_is_not_running_is_not_probed() {
    let p = web().probe("c", Liveness, every(0, 10)).probe("c", Readiness, every(0, 10));
    let mut d = Driver::new();
    d.run(&p);
    // Exits with its probes running: restarted at once; nothing is probed while it starts.
    d.set_time(secs(1));
    assert_eq!(
        shown(&d.step(d.exit("c-1", 1))),
        ["DeleteTask c-1", "KeepDead c-1", "StartContainer u1/c rc=1"]
    );
    assert_eq!(d.wake, None);
    assert!(d.tick_at(secs(60)).is_empty());
    assert_eq!(
        probe_runs(&d.step(d.started("c", "c-2"))),
        ["Probe Liveness c/c-2 exec [check] 1s", "Probe Readiness c/c-2 exec [check] 1s"],
        "a new container, new probes from its start"
    );
    // Backing off: the wake is the restart's, not a probe's.
    d.step(success("c-2", Liveness));
    d.step(success("c-2", Readiness));
    assert_eq!(
        shown(&d.step(d.exit("c-2", 1)))[2],
        format!("Event Warning BackOff c: {CRASH_MESSAGE}")
    );
    assert_eq!(d.wake_in(), Some(SECOND));
    assert!(d.tick_at(secs(61) - NS).is_empty());
    d.set_time(secs(61));
    assert_eq!(shown(&d.step(Input::Tick)), ["KeepDead c-2", "StartContainer u1/c rc=2"]);
    assert_eq!(d.wake, None);
    assert!(d.tick_at(secs(100)).is_empty(), "still starting: not probed");

    // Never restarted: never probed again.
    let mut d = Driver::new();
    d.run(&p.clone().policy("Never"));
    assert_eq!(
        shown(&d.step(d.exit("c-1", 0))),
        ["DeleteTask c-1", "RecordExit c-1 0 Completed", "ReleaseVolumes u1"]
    );
    assert_eq!(d.wake, None);
    assert!(d.tick_at(secs(3600)).is_empty());
    assert!(d.step(success("c-1", Readiness)).is_empty(), "its results are not asked for");
    assert!(d.step(failure("c-1", Liveness, "gone")).is_empty(), "no event for an exited one");
    assert_eq!(d.started_ready("c"), (Some(false), false));
}

#[test]
fn results_for_an_old_or_unknown_container_are_ignored() {
    let p = web().probe("c", Liveness, failing_after(1)).probe("c", Readiness, every(0, 10));
    let mut d = Driver::new();
    d.run(&p);
    d.drive(d.exit("c-1", 1));
    assert_eq!(d.container("c").container_id.as_deref(), Some("containerd://c-2"));
    // Late results of the exited container: no event, no kill, no readiness.
    assert!(d.step(failure("c-1", Liveness, "connection refused")).is_empty());
    assert!(d.step(success("c-1", Readiness)).is_empty());
    assert_eq!(d.started_ready("c"), (Some(true), false));
    assert!(d.step(failure("nope", Liveness, "x")).is_empty());
    // The running one's count on.
    assert!(d.step(success("c-2", Readiness)).is_empty());
    assert_eq!(d.started_ready("c"), (Some(true), true));
    assert_eq!(
        shown(&d.step(failure("c-2", Liveness, "boom")))[1..],
        [
            "Event Normal Killing c: Container c failed liveness probe, will be restarted",
            "Signal Term c-2",
            "CheckExited c-2",
        ]
    );
}

#[test]
fn one_timer_serves_every_probe_of_every_container() {
    let p = pod("u1", &[("a", "img:a"), ("b", "img:b")]).probe("a", Liveness, every(0, 7)).probe(
        "b",
        Readiness,
        every(2, 3),
    );
    let mut d = Driver::new();
    assert_eq!(probe_runs(&d.run(&p)), ["Probe Liveness a/a-1 exec [check] 1s"]);
    assert_eq!(d.wake_in(), Some(secs(2)), "b's first run");
    d.step(success("a-1", Liveness));
    assert_eq!(d.wake_in(), Some(secs(2)), "a runs again at 7");
    // (time, what runs, next wake)
    let runs = [
        (2, "Probe Readiness b/b-2 exec [check] 1s", 5),
        (5, "Probe Readiness b/b-2 exec [check] 1s", 7),
        (7, "Probe Liveness a/a-1 exec [check] 1s", 8),
        (8, "Probe Readiness b/b-2 exec [check] 1s", 11),
        (11, "Probe Readiness b/b-2 exec [check] 1s", 14),
    ];
    for (at, run, next) in runs {
        assert!(d.tick_at(secs(at) - NS).is_empty(), "nothing before {at} s");
        let actions = d.tick_at(secs(at));
        assert_eq!(shown(&actions), [run], "at {at} s");
        let Action::Probe { container_id, kind, .. } = &actions[0] else { unreachable!() };
        d.step(success(container_id, *kind));
        assert_eq!(d.wake, Some(d.at(secs(next))), "after {at} s");
    }
}

#[test]
fn an_unresolvable_probe_is_reported_once_and_never_run() {
    let bad = Probe {
        tcp_socket: Some(TCPSocketAction { host: None, port: IntOrString::String("admin".into()) }),
        ..Probe::default()
    };
    let p = web().probe("c", Readiness, bad).probe("c", Liveness, every(0, 10));
    let mut d = Driver::new();
    let actions = shown(&d.run(&p));
    assert_eq!(
        actions[3..],
        [
            "Event Warning Unhealthy c: Readiness probe errored: port \"admin\" is not the name \
             of one of container c's ports",
            "Probe Liveness c/c-1 exec [check] 1s",
        ]
    );
    d.step(success("c-1", Liveness));
    assert_eq!(d.started_ready("c"), (Some(true), false), "never ready");
    assert_eq!(d.condition("Ready").status, "False");
    for at in [10, 20, 30] {
        assert_eq!(probe_runs(&d.tick_at(secs(at))), ["Probe Liveness c/c-1 exec [check] 1s"]);
        assert!(d.step(success("c-1", Liveness)).is_empty(), "reported once");
    }
    assert!(d.step(success("c-1", Readiness)).is_empty());
    assert_eq!(d.started_ready("c"), (Some(true), false));
}

#[test]
fn an_adopted_containers_first_probe_is_within_one_period() {
    let p = web().probe("c", Liveness, every(0, 10)).hook("c", PostStart, exec("warm-up"));
    let mut f = found("old-c", "u1", "c", 2, &p.hash("c"));
    f.started_at = Some(wall_before(secs(3600)));
    let mut d = Driver::with_found(vec![f]);
    assert_eq!(shown(&d.step(p.input())), ["TrackPod u1", "Watch old-c", "SetUpSandbox u1"]);
    let actions = d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false });
    assert!(
        shown(&actions).iter().all(|a| !a.starts_with("RunHook")),
        "its postStart ran with the earlier agent"
    );
    assert_eq!(d.started_ready("c"), (Some(true), true));
    let runs = if actions.is_empty() {
        let wake = d.wake_in().unwrap();
        assert!(wake < secs(10), "spread within a period: {wake:?}");
        d.tick_at_instant(d.wake.unwrap())
    } else {
        actions
    };
    assert_eq!(shown(&runs), ["Probe Liveness c/old-c exec [check] 1s"]);
    d.step(success("old-c", Liveness));
    assert_eq!(d.wake_in(), Some(secs(10)), "then every period");
}

// ---------------------------------------------------------------------------------------
// Readiness (P4)

#[test]
fn readiness_decides_ready_and_the_pods_conditions() {
    let ready = Probe { success_threshold: Some(2), ..every(0, 10) };
    let p = pod("u1", &[("a", "img:a"), ("b", "img:b")]).probe("a", Readiness, ready);
    let mut d = Driver::new();
    d.run(&p);
    assert_eq!(d.started_ready("a"), (Some(true), false), "not ready before it passes");
    assert_eq!(d.started_ready("b"), (Some(true), true), "no probe: ready once started");
    assert_eq!(d.phase(), "Running");
    for kind in ["Ready", "ContainersReady"] {
        let condition = d.condition(kind);
        assert_eq!(condition.status, "False", "{kind}");
        assert_eq!(condition.reason.as_deref(), Some("ContainersNotReady"));
        assert_eq!(condition.message.as_deref(), Some("containers with unready status: [a]"));
    }
    // Two successes in a row.
    assert!(d.step(success("a-1", Readiness)).is_empty());
    assert!(!d.container("a").ready);
    d.tick_at(secs(10));
    d.step(success("a-1", Readiness));
    assert_eq!(d.started_ready("a"), (Some(true), true));
    assert_eq!(d.condition("Ready").status, "True");
    assert_eq!(d.condition("ContainersReady").status, "True");
    // Three failures in a row: each is reported; the third makes it unready.
    let mut all = Vec::new();
    for (n, at) in [20, 30, 40].into_iter().enumerate() {
        all.extend(d.tick_at(secs(at)));
        assert!(d.container("a").ready, "failure {n} is below the threshold");
        let actions = d.step(failure("a-1", Readiness, "HTTP probe failed with statuscode: 503"));
        assert_eq!(
            shown(&actions),
            [
                "Event Warning Unhealthy a: Readiness probe failed: HTTP probe failed with statuscode: 503"
            ]
        );
        all.extend(actions);
    }
    assert_eq!(d.started_ready("a"), (Some(true), false));
    assert_eq!(d.condition("Ready").status, "False");
    // Readiness never restarts anything.
    assert!(
        all.iter().all(|a| !matches!(a, Action::Signal { .. } | Action::StartContainer { .. }))
    );
    assert_eq!(d.container("a").container_id.as_deref(), Some("containerd://a-1"));
    assert_eq!(d.restart_count("a"), 0);
    for at in [50, 60, 70, 80] {
        assert_eq!(probe_runs(&d.tick_at(secs(at))), ["Probe Readiness a/a-1 exec [check] 1s"]);
        d.step(failure("a-1", Readiness, "503"));
    }
    assert_eq!(d.phase(), "Running");
}

#[test]
fn a_probe_warning_counts_as_a_success_with_an_event() {
    let p = web().probe("c", Readiness, every(0, 10));
    let mut d = Driver::new();
    d.run(&p);
    let warning = Outcome::Warning("Probe terminated redirects".into());
    assert_eq!(
        shown(&d.step(probed("c-1", Readiness, warning))),
        ["Event Warning ProbeWarning c: Readiness probe warning: Probe terminated redirects"]
    );
    assert_eq!(d.started_ready("c"), (Some(true), true));
}

// ---------------------------------------------------------------------------------------
// Startup (P2)

#[test]
fn startup_gates_liveness_and_readiness() {
    let startup = Probe { failure_threshold: Some(30), ..every(0, 1) };
    let p = web().probe("c", Startup, startup).probe("c", Liveness, every(0, 10)).probe(
        "c",
        Readiness,
        every(15, 5),
    );
    let mut d = Driver::new();
    assert_eq!(probe_runs(&d.run(&p)), ["Probe Startup c/c-1 exec [check] 1s"]);
    assert_eq!(d.started_ready("c"), (Some(false), false));
    assert_eq!(d.phase(), "Running", "running, not started");
    assert_eq!(d.condition("Ready").status, "False");
    assert_eq!(
        shown(&d.step(failure("c-1", Startup, "connection refused"))),
        ["Event Warning Unhealthy c: Startup probe failed: connection refused"]
    );
    assert_eq!(d.wake_in(), Some(SECOND), "the startup probe's period; liveness waits");
    assert_eq!(shown(&d.tick_at(secs(1))), ["Probe Startup c/c-1 exec [check] 1s"]);
    // It passes: liveness (its delay over) runs at once, readiness at its delay.
    assert_eq!(shown(&d.step(success("c-1", Startup))), ["Probe Liveness c/c-1 exec [check] 1s"]);
    assert_eq!(d.started_ready("c"), (Some(true), false));
    assert_eq!(d.wake, Some(d.at(secs(15))));
    assert_eq!(shown(&d.tick_at(secs(15))), ["Probe Readiness c/c-1 exec [check] 1s"]);
    d.step(success("c-1", Readiness));
    assert_eq!(d.started_ready("c"), (Some(true), true));
    assert_eq!(d.condition("Ready").status, "True");
    // The startup probe is done for this container.
    d.step(success("c-1", Liveness));
    for at in [20, 30, 40] {
        assert!(probe_runs(&d.tick_at(secs(at))).iter().all(|r| !r.contains("Startup")));
        d.step(success("c-1", Liveness));
        d.step(success("c-1", Readiness));
    }
    assert_eq!(d.started_ready("c"), (Some(true), true));
}

#[test]
fn a_failed_startup_probe_kills_the_container() {
    let startup = Probe {
        failure_threshold: Some(2),
        termination_grace_period_seconds: Some(4),
        ..every(0, 1)
    };
    let p = web().probe("c", Startup, startup).probe("c", Liveness, every(0, 1));
    let mut d = Driver::new();
    d.run(&p);
    d.step(failure("c-1", Startup, "not yet"));
    d.tick_at(secs(1));
    let mut expected = vec![
        "Event Warning Unhealthy c: Startup probe failed: not yet",
        "Event Normal Killing c: Container c failed startup probe, will be restarted",
    ];
    expected.extend(KILL);
    assert_eq!(shown(&d.step(failure("c-1", Startup, "not yet"))), expected);
    assert_eq!(d.wake_in(), Some(secs(4)), "the probe's own grace period");
    assert!(d.tick_at(secs(4)).is_empty(), "liveness never ran");
    assert_eq!(
        shown(&d.drive(d.exit("c-1", 143))),
        [
            "DeleteTask c-1",
            "KeepDead c-1",
            "StartContainer u1/c rc=1",
            "Count ContainerRestarted file",
            "Probe Startup c/c-2 exec [check] 1s",
        ]
    );
    assert_eq!(d.started_ready("c"), (Some(false), false));
}

// ---------------------------------------------------------------------------------------
// Liveness kills (P3)

#[test]
fn a_failed_liveness_probe_kills_and_restarts_the_container() {
    let p = web().probe("c", Liveness, failing_after(2)).probe("c", Readiness, every(0, 10));
    let mut d = Driver::new();
    d.run(&p);
    d.step(success("c-1", Readiness));
    assert_eq!(
        shown(&d.step(failure("c-1", Liveness, "HTTP probe failed with statuscode: 500"))),
        [
            "Event Warning Unhealthy c: Liveness probe failed: HTTP probe failed with statuscode: 500"
        ]
    );
    assert_eq!(d.wake_in(), Some(secs(10)));
    assert_eq!(
        shown(&d.tick_at(secs(10))),
        ["Probe Liveness c/c-1 exec [check] 1s", "Probe Readiness c/c-1 exec [check] 1s"]
    );
    let mut expected = vec![
        "Event Warning Unhealthy c: Liveness probe failed: HTTP probe failed with statuscode: 500",
        LIVENESS_KILLING,
    ];
    expected.extend(KILL);
    assert_eq!(
        shown(&d.step(failure("c-1", Liveness, "HTTP probe failed with statuscode: 500"))),
        expected
    );
    assert_eq!(d.wake_in(), Some(secs(30)), "the pod's grace period");
    // While it is killed: no probes, results ignored.
    assert!(d.step(success("c-1", Readiness)).is_empty());
    assert!(d.step(failure("c-1", Liveness, "again")).is_empty());
    assert!(d.tick_at(secs(40) - NS).is_empty());
    assert_eq!(
        shown(&d.drive(d.exit("c-1", 143))),
        [
            "DeleteTask c-1",
            "KeepDead c-1",
            "StartContainer u1/c rc=1",
            "Count ContainerRestarted file",
            "Probe Liveness c/c-2 exec [check] 1s",
            "Probe Readiness c/c-2 exec [check] 1s",
        ]
    );
    assert_eq!(d.restart_count("c"), 1);
    let last = d.last_terminated("c");
    assert_eq!((last.exit_code, last.reason.as_deref()), (143, Some("Error")));
    assert_eq!(d.started_ready("c"), (Some(true), false), "the new container is not ready yet");

    // Killed again: CrashLoopBackOff applies.
    d.step(failure("c-2", Liveness, "500"));
    d.tick_at(secs(50));
    assert_eq!(shown(&d.step(failure("c-2", Liveness, "500")))[1], LIVENESS_KILLING);
    assert_eq!(
        shown(&d.step(d.exit("c-2", 137))),
        [
            "DeleteTask c-2",
            "RecordExit c-2 137 Error",
            format!("Event Warning BackOff c: {CRASH_MESSAGE}").as_str(),
        ]
    );
    assert_eq!(d.waiting("c").reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(d.wake_in(), Some(SECOND));
}

#[test]
fn a_container_deaf_to_sigterm_is_killed_at_the_probes_grace_period() {
    let probe = Probe { termination_grace_period_seconds: Some(5), ..failing_after(1) };
    let p = web().probe("c", Liveness, probe).grace(60);
    let mut d = Driver::new();
    d.run(&p);
    d.set_time(secs(1));
    let actions = shown(&d.step(failure("c-1", Liveness, "timeout")));
    assert_eq!(actions[1..], [LIVENESS_KILLING, KILL[0], KILL[1]]);
    assert_eq!(d.wake_in(), Some(secs(5)), "the probe's grace period, not the pod's");
    assert!(d.tick_at(secs(6) - NS).is_empty());
    assert_eq!(shown(&d.tick_at(secs(6))), ["Signal Kill c-1", "CheckExited c-1"]);
    assert_eq!(d.wake_in(), Some(KILL_WAIT));
    // No exit reported: taken as killed, and restarted.
    assert!(d.tick_at(secs(6) + KILL_WAIT - NS).is_empty());
    let actions = shown(&d.tick_at(secs(6) + KILL_WAIT));
    assert_eq!(
        actions[..4],
        [
            "DeleteTask c-1",
            "KeepDead c-1",
            "StartContainer u1/c rc=1",
            "Count ContainerRestarted file",
        ]
    );
    assert_eq!(d.last_terminated("c").exit_code, 137);
}

#[test]
fn the_restart_policy_decides_after_a_probe_kill() {
    // kubelet restarts a container its liveness probe killed unless the policy is Never,
    // whatever its exit code. (policy, exit code, restarted, phase)
    let cases = [
        ("Always", 143, true, "Running"),
        ("Always", 0, true, "Running"),
        ("OnFailure", 0, true, "Running"),
        ("OnFailure", 137, true, "Running"),
        ("Never", 0, false, "Succeeded"),
        ("Never", 143, false, "Failed"),
    ];
    for kind in [Liveness, Startup] {
        for (policy, code, restarted, phase) in cases {
            let case = format!("{kind:?}, {policy}, exit {code}");
            let p = web().policy(policy).probe("c", kind, failing_after(1));
            let mut d = Driver::new();
            d.run(&p);
            let actions = shown(&d.step(failure("c-1", kind, "x")));
            assert_eq!(actions[2..], KILL, "{case}");
            let actions = shown(&d.step(d.exit("c-1", code)));
            if restarted {
                assert_eq!(actions.last().unwrap(), "StartContainer u1/c rc=1", "{case}");
            } else {
                assert_eq!(
                    actions,
                    [
                        "DeleteTask c-1".to_owned(),
                        format!(
                            "RecordExit c-1 {code} {}",
                            if code == 0 { "Completed" } else { "Error" }
                        ),
                        "ReleaseVolumes u1".to_owned(),
                    ],
                    "{case}"
                );
                assert_eq!(d.terminated("c").exit_code, code, "{case}");
                assert_eq!(d.wake, None, "{case}");
            }
            assert_eq!(d.phase(), phase, "{case}");
        }
    }
}

#[test]
fn a_probe_kill_leaves_the_other_containers_probes_running() {
    let p = pod("u1", &[("a", "img:a"), ("b", "img:b")])
        .probe("a", Liveness, failing_after(1))
        .probe("b", Readiness, every(0, 4));
    let mut d = Driver::new();
    d.run(&p);
    d.step(success("b-2", Readiness));
    d.set_time(secs(1));
    let actions = shown(&d.step(failure("a-1", Liveness, "x")));
    assert_eq!(actions[2..], ["Signal Term a-1", "CheckExited a-1"]);
    assert_eq!(d.wake_in(), Some(secs(3)), "b's next probe comes before a's deadline (31 s)");
    assert_eq!(shown(&d.tick_at(secs(4))), ["Probe Readiness b/b-2 exec [check] 1s"]);
    d.step(success("b-2", Readiness));
    assert_eq!(d.started_ready("b"), (Some(true), true));
    assert_eq!(d.wake, Some(d.at(secs(8))));
}

// ---------------------------------------------------------------------------------------
// Stops

#[test]
fn probe_results_during_a_stop_are_ignored() {
    let p = web().probe("c", Liveness, failing_after(1)).probe("c", Readiness, every(0, 10));
    for stop in [undesired(), pod("u2", &[("c", "img:2")]).input(), Input::Shutdown] {
        let mut d = Driver::new();
        d.run(&p);
        let actions = shown(&d.step(stop.clone()));
        assert!(actions.contains(&"Signal Term c-1".to_owned()), "{actions:?}");
        let deadline = d.wake;
        assert!(d.step(failure("c-1", Liveness, "x")).is_empty(), "no event, no second kill");
        assert!(d.step(success("c-1", Readiness)).is_empty());
        assert_eq!(d.wake, deadline, "only the stop's deadline");
        assert!(d.tick_at(secs(29)).is_empty(), "no probes while stopping");
    }
}
