//! Adoption of what an earlier run of the agent left.

use super::*;

#[test]
fn adopts_a_running_container_without_starting_it() {
    let p = web().seen(wall_before(secs(10)));
    let mut f = found("old-c", "u1", "c", 3, &p.hash("c"));
    f.started_at = Some(wall_before(secs(3600)));
    let mut d = Driver::with_found(vec![f]);
    assert_eq!(shown(&d.step(p.input())), ["TrackPod u1", "Watch old-c", "SetUpSandbox u1"]);
    assert!(
        d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false }).is_empty(),
        "no start, no metric"
    );
    let c = d.container("c");
    assert_eq!(c.container_id.as_deref(), Some("containerd://old-c"));
    assert_eq!(c.restart_count, 3, "from its label");
    assert!(c.ready);
    assert_eq!(c.state.unwrap().running.unwrap().started_at, Some(Time(wall_before(secs(3600)))));
    assert_eq!(d.phase(), "Running");
    assert_eq!(d.wake, None);
    // Its exit is the worker's like any other: restarted as run number 4.
    assert_eq!(
        shown(&d.drive(d.exit("old-c", 1))),
        [
            "DeleteTask old-c",
            "KeepDead old-c",
            "StartContainer u1/c rc=4",
            "Count ContainerRestarted file",
        ]
    );
    assert_eq!(d.restart_count("c"), 4);
}

#[test]
fn adopts_an_exited_container_and_restarts_it_by_policy() {
    let p = web();
    let mut f = found("old-c", "u1", "c", 3, &p.hash("c"));
    f.task = FoundTask::NotRunning { exit_code: 2, exited_at: Some(wall_before(secs(5))) };
    let mut d = Driver::with_found(vec![f.clone()]);
    assert_eq!(shown(&d.step(p.input())), ["TrackPod u1", "DeleteTask old-c", "SetUpSandbox u1"]);
    let last = d.last_terminated("c");
    assert_eq!((last.exit_code, last.reason.as_deref()), (2, Some("Error")));
    assert_eq!(last.finished_at, Some(Time(wall_before(secs(5)))));
    assert_eq!(d.restart_count("c"), 3);
    assert_eq!(
        shown(&d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false })),
        ["KeepDead old-c", "StartContainer u1/c rc=4"]
    );
    assert_eq!(shown(&d.step(d.started("c", "c-1"))), ["Count ContainerRestarted file"]);
    assert_eq!(d.restart_count("c"), 4);

    // Never, exited 0: terminated, not started.
    let p = web().policy("Never");
    f.hash = Some(p.hash("c"));
    f.task = FoundTask::NotRunning { exit_code: 0, exited_at: None };
    let mut d = Driver::with_found(vec![f]);
    d.drive(p.input());
    let t = d.terminated("c");
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    assert_eq!(d.phase(), "Succeeded");
    assert_eq!(d.wake, None);
}

#[test]
fn adopts_how_a_container_without_its_task_ended_from_its_labels() {
    for (policy, restarted) in [("Never", false), ("OnFailure", true)] {
        let p = web().policy(policy);
        let mut f = found("old-c", "u1", "c", 0, &p.hash("c"));
        f.task = FoundTask::None;
        f.recorded_exit = RecordedExit {
            exit_code: Some(137),
            reason: Some("OOMKilled".into()),
            finished_at: Some(wall_before(secs(60))),
        };
        let mut d = Driver::with_found(vec![f]);
        let actions = shown(&d.drive(p.input()));
        assert_eq!(actions[..2], ["TrackPod u1", "SetUpSandbox u1"], "no task to delete");
        let t = if restarted {
            assert_eq!(actions[2..4], ["KeepDead old-c", "StartContainer u1/c rc=1"]);
            d.last_terminated("c")
        } else {
            // It finished: nothing of it runs, its emptyDirs go.
            assert_eq!(actions[2..], ["ReleaseVolumes u1"]);
            d.terminated("c")
        };
        assert_eq!((t.exit_code, t.reason.as_deref()), (137, Some("OOMKilled")), "{policy}");
        assert_eq!(t.finished_at, Some(Time(wall_before(secs(60)))));
    }
}

#[test]
fn adoption_removes_changed_duplicate_and_unknown_containers() {
    let p = pod("u1", &[("c", "img:c"), ("d", "img:d")]);
    let d_hash = p.hash("d");
    let found = vec![
        found("x-c", "u1", "c", 0, "deadbeef"),
        found("x-e", "u1", "e", 0, &d_hash),
        found("d-old", "u1", "d", 1, &d_hash),
        found("d-new", "u1", "d", 2, &d_hash),
    ];
    let mut d = Driver::with_found(found);
    assert_eq!(
        shown(&d.drive(p.seen(wall0()).input())),
        [
            "TrackPod u1",
            "Watch d-new",
            "RemoveContainer d-old",
            "RemoveContainer x-e",
            "RemoveContainer x-c",
            "SetUpSandbox u1",
            "StartContainer u1/c rc=0",
        ],
        "the newest of each kept; no start latency (one of them ran)"
    );
    assert_eq!(d.restart_count("d"), 2);
    assert_eq!(d.container("c").container_id.as_deref(), Some("containerd://c-1"));
}

