//! Exits reported by both the kernel and containerd, the OOM killer, and node shutdown.

use super::*;

#[test]
fn the_kernels_exit_first_decides_once() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(d.exit("c-1", 1)); // the immediate restart
    d.pass(secs(1));
    assert_eq!(
        shown(&d.step(d.kernel_exit("c-2", 137, Some(9)))),
        [
            "DeleteTask c-2 reap".to_owned(),
            "RecordExit c-2 137 Error".to_owned(),
            format!("Event Warning BackOff c: {CRASH_MESSAGE}"),
        ]
    );
    assert_eq!(d.wake_in(), Some(SECOND));
    assert!(d.step(d.exit("c-2", 137)).is_empty(), "containerd's word changes nothing");
    assert_eq!(d.wake_in(), Some(SECOND));
    assert_eq!(d.last_terminated("c").signal, Some(9));
    assert_eq!(
        shown(&d.tick_at(secs(2))),
        ["KeepDead c-2", "StartContainer u1/c rc=2", "Count ContainerRestarted file"]
    );
}

#[test]
fn containerds_exit_first_then_the_kernel_only_adds_the_signal() {
    let mut d = Driver::new();
    d.run(&web());
    assert_eq!(
        shown(&d.step(d.exit("c-1", 137))),
        ["DeleteTask c-1", "KeepDead c-1", "StartContainer u1/c rc=1"]
    );
    assert_eq!(d.last_terminated("c").signal, None);
    assert!(d.step(d.kernel_exit("c-1", 137, Some(9))).is_empty());
    assert_eq!(d.last_terminated("c").signal, Some(9));
    assert!(d.step(d.kernel_exit("c-1", 143, Some(15))).is_empty());
    assert_eq!(d.last_terminated("c").signal, Some(9), "the first signal known stays");
    // Not restarted (Never): the terminated state gets it.
    let mut d = Driver::new();
    d.run(&web().policy("Never"));
    d.step(d.exit("c-1", 143));
    assert!(d.step(d.kernel_exit("c-1", 143, Some(15))).is_empty());
    let t = d.terminated("c");
    assert_eq!((t.exit_code, t.signal), (143, Some(15)));
}

// ---------------------------------------------------------------------------------------
// The OOM killer

const OOM_EVENT: &str = "Event Warning OOMKilled c: Container c was killed by the kernel: out of memory (it chose pid 42 (tail))";

#[test]
fn an_oom_kill_before_the_exit_names_the_victim() {
    let mut d = Driver::new();
    d.run(&web().policy("Never"));
    assert!(d.step(oom("c-1", Some("pid 42 (tail)"))).is_empty());
    assert_eq!(
        shown(&d.step(d.exit("c-1", 137))),
        [OOM_EVENT, "DeleteTask c-1", "RecordExit c-1 137 OOMKilled", "ReleaseVolumes u1"]
    );
    let t = d.terminated("c");
    assert_eq!(t.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(t.message.as_deref(), Some("The OOM killer chose pid 42 (tail)"));
}

#[test]
fn containerds_oom_then_the_kernels_still_names_the_victim() {
    for order in [[None, Some("pid 42 (tail)")], [Some("pid 42 (tail)"), None]] {
        let mut d = Driver::new();
        d.run(&web());
        for victim in order {
            assert!(d.step(oom("c-1", victim)).is_empty());
        }
        let actions = shown(&d.step(d.exit("c-1", 137)));
        assert_eq!(actions[0], OOM_EVENT, "{order:?}");
        let last = d.last_terminated("c");
        assert_eq!(last.reason.as_deref(), Some("OOMKilled"));
        assert_eq!(last.message.as_deref(), Some("The OOM killer chose pid 42 (tail)"));
    }
}

#[test]
fn an_oom_kill_without_a_victim_is_still_oomkilled() {
    let mut d = Driver::new();
    d.run(&web());
    d.step(oom("c-1", None));
    let actions = shown(&d.step(d.exit("c-1", 137)));
    assert_eq!(
        actions[0],
        "Event Warning OOMKilled c: Container c was killed by the kernel: out of memory"
    );
    let last = d.last_terminated("c");
    assert_eq!((last.reason.as_deref(), last.message), (Some("OOMKilled"), None));
}

#[test]
fn a_late_kernel_oom_corrects_the_reason() {
    let mut d = Driver::new();
    d.run(&web());
    d.step(d.exit("c-1", 137));
    assert_eq!(d.last_terminated("c").reason.as_deref(), Some("Error"));
    assert!(d.step(oom("c-1", None)).is_empty(), "containerd's late word has no victim");
    assert_eq!(d.last_terminated("c").reason.as_deref(), Some("Error"));
    assert!(d.step(oom("c-1", Some("pid 42 (tail)"))).is_empty());
    let last = d.last_terminated("c");
    assert_eq!(last.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(last.message.as_deref(), Some("The OOM killer chose pid 42 (tail)"));
}

#[test]
fn an_oom_kill_counts_for_one_run_only() {
    let mut d = Driver::new();
    d.run(&web());
    d.step(oom("c-1", Some("pid 42 (tail)")));
    d.drive(d.exit("c-1", 137));
    d.pass(secs(1));
    let actions = shown(&d.step(d.exit("c-2", 1)));
    assert!(!actions.iter().any(|a| a.contains("OOMKilled")), "{actions:?}");
    assert_eq!(d.last_terminated("c").reason.as_deref(), Some("Error"));
}

// ---------------------------------------------------------------------------------------
// Node shutdown

#[test]
fn shutdown_stops_the_pod_and_leaves_its_containers() {
    let (mut d, p) = running_pair(Some(15));
    d.set_time(secs(1));
    assert_eq!(shown(&d.step(Input::Shutdown)), ["Signal Term a-1,b-2", "CheckExited a-1,b-2"]);
    assert_eq!(d.wake_in(), Some(secs(15)));
    assert!(!d.w.is_done());
    assert!(d.step(d.kernel_exit("a-1", 0, None)).is_empty());
    assert!(d.step(d.exit("a-1", 0)).is_empty());
    assert!(d.step(d.exit("b-2", 143)).is_empty(), "nothing removed");
    assert!(d.w.is_done());
    assert_eq!(d.wake, None);
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Terminated"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was terminated in response to imminent node shutdown.")
    );
    let disruption = d.condition("DisruptionTarget");
    assert_eq!(disruption.status, "True");
    assert_eq!(disruption.reason.as_deref(), Some("TerminationByKubelet"));
    let a = d.terminated("a");
    assert_eq!((a.exit_code, a.reason.as_deref()), (0, Some("Completed")));
    let b = d.terminated("b");
    assert_eq!((b.exit_code, b.reason.as_deref()), (143, Some("Error")));
    assert_eq!(d.restart_count("b"), 0, "not restarted");
    // Nothing more happens.
    assert!(d.step(pod("u2", &[("a", "img:a")]).input()).is_empty());
    assert!(d.step(p.input()).is_empty());
    assert!(d.step(Input::Tick).is_empty());
    assert!(d.step(Input::Shutdown).is_empty());
}

