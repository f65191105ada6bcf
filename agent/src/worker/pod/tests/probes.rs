//! The executor's probes and hooks: each runs off the worker's path and comes back as
//! an input; the worker's one timer says when the next is due; a container's runs are
//! abandoned when it is killed.

use k8s_openapi::api::core::v1::{ExecAction, Lifecycle, LifecycleHandler, Probe};

use super::*;

fn exec(command: &str) -> Option<ExecAction> {
    Some(ExecAction { command: Some(command.split(' ').map(str::to_owned).collect()) })
}

/// An exec probe of `command`, every second, failing after `failures`.
fn probe(command: &str, failures: i32) -> Option<Probe> {
    Some(Probe {
        exec: exec(command),
        period_seconds: Some(1),
        failure_threshold: Some(failures),
        ..Probe::default()
    })
}

fn hooks(mut p: Pod, post_start: Option<&str>, pre_stop: Option<&str>) -> Pod {
    let handler = |command: &str| LifecycleHandler { exec: exec(command), ..Default::default() };
    p.spec.as_mut().unwrap().containers[0].lifecycle = Some(Lifecycle {
        post_start: post_start.map(handler),
        pre_stop: pre_stop.map(handler),
        ..Lifecycle::default()
    });
    p
}

fn scripted(h: &Harness, command: &str, exit_codes: &[i32]) {
    h.fake().state().exec_results.insert(command.to_owned(), exit_codes.iter().copied().collect());
}

#[tokio::test(start_paused = true)]
async fn p3_a_failing_liveness_probe_kills_and_restarts_the_container() {
    let h = Harness::new();
    let mut p = web();
    p.spec.as_mut().unwrap().containers[0].liveness_probe = probe("check", 2);
    scripted(&h, "check", &[1, 1]);
    h.running(&p).await;
    pass(secs(1)).await;
    assert_eq!(h.calls(), ["exec c1 check", "kill c1 TERM", "task c1"]);
    assert!(
        h.has_event("Warning Unhealthy: Liveness probe failed: exit 1 (x2)"),
        "{:?}",
        h.events()
    );
    assert!(h.has_event("Normal Killing: Container c failed liveness probe, will be restarted"));
    pass(secs(5)).await;
    assert!(h.calls().is_empty(), "no probe of a container being killed");
    h.exit("c1", 143).await;
    let calls = h.calls();
    assert!(calls.contains(&"start c2".to_owned()), "restarted: {calls:?}");
    assert_eq!(h.container(&p, "c").restart_count, 1);
    // The new container's probes start afresh (the script ran out: they pass).
    pass(secs(1)).await;
    assert_eq!(h.calls(), ["exec c2 check"]);
}

#[tokio::test(start_paused = true)]
async fn p4_readiness_follows_the_probe_and_never_restarts() {
    let h = Harness::new();
    let mut p = web();
    p.spec.as_mut().unwrap().containers[0].readiness_probe = probe("ready", 1);
    scripted(&h, "ready", &[1, 0, 1]);
    h.send(desired(&p)).await;
    assert!(h.calls().contains(&"exec c1 ready".to_owned()), "the first probe at the start");
    assert!(!h.container(&p, "c").ready);
    assert_eq!(h.condition(&p, "Ready").status, "False");
    assert_eq!(h.condition(&p, "ContainersReady").reason.as_deref(), Some("ContainersNotReady"));
    pass(secs(1)).await;
    assert!(h.container(&p, "c").ready);
    assert_eq!(h.condition(&p, "Ready").status, "True");
    pass(secs(1)).await;
    assert!(!h.container(&p, "c").ready, "failed again");
    assert_eq!(h.container(&p, "c").restart_count, 0);
    assert!(!h.calls().iter().any(|c| c.starts_with("kill")), "readiness kills nothing");
}

#[tokio::test(start_paused = true)]
async fn l1_the_container_is_not_running_until_post_start_returns() {
    let h = Harness::new();
    let p = hooks(web(), Some("hook"), None);
    let gate = h.fake().hold("exec c1 hook");
    h.send(desired(&p)).await;
    assert!(h.calls().ends_with(&["start c1".to_owned(), "exec c1 hook".to_owned()]));
    assert_eq!(h.waiting(&p, "c").reason.as_deref(), Some("ContainerCreating"));
    assert!(!h.container(&p, "c").ready);
    gate.open();
    settle().await;
    assert!(h.container(&p, "c").state.unwrap().running.is_some());
    assert!(h.container(&p, "c").ready);
}

#[tokio::test(start_paused = true)]
async fn l1_a_failed_post_start_kills_the_container() {
    let h = Harness::new();
    let p = hooks(web(), Some("hook"), None);
    scripted(&h, "hook", &[2]);
    h.send(desired(&p)).await;
    let calls = h.calls();
    assert!(
        calls.ends_with(&[
            "exec c1 hook".to_owned(),
            "kill c1 TERM".to_owned(),
            "task c1".to_owned()
        ]),
        "{calls:?}"
    );
    assert!(h.has_event("Warning FailedPostStartHook: PostStartHook failed"));
}

#[tokio::test(start_paused = true)]
async fn l2_pre_stop_runs_before_sigterm_within_the_grace_period() {
    let h = Harness::new();
    let p = with_grace(hooks(web(), None, Some("bye")), 5);
    h.running(&p).await;
    let gate = h.fake().hold("exec c1 bye");
    h.send(Message::Desired(None)).await;
    assert_eq!(h.calls(), ["exec c1 bye"], "SIGTERM waits for the hook");
    pass(secs(2)).await;
    gate.open();
    settle().await;
    assert_eq!(h.calls(), ["kill c1 TERM", "task c1"]);
    pass(secs(3)).await;
    assert_eq!(h.calls(), ["kill c1 KILL"], "the grace period counts from before the hook");
    h.exit("c1", 137).await;
    assert!(h.ended());
}

#[tokio::test(start_paused = true)]
async fn l2_a_hanging_pre_stop_is_cut_at_the_grace_period() {
    let h = Harness::new();
    let p = with_grace(hooks(web(), None, Some("hang")), 3);
    h.running(&p).await;
    let _gate = h.fake().hold("exec c1 hang");
    h.send(Message::Desired(None)).await;
    assert_eq!(h.calls(), ["exec c1 hang"]);
    pass(secs(3)).await;
    assert_eq!(h.calls(), ["kill c1 TERM", "task c1"], "the hook cut short, SIGTERM follows");
    pass(pod_worker::MIN_SHUTDOWN_WINDOW).await;
    assert_eq!(h.calls(), ["kill c1 KILL"], "after kubelet's minimum shutdown window");
    h.exit("c1", 137).await;
    assert_eq!(h.calls(), ["remove c1", "tear_down u1"]);
    assert!(h.ended(), "the abandoned hook does not keep the worker");
}
