//! Stopping a pod (grace periods, hooks, SIGKILL), and M10: a replaced pod stops before the new one starts.

use super::*;

#[test]
fn a_pod_no_longer_desired_stops_gracefully_and_is_removed() {
    let (mut d, _) = running_pair(Some(20));
    d.set_time(secs(10));
    assert_eq!(shown(&d.step(undesired())), STOP_PAIR);
    assert_eq!(d.wake, Some(d.at(secs(30))), "the grace period");
    assert!(!d.w.is_done());
    assert!(d.w.status(wall0()).is_none() && d.w.uid().is_none());
    assert!(d.step(d.exit("a-1", 143)).is_empty());
    assert_eq!(d.wake, Some(d.at(secs(30))));
    assert!(d.step(Input::Tick).is_empty());
    d.pass(secs(3));
    assert_eq!(shown(&d.step(d.exit("b-2", 0))), REMOVE_PAIR);
    assert!(d.w.is_done());
    assert_eq!(d.wake, None);
}

#[test]
fn the_grace_period_defaults_and_a_shorter_deletion_grace_wins() {
    // (terminationGracePeriodSeconds, deletionGracePeriodSeconds when deleted, wait)
    let cases = [
        (None, None, 30),
        (Some(10), None, 10),
        (Some(30), Some(Some(5)), 5),
        (Some(10), Some(Some(60)), 10),
        (None, Some(Some(3)), 3),
        (Some(12), Some(None), 12),
    ];
    for (grace, deletion, wait) in cases {
        let case = format!("grace {grace:?}, deletion {deletion:?}");
        let (mut d, p) = running_pair(grace);
        d.set_time(secs(1));
        let input = match deletion {
            Some(g) => p.clone().deleting(g).input(),
            None => undesired(),
        };
        assert_eq!(shown(&d.step(input)), STOP_PAIR, "{case}");
        assert_eq!(d.wake_in(), Some(secs(wait)), "{case}");
        d.step(d.exit("a-1", 0));
        assert_eq!(shown(&d.step(d.exit("b-2", 0))), REMOVE_PAIR, "{case}");
        // A deleted pod stays desired (deleting) until the source drops it.
        assert_eq!(d.w.is_done(), deletion.is_none(), "{case}");
        assert!(d.step(Input::Tick).is_empty(), "{case}");
        assert!(shown(&d.step(undesired())).is_empty());
        assert!(d.w.is_done(), "{case}");
    }
}

#[test]
fn no_exit_by_the_deadline_is_killed_then_removed_anyway() {
    let (mut d, _) = running_pair(None);
    d.step(undesired());
    let deadline = d.wake.unwrap();
    assert_eq!(deadline, d.at(secs(30)));
    assert!(d.tick_at_instant(deadline - NS).is_empty());
    assert_eq!(shown(&d.tick_at_instant(deadline)), ["Signal Kill a-1,b-2"]);
    assert_eq!(d.wake, Some(deadline + KILL_WAIT));
    assert!(d.step(d.exit("a-1", 137)).is_empty(), "b still awaited");
    assert!(d.tick_at_instant(deadline + KILL_WAIT - NS).is_empty());
    assert_eq!(shown(&d.tick_at_instant(deadline + KILL_WAIT)), REMOVE_PAIR);
    assert!(d.w.is_done());
}

#[test]
fn a_kill_goes_only_to_what_has_not_exited() {
    let (mut d, _) = running_pair(Some(5));
    d.step(undesired());
    d.step(d.exit("b-2", 0));
    assert_eq!(shown(&d.tick_at(secs(5))), ["Signal Kill a-1"]);
    assert_eq!(shown(&d.step(d.exit("a-1", 137))), REMOVE_PAIR);
}

#[test]
fn the_kernels_exit_does_not_end_a_stops_wait() {
    let (mut d, _) = running_pair(None);
    d.step(undesired());
    assert!(d.step(d.kernel_exit("a-1", 143, Some(15))).is_empty());
    assert!(d.step(d.kernel_exit("b-2", 143, Some(15))).is_empty());
    assert_eq!(d.wake_in(), Some(secs(30)), "still waiting for containerd");
    assert!(d.step(d.exit("a-1", 143)).is_empty());
    assert_eq!(shown(&d.step(d.exit("b-2", 143))), REMOVE_PAIR);
}

#[test]
fn a_pod_with_nothing_running_is_removed_at_once() {
    let mut d = Driver::new();
    d.run(&web().policy("Never"));
    d.step(d.exit("c-1", 0));
    assert_eq!(
        shown(&d.step(undesired())),
        ["RemoveContainer c-1", "TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"]
    );
    assert!(d.w.is_done());
}

#[test]
fn a_pod_backing_off_is_removed_with_its_exited_container() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(d.exit("c-1", 1));
    d.step(d.exit("c-2", 1));
    assert_eq!(d.waiting("c").reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(
        shown(&d.step(undesired())),
        ["RemoveContainer c-2", "TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"]
    );
    assert_eq!(d.wake, None, "no restart is due any more");
    assert!(d.w.is_done());
}

#[test]
fn a_stop_waits_for_the_sandbox_being_set_up() {
    let mut d = Driver::new();
    d.step(web().input());
    assert!(d.step(undesired()).is_empty(), "the sandbox's result first");
    assert!(!d.w.is_done());
    assert_eq!(
        shown(&d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false })),
        ["TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"]
    );
    assert!(d.w.is_done());
}