#[test]
fn g1_adoption_leaves_earlier_exits_to_the_garbage_collector() {
    // The dead instances an earlier run kept stay (the collector counts them); a newer
    // one than the adopted, or a running older one, does not.
    let p = pod("u1", &[("c", "img:c")]);
    let hash = p.hash("c");
    let exited = FoundTask::NotRunning { exit_code: 1, exited_at: None };
    let dead = |id: &str, restart_count| Found {
        task: exited.clone(),
        ..found(id, "u1", "c", restart_count, &hash)
    };
    let found = vec![dead("c-0", 0), dead("c-1", 1), found("c-2", "u1", "c", 2, &hash)];
    let mut d = Driver::with_found(found);
    let shown = shown(&d.drive(p.seen(wall0()).input()));
    assert!(shown.contains(&"Watch c-2".to_owned()), "{shown:?}");
    assert!(!shown.iter().any(|a| a.contains("c-0") || a.contains("c-1")), "{shown:?}");
    assert_eq!(d.restart_count("c"), 2);
}

#[test]
fn m10_containers_of_another_pod_stop_before_the_desired_one_starts() {
    // M10: what an earlier run left for another UID under this name stops, with the
    // grace its pod had (the longest), and is removed before the desired pod starts.
    let p = web();
    let mut s1 = found("s-1", "u0", "c", 0, "h");
    s1.grace = Some(secs(10));
    let mut s2 = found("s-2", "u0", "d", 0, "h");
    s2.grace = Some(secs(20));
    let mut s3 = found("s-3", "u0", "e", 0, "h");
    s3.task = FoundTask::NotRunning { exit_code: 0, exited_at: None };
    let mine = found("m-1", "u1", "c", 1, &p.hash("c"));
    let mut d = Driver::with_found(vec![s1, mine, s2, s3]);
    assert_eq!(
        shown(&d.drive(p.input())),
        ["Watch s-1", "Watch s-2", "Signal Term s-1,s-2", "CheckExited s-1,s-2"]
    );
    assert_eq!(d.wake_in(), Some(secs(20)));
    assert!(d.w.status(wall0()).is_none(), "not taken on yet");
    assert!(d.drive(d.exit("s-1", 0)).is_empty());
    assert!(d.drive(d.kernel_exit("s-2", 0, None)).is_empty());
    assert_eq!(
        shown(&d.drive(d.exit("s-2", 0))),
        [
            "RemoveContainer s-1",
            "RemoveContainer s-2",
            "RemoveContainer s-3",
            "TearDownSandbox u0",
            "TrackPod u1",
            "Watch m-1",
            "SetUpSandbox u1",
        ]
    );
    assert_eq!(d.restart_count("c"), 1);
}

#[test]
fn unlabelled_stale_containers_get_thirty_seconds() {
    let mut d = Driver::with_found(vec![found("s-1", "u0", "c", 0, "h")]);
    assert_eq!(shown(&d.drive(undesired())), ["Watch s-1", "Signal Term s-1", "CheckExited s-1"]);
    assert_eq!(d.wake_in(), Some(secs(30)));
    assert_eq!(shown(&d.tick_at(secs(30))), ["Signal Kill s-1"]);
    assert_eq!(shown(&d.tick_at(secs(40))), ["RemoveContainer s-1", "TearDownSandbox u0"]);
    assert!(d.w.is_done());
}

#[test]
fn a_deleted_pods_containers_are_stale() {
    let p = web().deleting(Some(0));
    let mut d = Driver::with_found(vec![found("m-1", "u1", "c", 0, &p.hash("c"))]);
    assert_eq!(shown(&d.drive(p.input())), ["Watch m-1", "Signal Term m-1", "CheckExited m-1"]);
    assert_eq!(d.wake_in(), Some(secs(30)), "the label's grace, default 30 s");
}

#[test]
fn start_latency_counts_once_from_config_seen() {
    let p = pod("u1", &[("a", "img:a"), ("b", "img:b")]).seen(wall_before(secs(3)));
    let mut d = Driver::new();
    d.set_time(secs(2));
    let actions = shown(&d.drive(p.input()));
    assert_eq!(
        actions.iter().filter(|a| a.starts_with("Count")).collect::<Vec<_>>(),
        ["Count PodStarted file 5s"]
    );
    d.pass(secs(1));
    assert_eq!(
        shown(&d.drive(d.exit("a-1", 1)))
            .into_iter()
            .filter(|a| a.starts_with("Count"))
            .collect::<Vec<_>>(),
        ["Count ContainerRestarted file"]
    );
}
