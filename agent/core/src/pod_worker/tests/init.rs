//! Init containers (I1, I2), sidecars (I3) and the active deadline through the pod
//! worker's step: the order containers start in, what gates them, what restarts, the
//! order they stop in, and the phase and conditions the status shows meanwhile.

use k8s_openapi::api::core::v1::{Container, ExecAction, Probe};

use super::*;
use crate::probe::{Outcome, ProbeKind};

/// Init containers on a pod under construction.
pub(super) trait Initializing {
    /// An init container; `sidecar`: with `restartPolicy: Always`.
    fn init(self, name: &str, sidecar: bool) -> P;
    fn startup_probe(self, init_container: &str) -> P;
    fn deadline(self, seconds: i64) -> P;
}

impl Initializing for P {
    fn init(mut self, name: &str, sidecar: bool) -> P {
        let container = Container {
            name: name.into(),
            image: Some("busybox:1".into()),
            restart_policy: sidecar.then(|| "Always".into()),
            ..Container::default()
        };
        self.spec().init_containers.get_or_insert_with(Vec::new).push(container);
        self
    }

    fn startup_probe(mut self, init_container: &str) -> P {
        let inits = self.spec().init_containers.as_mut().unwrap();
        let c = inits.iter_mut().find(|c| c.name == init_container).unwrap();
        c.startup_probe = Some(Probe {
            exec: Some(ExecAction {
                command: Some(vec!["test".into(), "-f".into(), "/ok".into()]),
            }),
            period_seconds: Some(1),
            ..Probe::default()
        });
        self
    }

    fn deadline(mut self, seconds: i64) -> P {
        self.spec().active_deadline_seconds = Some(seconds);
        self
    }
}

impl Driver {
    fn init_status(&self, name: &str) -> ContainerStatus {
        let statuses = self.status().init_container_statuses.unwrap();
        statuses.into_iter().find(|c| c.name == name).unwrap()
    }

    fn init_waiting(&self, name: &str) -> Option<String> {
        self.init_status(name).state.unwrap().waiting.and_then(|w| w.reason)
    }
}

/// `web` with init containers `a` and `b` before its app container `c`.
fn two_inits() -> P {
    web().init("a", false).init("b", false)
}

#[test]
fn i1_init_containers_run_one_at_a_time_in_order_then_the_app_containers() {
    let mut d = Driver::new();
    assert_eq!(started(&d.drive(two_inits().input())), ["a"]);
    assert_eq!(d.phase(), "Pending");
    let initialized = d.condition("Initialized");
    assert_eq!(initialized.status, "False");
    assert_eq!(initialized.reason.as_deref(), Some("ContainersNotInitialized"));
    assert_eq!(
        initialized.message.as_deref(),
        Some("containers with incomplete status: [a b]"),
        "a is not done: running is not completed"
    );
    assert_eq!(d.init_waiting("b").as_deref(), Some("PodInitializing"));
    assert_eq!(d.waiting("c").reason.as_deref(), Some("PodInitializing"));
    assert!(d.status().container_statuses.unwrap().iter().all(|c| c.name == "c"));

    d.pass(secs(2));
    assert_eq!(started(&d.drive(d.exit("a-1", 0))), ["b"], "b once a succeeded");
    let a = d.init_status("a");
    assert_eq!(a.state.unwrap().terminated.unwrap().reason.as_deref(), Some("Completed"));
    assert!(a.ready, "a completed init container reports ready");
    assert_eq!(
        d.condition("Initialized").message.as_deref(),
        Some("containers with incomplete status: [b]")
    );

    assert_eq!(started(&d.drive(d.exit("b-2", 0))), ["c"], "the app once every init succeeded");
    assert_eq!(d.condition("Initialized").status, "True");
    assert_eq!(d.condition("Ready").status, "True", "init containers do not count for readiness");
    assert_eq!(d.phase(), "Running");
    // They never run again (I2): a tick later nothing starts.
    d.pass(secs(60));
    assert!(started(&d.drive(Input::Tick)).is_empty());
}