#[test]
fn a_stop_waits_for_a_start_under_way_and_stops_what_it_started() {
    let mut d = starting(&web().grace(7));
    assert!(d.step(undesired()).is_empty(), "the start's result first");
    assert_eq!(d.wake, None);
    d.pass(secs(2));
    assert_eq!(
        shown(&d.step(d.started("c", "c-1"))),
        ["Event Normal Killing c: Stopping container c", "Signal Term c-1", "CheckExited c-1"]
    );
    assert_eq!(d.wake_in(), Some(secs(7)));
    assert_eq!(
        shown(&d.step(d.exit("c-1", 143))),
        ["RemoveContainer c-1", "TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"]
    );
    assert!(d.w.is_done());
    // A failed start leaves nothing to stop.
    let mut d = starting(&web());
    assert!(d.step(undesired()).is_empty());
    assert_eq!(
        shown(&d.step(pull_failed("denied"))),
        [
            "Event Warning Failed c: Error: ErrImagePull",
            "TearDownSandbox u1",
            "RemoveStatus u1",
            "ForgetPod u1",
        ]
    );
    assert!(d.w.is_done());
}

// ---------------------------------------------------------------------------------------
// M10: a replaced pod stops before the new one starts

#[test]
fn m10_the_old_pod_stops_before_the_new_one_starts() {
    // M10: the new pod's containers start only after the old pod with the same full name
    // has stopped.
    let (mut d, _) = running_pair(Some(30));
    d.set_time(secs(1));
    let new = pod("u2", &[("a", "img:a2")]);
    assert_eq!(shown(&d.drive(new.input())), STOP_PAIR);
    assert_eq!(d.wake, Some(d.at(secs(31))));
    // Updates meanwhile (another spec, even another UID) wait for the stop.
    assert!(d.drive(new.clone().image("a", "img:a3").input()).is_empty());
    let newest = pod("u3", &[("a", "img:a4")]);
    assert!(d.drive(newest.input()).is_empty());
    // containerd restarted: the containers the stop waits for are looked at again.
    assert_eq!(shown(&d.step(Input::Resync)), ["CheckExited a-1,b-2"]);
    assert!(d.tick_at(secs(31) - NS).is_empty());
    assert!(d.drive(d.exit("a-1", 0)).is_empty());
    let actions = d.drive(d.exit("b-2", 0));
    assert_eq!(
        shown(&actions),
        [
            "RemoveContainer a-1",
            "RemoveContainer b-2",
            "TearDownSandbox u1",
            "RemoveStatus u1",
            "ForgetPod u1",
            "TrackPod u3",
            "SetUpSandbox u3",
            "StartContainer u3/a rc=0",
        ]
    );
    assert_eq!(d.w.uid(), Some("u3"));
    assert_eq!(d.container("a").image, "img:a4");
    assert_eq!(d.container("a").restart_count, 0, "a new pod's containers count anew");
}

#[test]
fn m10_a_replaced_pod_stops_with_its_own_grace_period() {
    // M10 (and kubelet): the old pod is killed with its own grace period, not the new
    // pod's.
    let (mut d, _) = running_pair(Some(5));
    assert_eq!(shown(&d.step(pod("u2", &[("a", "img:a")]).grace(60).input())), STOP_PAIR);
    assert_eq!(d.wake_in(), Some(secs(5)));
    assert_eq!(shown(&d.tick_at(secs(5))), ["Signal Kill a-1,b-2"]);
}

#[test]
fn m10_nothing_new_starts_while_the_old_pod_is_killed() {
    // M10, through SIGKILL and KILL_WAIT.
    let (mut d, _) = running_pair(Some(2));
    d.drive(pod("u2", &[("a", "img:a")]).input());
    assert_eq!(shown(&d.tick_at(secs(2))), ["Signal Kill a-1,b-2"]);
    assert!(d.drive(d.kernel_exit("a-1", 137, Some(9))).is_empty());
    assert!(d.tick_at(secs(12) - NS).is_empty());
    let actions = shown(&d.tick_at(secs(12)));
    assert_eq!(&actions[..5], REMOVE_PAIR);
    assert_eq!(&actions[5..], ["TrackPod u2", "SetUpSandbox u2", "StartContainer u2/a rc=0"]);
}

#[test]
fn m10_a_start_under_way_finishes_before_the_replacement() {
    // M10: a start under way when the new UID arrives belongs to the old pod: its
    // container is stopped before anything of the new pod starts.
    let mut d = starting(&web());
    assert!(d.step(pod("u2", &[("c", "img:2")]).input()).is_empty());
    assert_eq!(
        shown(&d.step(d.started("c", "c-1"))),
        ["Event Normal Killing c: Stopping container c", "Signal Term c-1", "CheckExited c-1"]
    );
    assert_eq!(
        shown(&d.drive(d.exit("c-1", 143))),
        [
            "RemoveContainer c-1",
            "TearDownSandbox u1",
            "RemoveStatus u1",
            "ForgetPod u1",
            "TrackPod u2",
            "SetUpSandbox u2",
            "StartContainer u2/c rc=0",
        ]
    );
}