#[test]
fn shutdown_kills_after_the_grace_period_and_counts_them_killed() {
    let (mut d, _) = running_pair(None);
    d.step(Input::Shutdown);
    assert_eq!(shown(&d.tick_at(secs(30))), ["Signal Kill a-1,b-2"]);
    d.step(d.exit("a-1", 137));
    assert!(d.tick_at(secs(40)).is_empty(), "no removal");
    assert!(d.w.is_done());
    let b = d.terminated("b");
    assert_eq!((b.exit_code, b.reason.as_deref()), (137, Some("Error")));
    assert_eq!(b.finished_at, Some(Time(wall(secs(40)))));
    assert_eq!(d.phase(), "Failed");
}

#[test]
fn shutdown_waits_for_a_start_under_way_and_stops_it_too() {
    let mut d = starting(&pod("u1", &[("a", "img:a"), ("b", "img:b")]));
    d.step(d.started("a", "a-1"));
    assert!(d.step(Input::Shutdown).is_empty(), "b's start reports first");
    assert_eq!(d.wake, None);
    assert_eq!(
        shown(&d.step(d.started("b", "b-2"))),
        ["Signal Term a-1,b-2", "CheckExited a-1,b-2"]
    );
    d.step(d.exit("a-1", 0));
    d.step(d.exit("b-2", 0));
    assert!(d.w.is_done());
    assert!(d.terminated("b").exit_code == 0 && d.terminated("a").exit_code == 0);
}

#[test]
fn shutdown_while_backing_off_asks_for_no_wake() {
    let mut d = Driver::new();
    d.run(&pod("u1", &[("a", "img:a"), ("b", "img:b")]));
    d.drive(d.exit("b-2", 1));
    d.step(d.exit("b-3", 1));
    assert_eq!(d.wake_in(), Some(SECOND));
    d.step(Input::Shutdown);
    assert_eq!(shown(&d.step(d.exit("a-1", 0))), [] as [&str; 0]);
    assert!(d.w.is_done());
    assert_eq!(d.wake, None, "b's restart is not due any more");
    assert_eq!(d.waiting("b").reason.as_deref(), Some("CrashLoopBackOff"));
    assert!(d.tick_at(secs(5)).is_empty());
}

#[test]
fn shutdown_without_a_pod_is_done_at_once() {
    let mut d = Driver::new();
    assert!(d.step(Input::Shutdown).is_empty());
    assert!(d.w.is_done());
    assert!(d.step(web().input()).is_empty(), "nothing starts after a shutdown");
    assert!(d.w.is_done());
}