#[test]
fn i2_a_failed_init_container_is_retried_with_crash_loop_backoff_and_nothing_after_it_starts() {
    let mut d = Driver::new();
    d.drive(two_inits().input());
    d.pass(secs(1));
    assert_eq!(started(&d.drive(d.exit("a-1", 1))), ["a"], "the first restart is immediate");
    assert_eq!(d.init_status("a").restart_count, 1);
    d.pass(secs(1));
    assert!(started(&d.drive(d.exit("a-2", 1))).is_empty(), "then it backs off");
    assert_eq!(d.init_waiting("a").as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(d.init_status("a").last_state.unwrap().terminated.unwrap().exit_code, 1);
    assert_eq!(d.phase(), "Pending");
    assert_eq!(d.wake_in(), Some(secs(1)));
    assert_eq!(started(&d.tick_at(secs(3))), ["a"]);
    assert_eq!(d.init_waiting("b").as_deref(), Some("PodInitializing"));
    assert_eq!(d.waiting("c").reason.as_deref(), Some("PodInitializing"));
}

#[test]
fn i2_under_restart_policy_never_a_failed_init_container_fails_the_pod() {
    let mut d = Driver::new();
    d.drive(two_inits().policy("Never").input());
    d.pass(secs(1));
    let actions = d.drive(d.exit("a-1", 2));
    assert!(started(&actions).is_empty());
    assert_eq!(d.phase(), "Failed");
    assert_eq!(
        d.init_status("a").state.unwrap().terminated.unwrap().reason.as_deref(),
        Some("Error")
    );
    assert_eq!(d.condition("Initialized").status, "False");
    assert_eq!(d.wake, None, "nothing more is due");
    d.pass(secs(600));
    assert!(started(&d.drive(Input::Tick)).is_empty());
}

/// What an earlier run left of `two_inits`: both init containers completed, the app
/// container `c` in `app`'s state.
fn left_by_an_earlier_run(app: FoundTask) -> Vec<Found> {
    let p = two_inits();
    let spec = p.0.spec.as_ref().unwrap();
    let inits = spec.init_containers.as_ref().unwrap();
    let completed = |id: &str, c: &Container| Found {
        task: FoundTask::NotRunning { exit_code: 0, exited_at: Some(wall_before(secs(60))) },
        ..found(id, "u1", &c.name, 0, &container_hash(c))
    };
    vec![
        completed("old-a", &inits[0]),
        completed("old-b", &inits[1]),
        Found { task: app, ..found("old-c", "u1", "c", 0, &p.hash("c")) },
    ]
}

#[test]
fn i2_completed_init_containers_do_not_run_again_while_the_sandbox_lives() {
    let mut d = Driver::with_found(left_by_an_earlier_run(FoundTask::Running));
    let actions = d.drive(two_inits().input());
    assert!(started(&actions).is_empty(), "{:?}", shown(&actions));
    assert_eq!(d.condition("Initialized").status, "True");
    assert_eq!(d.init_status("a").state.unwrap().terminated.unwrap().exit_code, 0);
    // The app container exits after the agent restart: it alone restarts.
    d.pass(secs(5));
    assert_eq!(started(&d.drive(d.exit("old-c", 1))), ["c"]);
}

#[test]
fn i2_a_new_sandbox_runs_every_init_container_again() {
    let exited = FoundTask::NotRunning { exit_code: 0, exited_at: Some(wall_before(secs(30))) };
    let mut d = Driver::with_found(left_by_an_earlier_run(exited));
    let actions = d.step(two_inits().input());
    assert!(shown(&actions).contains(&"SetUpSandbox u1".to_owned()));
    let actions = d.drive(Input::SandboxReady { ips: vec![pod_ip()], fresh: true });
    let shown = shown(&actions);
    assert!(shown.contains(&"KeepDead old-a".to_owned()), "{shown:?}");
    assert!(shown.contains(&"KeepDead old-b".to_owned()), "{shown:?}");
    assert_eq!(started(&actions), ["a"], "the init containers first, the app waits");
    assert_eq!(d.condition("Initialized").status, "False");
}

#[test]
fn i3_a_sidecar_starts_in_its_turn_and_gates_the_next_until_its_startup_probe_passed() {
    let p = web().init("a", false).init("proxy", true).startup_probe("proxy").init("b", false);
    let mut d = Driver::new();
    assert_eq!(started(&d.drive(p.input())), ["a"]);
    d.pass(secs(1));
    let mut actions = d.drive(d.exit("a-1", 0));
    assert_eq!(started(&actions), ["proxy"]);
    assert!(!d.init_status("proxy").started.unwrap());
    // Its startup probe runs; b waits for it to pass.
    d.pass(secs(1));
    let tick = d.drive(Input::Tick);
    assert!(started(&tick).is_empty(), "b waits");
    actions.extend(tick);
    let probes =
        actions.iter().filter(|a| matches!(a, Action::Probe { kind: ProbeKind::Startup, .. }));
    assert!(probes.count() >= 1, "the sidecar's startup probe runs");
    let passed = Input::Probed {
        container_id: "proxy-2".into(),
        kind: ProbeKind::Startup,
        outcome: Outcome::Success,
    };
    assert_eq!(started(&d.drive(passed)), ["b"], "b once the sidecar started");
    assert!(d.init_status("proxy").started.unwrap());
    assert_eq!(started(&d.drive(d.exit("b-3", 0))), ["c"]);
    assert_eq!(d.phase(), "Running");
    assert!(d.init_status("proxy").ready, "a sidecar without a readiness probe is ready");
}

#[test]
fn i3_a_sidecar_without_a_startup_probe_gates_nothing_once_running() {
    let mut d = Driver::new();
    let actions = d.drive(web().init("log", true).input());
    assert_eq!(started(&actions), ["log", "c"]);
}

#[test]
fn i3_a_sidecar_is_restarted_on_exit_whatever_the_pods_policy() {
    for policy in ["Always", "OnFailure", "Never"] {
        let mut d = Driver::new();
        d.drive(web().init("log", true).policy(policy).input());
        d.pass(secs(3));
        assert_eq!(started(&d.drive(d.exit("log-1", 0))), ["log"], "{policy}");
        assert_eq!(d.init_status("log").restart_count, 1, "{policy}");
        assert_eq!(d.phase(), "Running", "{policy}");
    }
}

#[test]
fn i3_a_pod_completes_while_its_sidecar_runs_and_the_sidecar_then_stops() {
    let mut d = Driver::new();
    d.drive(web().init("log", true).policy("Never").input());
    d.pass(secs(3));
    let actions = d.drive(d.exit("c-2", 0));
    assert_eq!(d.phase(), "Succeeded", "the app containers decide, not the sidecar");
    assert_eq!(signalled(&actions), ["Term log-1"], "the sidecar stops");
    let actions = d.drive(d.exit("log-1", 143));
    assert!(started(&actions).is_empty(), "and is not restarted");
    assert_eq!(d.init_status("log").state.unwrap().terminated.unwrap().exit_code, 143);
    assert_eq!(d.phase(), "Succeeded");
    assert_eq!(d.wake, None);
}

#[test]
fn i3_sidecars_of_a_completed_pod_stop_in_reverse_order() {
    let mut d = Driver::new();
    d.drive(web().init("s1", true).init("s2", true).policy("OnFailure").input());
    d.pass(secs(3));
    assert_eq!(signalled(&d.drive(d.exit("c-3", 0))), ["Term s2-2"], "the last declared first");
    assert_eq!(signalled(&d.drive(d.exit("s2-2", 0))), ["Term s1-1"]);
    d.drive(d.exit("s1-1", 0));
    assert_eq!(d.phase(), "Succeeded");
}

#[test]
fn i3_sidecars_stop_after_the_app_containers_in_reverse_order_when_the_pod_goes() {
    let mut d = Driver::new();
    d.drive(web().init("s1", true).init("s2", true).grace(30).input());
    d.pass(secs(1));
    let actions = d.step(undesired());
    assert_eq!(signalled(&actions), ["Term c-3"], "app containers first");
    d.pass(secs(1));
    assert_eq!(signalled(&d.step(d.exit("c-3", 0))), ["Term s2-2"]);
    assert_eq!(signalled(&d.step(d.exit("s2-2", 0))), ["Term s1-1"]);
    let shown = shown(&d.step(d.exit("s1-1", 0)));
    assert!(shown.contains(&"TearDownSandbox u1".to_owned()), "{shown:?}");
}

#[test]
fn i3_sidecars_still_running_when_the_grace_period_ends_are_killed() {
    let mut d = Driver::new();
    d.drive(web().init("s1", true).init("s2", true).grace(10).input());
    let actions = d.step(undesired());
    assert_eq!(signalled(&actions), ["Term c-3"]);
    d.pass(secs(4));
    assert_eq!(signalled(&d.step(d.exit("c-3", 0))), ["Term s2-2"]);
    // s2 ignores SIGTERM: at the end of the pod's grace period both get SIGKILL.
    assert_eq!(d.wake_in(), Some(secs(6)));
    d.pass(secs(6));
    assert_eq!(signalled(&d.step(Input::Tick)), ["Kill s1-1,s2-2"]);
}

#[test]
fn the_active_deadline_fails_the_pod_and_stops_its_containers_for_good() {
    let mut d = Driver::new();
    d.drive(web().init("log", true).deadline(30).input());
    assert_eq!(d.wake_in(), Some(secs(30)));
    d.pass(secs(30));
    let actions = d.drive(Input::Tick);
    let shown = shown(&actions);
    assert!(
        shown.contains(&format!(
            "Event Warning DeadlineExceeded -: {}",
            super::super::sync::DEADLINE_MESSAGE
        )),
        "{shown:?}"
    );
    assert_eq!(signalled(&actions), ["Term c-2"], "app containers first");
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
    assert_eq!(signalled(&d.drive(d.exit("c-2", 143))), ["Term log-1"]);
    assert!(started(&d.drive(d.exit("log-1", 143))).is_empty(), "nothing restarts");
    assert_eq!(d.terminated("c").exit_code, 143);
    assert_eq!(d.phase(), "Failed");
}
