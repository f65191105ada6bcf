//! Spec changes and resyncs.

use super::*;

#[test]
fn a_changed_container_is_replaced() {
    let mut d = Driver::new();
    d.run(&web());
    d.pass(secs(1));
    let changed = web().image("c", "img:2");
    // It stops gracefully first (SIGTERM, the grace period), then is recreated.
    assert_eq!(
        shown(&d.drive(changed.input())),
        [
            "Event Normal Killing c: Container c definition changed, will be restarted",
            "Signal Term c-1",
            "CheckExited c-1",
        ]
    );
    assert_eq!(d.wake_in(), Some(secs(30)), "the pod's grace period");
    let actions = d.step(d.exit("c-1", 143));
    assert_eq!(shown(&actions), ["DeleteTask c-1", "KeepDead c-1", "StartContainer u1/c rc=1",]);
    let Some(Action::StartContainer { hash, .. }) = actions.last() else { unreachable!() };
    assert_eq!(hash, &changed.hash("c"));
    d.step(d.started("c", "c-2"));
    let c = d.container("c");
    assert_eq!((c.image.as_str(), c.restart_count), ("img:2", 1));
    assert_eq!(c.last_state, None, "the replaced container's end is not shown");
    assert!(d.drive(changed.input()).is_empty(), "the same spec again changes nothing");
}

#[test]
fn a_changed_container_that_ignores_sigterm_is_killed_after_its_grace_period() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(web().image("c", "img:2").input());
    d.pass(secs(30));
    assert_eq!(shown(&d.step(Input::Tick)), ["Signal Kill c-1", "CheckExited c-1"]);
    d.pass(KILL_WAIT);
    let actions = shown(&d.step(Input::Tick));
    assert!(
        actions.contains(&"StartContainer u1/c rc=1".to_owned()),
        "taken as killed after KILL_WAIT, and replaced: {actions:?}"
    );
}

#[test]
fn a_change_while_backing_off_starts_the_new_spec_at_once() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(d.exit("c-1", 1));
    d.step(d.exit("c-2", 1));
    assert_eq!(d.wake_in(), Some(SECOND));
    assert_eq!(
        shown(&d.step(web().image("c", "img:2").input())),
        ["KeepDead c-2", "StartContainer u1/c rc=2"],
        "no Killing event: nothing ran"
    );
}

#[test]
fn a_change_while_starting_waits_for_the_start() {
    let mut d = starting(&web());
    let changed = web().image("c", "img:2");
    assert!(d.step(changed.input()).is_empty(), "one start at a time");
    let actions = d.step(d.started("c", "c-1"));
    assert_eq!(
        shown(&actions),
        [
            "Event Normal Killing c: Container c definition changed, will be restarted",
            "Signal Term c-1",
            "CheckExited c-1",
        ]
    );
    let actions = d.step(d.exit("c-1", 0));
    let Some(Action::StartContainer { hash, .. }) = actions.last() else {
        panic!("the new spec starts once the old one exited: {:?}", shown(&actions))
    };
    assert_eq!(hash, &changed.hash("c"));
    // A failed start: the new spec goes at once.
    let mut d = starting(&web());
    d.step(changed.input());
    assert_eq!(
        shown(&d.step(pull_failed("denied"))),
        ["Event Warning Failed c: Error: ErrImagePull", "StartContainer u1/c rc=0"]
    );
}

#[test]
fn resync_checks_the_running_containers_only() {
    let mut d = Driver::new();
    d.run(&pod("u1", &[("a", "img:a"), ("b", "img:b"), ("e", "img:e")]).policy("OnFailure"));
    d.step(d.exit("b-2", 0)); // terminated
    d.drive(d.exit("e-3", 1)); // restarted at once as e-4
    d.step(d.exit("e-4", 1)); // backing off
    assert_eq!(shown(&d.step(Input::Resync)), ["CheckExited a-1"]);
    d.step(d.exit("a-1", 0));
    assert!(d.step(Input::Resync).is_empty());
    assert!(Driver::new().step(Input::Resync).is_empty());
}

/// containerd restarted while a pod stops: the containers the stop still waits for are
/// looked at again (their exits may have been missed), and their exits finish the stop.
#[test]
fn resync_during_a_stop_checks_the_containers_it_waits_for() {
    let (mut d, _) = running_pair(Some(20));
    assert_eq!(shown(&d.step(undesired())), STOP_PAIR);
    assert!(d.step(d.exit("a-1", 143)).is_empty());
    assert_eq!(shown(&d.step(Input::Resync)), ["CheckExited b-2"]);
    assert_eq!(shown(&d.step(d.exit("b-2", 143))), REMOVE_PAIR);
}

#[test]
fn events_name_the_pod_object() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(d.exit("c-1", 1));
    let actions = d.step(d.exit("c-2", 1));
    let Some(Action::Event { pod: p, kind, .. }) =
        actions.iter().find(|a| matches!(a, Action::Event { .. }))
    else {
        unreachable!()
    };
    assert_eq!(*kind, EventType::Warning);
    assert_eq!(pod::uid(p), "u1");
}

// ---------------------------------------------------------------------------------------
