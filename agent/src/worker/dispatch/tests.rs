//! The dispatcher driven through its channels (the merge's batches, containerd's event
//! stream, evictions, the node's shutdown), with the recording fake runtime on tokio's
//! paused clock. The tests assert on the fake's call log, the statuses the workers
//! publish and the dispatcher's end.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use outpost_core::merge::{DeltaOp, PodDelta};
use outpost_core::pod::{FullName, Source};
use outpost_core::pod_worker::Desired;
use outpost_core::pod_worker::testing::pod;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Workers, adoptable, run};
use crate::podconfig::Batch;
use crate::runtime::events::TaskEvent;
use crate::worker::fake::{Fake, first_container, found_running, pass, settle, shared};
use crate::worker::pod_runtime::TaskState;
use crate::worker::{Eviction, Message, Shared};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// `default/<name>` of UID `uid`, one container `c` of image `img:<uid>`.
fn named(name: &str, uid: &str) -> Pod {
    let mut p = pod(uid, &[("c", &format!("img:{uid}"))]);
    p.metadata.name = Some(name.into());
    p
}

fn full_name(name: &str) -> FullName {
    FullName { namespace: "default".into(), name: name.into() }
}

fn delta(op: DeltaOp, p: &Pod) -> PodDelta {
    PodDelta { op, source: Source::File, pod: Arc::new(p.clone()) }
}

fn add(p: &Pod) -> PodDelta {
    delta(DeltaOp::Add, p)
}

fn remove(p: &Pod) -> PodDelta {
    delta(DeltaOp::Remove, p)
}

/// A dispatcher running on a fake runtime, and the ends of its channels.
struct Dispatcher {
    shared: Arc<Shared<Fake>>,
    batches: Option<mpsc::Sender<Batch>>,
    evictions: mpsc::UnboundedSender<Eviction>,
    changes: mpsc::UnboundedSender<FullName>,
    events: mpsc::UnboundedSender<TaskEvent>,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Dispatcher {
    /// Starts it with `found` left by an earlier run; it lists them first.
    async fn start(found: Vec<(FullName, outpost_core::pod_worker::Found)>) -> Dispatcher {
        Dispatcher::start_with(shared(), found).await
    }

    /// Starts it on `shared` with `found` left by an earlier run.
    async fn start_with(
        shared: Arc<Shared<Fake>>,
        found: Vec<(FullName, outpost_core::pod_worker::Found)>,
    ) -> Dispatcher {
        shared.runtime.state().found = found;
        let events = shared.runtime.events();
        let (batches, batches_rx) = mpsc::channel(16);
        let (changes, changes_rx) = mpsc::unbounded_channel();
        let (evictions, evictions_rx) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(
            shared.clone(),
            batches_rx,
            changes_rx,
            evictions_rx,
            shutdown.clone(),
        ));
        settle().await;
        let d = Dispatcher {
            shared,
            batches: Some(batches),
            evictions,
            changes,
            events,
            shutdown,
            task,
        };
        assert_eq!(d.calls(), ["list"]);
        d
    }

    async fn batch(&self, deltas: Vec<PodDelta>, synced: bool) {
        let batches = self.batches.as_ref().expect("the merge still runs");
        batches.send(Batch { deltas, synced }).await.unwrap();
        settle().await;
    }

    fn calls(&self) -> Vec<String> {
        self.shared.runtime.calls()
    }

    /// containerd's exit of `id`, on its event stream.
    async fn exit(&self, id: &str, exit_status: u32) {
        let exited_at = Some(Timestamp::now());
        self.events
            .send(TaskEvent::Exit { container_id: id.into(), exit_status, exited_at })
            .unwrap();
        settle().await;
    }

    fn phase(&self, uid: &str) -> Option<String> {
        self.shared.statuses.get(uid).and_then(|s| s.phase.clone())
    }

    fn restart_count(&self, uid: &str) -> i32 {
        let status = self.shared.statuses.get(uid).unwrap();
        status.container_statuses.as_ref().unwrap()[0].restart_count
    }

    /// `p` desired in a batch that says every source has been seen; the orphans' removal
    /// and its start are taken from the log.
    async fn running(&self, p: &Pod) {
        self.batch(vec![add(p)], true).await;
        let calls = self.calls();
        assert!(calls.iter().any(|c| c.starts_with("start")), "{calls:?}");
    }

    fn ended(&self) -> bool {
        self.task.is_finished()
    }
}

// ---------------------------------------------------------------------------------------
// Adoption at start

#[tokio::test(start_paused = true)]
async fn a_desired_pod_adopts_the_containers_found_at_start() {
    let p = named("web", "u1");
    let found = vec![(full_name("web"), found_running("old-c", "u1", &first_container(&p), 2))];
    let d = Dispatcher::start(found).await;
    d.batch(vec![add(&p)], true).await;
    assert_eq!(d.calls(), ["remove_orphans but u1", "set_up_sandbox u1"], "no create, no start");
    assert_eq!(d.phase("u1").as_deref(), Some("Running"));
    assert_eq!(d.restart_count("u1"), 2, "from its label");
    // Its exit reaches the worker through containerd's event stream.
    d.exit("old-c", 1).await;
    assert_eq!(d.calls(), ["ensure_image img:u1", "create c#3", "start c1", "delete_task old-c"]);
    assert_eq!(d.restart_count("u1"), 3);
}

#[tokio::test(start_paused = true)]
async fn what_an_earlier_run_left_is_grouped_by_pod() {
    let fake = Fake::default();
    let c = first_container(&named("web", "u1"));
    let dns = FullName { namespace: "kube-system".into(), name: "dns".into() };
    fake.state().found = vec![
        (full_name("web"), found_running("a", "u1", &c, 0)),
        (dns.clone(), found_running("b", "u9", &c, 0)),
        (full_name("web"), found_running("c", "u1", &c, 1)),
    ];
    let by_pod = adoptable(&fake).await;
    let ids = |n: &FullName| by_pod[n].iter().map(|f| f.id.as_str()).collect::<Vec<_>>();
    assert_eq!(ids(&full_name("web")), ["a", "c"]);
    assert_eq!(ids(&dns), ["b"]);
}

// ---------------------------------------------------------------------------------------
// M9: orphans

#[tokio::test(start_paused = true)]
async fn m9_orphans_are_left_until_every_source_has_been_seen_then_stopped_and_removed() {
    let c = first_container(&named("old", "u0"));
    let d = Dispatcher::start(vec![(full_name("old"), found_running("s1", "u0", &c, 0))]).await;
    d.batch(vec![add(&named("web", "u1"))], false).await;
    assert_eq!(d.calls(), ["set_up_sandbox u1", "ensure_image img:u1", "create c#0", "start c1"]);
    pass(secs(3600)).await;
    d.batch(vec![], false).await;
    assert!(d.calls().is_empty(), "a source not yet seen may still want it");
    d.batch(vec![], true).await;
    assert_eq!(
        d.calls(),
        ["remove_orphans but u0,u1", "kill s1 TERM", "task s1"],
        "the found containers' pods keep their sandboxes for their workers to stop"
    );
    d.exit("s1", 143).await;
    assert_eq!(d.calls(), ["remove s1", "tear_down u0"]);
    d.batch(vec![], true).await;
    assert!(d.calls().is_empty(), "once");
    assert_eq!(d.phase("u1").as_deref(), Some("Running"), "the desired pod runs on");
}

#[tokio::test(start_paused = true)]
async fn m9_a_name_whose_orphans_stopped_is_served_anew() {
    let shared = shared();
    let c = first_container(&named("web", "u0"));
    let found = HashMap::from([(full_name("web"), vec![found_running("s1", "u0", &c, 0)])]);
    let mut workers = Workers::new(shared.clone(), found);
    workers.collect_garbage();
    settle().await;
    assert!(workers.found.is_empty(), "taken by a worker");
    assert_eq!(shared.runtime.calls(), ["kill s1 TERM", "task s1"]);
    let exit = TaskEvent::Exit { container_id: "s1".into(), exit_status: 143, exited_at: None };
    shared.routes.task(exit);
    settle().await;
    assert_eq!(shared.runtime.calls(), ["remove s1", "tear_down u0"]);
    // The worker ended; a pod desired before the dispatcher saw it end goes to a new one.
    let p = Arc::new(named("web", "u1"));
    workers.send(
        full_name("web"),
        Message::Desired(Some(Box::new(Desired {
            source: Source::File,
            pod: p,
            rejected: None,
            answers: outpost_core::pod_worker::Answers::ALL,
            resize_pending: None,
        }))),
    );
    let done = workers.running.join_next().await.unwrap();
    workers.finished(done);
    settle().await;
    assert_eq!(
        shared.runtime.calls(),
        ["set_up_sandbox u1", "ensure_image img:u1", "create c#0", "start c1"]
    );
    assert_eq!(workers.outboxes.len(), 1);
    assert_eq!(shared.statuses.get("u1").unwrap().phase.as_deref(), Some("Running"));
    // The agent leaves: the worker ends; with no worker left, leaving starts none.
    workers.send(full_name("web"), Message::Leave);
    let done = workers.running.join_next().await.unwrap();
    workers.finished(done);
    assert!(workers.outboxes.is_empty());
    workers.send(full_name("web"), Message::Leave);
    assert!(workers.running.is_empty(), "no worker is started to leave");
}

// ---------------------------------------------------------------------------------------
// M10: a pod replaced under its name

#[tokio::test(start_paused = true)]
async fn m10_a_replaced_pod_stops_before_the_new_ones_containers_start() {
    let d = Dispatcher::start(vec![]).await;
    let old = named("web", "u1");
    d.running(&old).await;
    let new = named("web", "u2");
    d.batch(vec![remove(&old), add(&new)], false).await;
    assert_eq!(d.calls(), ["kill c1 TERM", "task c1"]);
    pass(secs(1)).await;
    assert!(d.calls().is_empty(), "nothing of u2 while u1 stops");
    d.exit("c1", 143).await;
    assert_eq!(
        d.calls(),
        [
            "remove c1",
            "tear_down u1",
            "set_up_sandbox u2",
            "ensure_image img:u2",
            "create c#0",
            "start c2"
        ]
    );
    assert_eq!(d.phase("u1"), None, "the old pod's status is gone");
    assert_eq!(d.phase("u2").as_deref(), Some("Running"));
}

// ---------------------------------------------------------------------------------------
// Batches, resubscriptions, evictions

#[tokio::test(start_paused = true)]
async fn a_batch_of_several_pods_starts_a_worker_for_each() {
    let d = Dispatcher::start(vec![]).await;
    let pods = [named("a", "ua"), named("b", "ub"), named("c", "uc")];
    d.batch(pods.iter().map(add).collect(), true).await;
    let calls = d.calls();
    assert_eq!(calls[0], "remove_orphans but ua,ub,uc");
    for uid in ["ua", "ub", "uc"] {
        let own: Vec<&str> =
            calls[1..].iter().map(String::as_str).filter(|c| c.contains(uid)).collect();
        assert_eq!(own, [format!("set_up_sandbox {uid}"), format!("ensure_image img:{uid}")]);
        assert_eq!(d.phase(uid).as_deref(), Some("Running"));
    }
    let mut started: Vec<&str> = calls.iter().filter_map(|c| c.strip_prefix("start ")).collect();
    started.sort_unstable();
    assert_eq!(started, ["c1", "c2", "c3"]);
    assert_eq!(d.shared.routes.0.lock().unwrap().len(), 3, "each container routed");
}

#[tokio::test(start_paused = true)]
async fn a_resubscription_has_every_worker_look_at_its_tasks() {
    let d = Dispatcher::start(vec![]).await;
    d.running(&named("a", "ua")).await;
    d.running(&named("b", "ub")).await;
    // c1's exit fell in the event stream's gap.
    d.shared.runtime.set_task("c1", TaskState::Exited { exit_status: 3, exited_at: None });
    d.events.send(TaskEvent::Resync).unwrap();
    settle().await;
    let mut calls = d.calls();
    calls.sort();
    assert_eq!(
        calls,
        ["create c#1", "delete_task c1", "ensure_image img:ua", "start c3", "task c1", "task c2"]
    );
    assert_eq!(d.restart_count("ua"), 1);
    assert_eq!(d.restart_count("ub"), 0);
}

#[tokio::test(start_paused = true)]
async fn evictions_and_object_changes_go_to_the_pods_worker_only() {
    let d = Dispatcher::start(vec![]).await;
    d.running(&named("web", "u1")).await;
    let eviction = |name: &str, uid: &str| Eviction {
        pod: full_name(name),
        uid: uid.into(),
        message: "The node was low on resource: memory. ".into(),
        grace: secs(1),
    };
    d.evictions.send(eviction("gone", "u9")).unwrap();
    d.changes.send(full_name("gone")).unwrap();
    settle().await;
    assert!(d.calls().is_empty(), "no worker is started for them");
    d.changes.send(full_name("web")).unwrap();
    settle().await;
    assert_eq!(d.calls(), ["refresh_volumes u1"]);
    d.evictions.send(eviction("web", "u1")).unwrap();
    settle().await;
    assert_eq!(d.calls(), ["kill c1 TERM", "task c1"]);
    assert_eq!(d.phase("u1").as_deref(), Some("Failed"), "evicted");
}

// ---------------------------------------------------------------------------------------
// The end

#[tokio::test(start_paused = true)]
async fn the_agent_leaving_ends_the_workers_and_leaves_the_containers() {
    let mut d = Dispatcher::start(vec![]).await;
    d.running(&named("a", "ua")).await;
    d.running(&named("b", "ub")).await;
    d.batches = None;
    settle().await;
    assert!(d.ended());
    assert!(d.calls().is_empty(), "no kill, no removal");
    assert_eq!(d.phase("ua").as_deref(), Some("Running"), "the status stays for the next agent");
    assert_eq!(d.phase("ub").as_deref(), Some("Running"));
}

#[tokio::test(start_paused = true)]
async fn node_shutdown_stops_every_pod_and_ends_once_they_stopped() {
    let d = Dispatcher::start(vec![]).await;
    d.running(&named("a", "ua")).await;
    d.running(&named("b", "ub")).await;
    d.shutdown.cancel();
    settle().await;
    let mut calls = d.calls();
    calls.sort();
    assert_eq!(calls, ["kill c1 TERM", "kill c2 TERM", "task c1", "task c2"]);
    d.exit("c1", 143).await;
    assert!(!d.ended(), "b still stops");
    d.exit("c2", 143).await;
    assert!(d.ended());
    assert!(d.calls().is_empty(), "nothing removed");
    assert_eq!(d.phase("ua").as_deref(), Some("Failed"));
}

/// `named(name, uid)` with `spec.priority`.
fn prioritized(name: &str, uid: &str, priority: i32) -> Pod {
    let mut p = named(name, uid);
    p.spec.as_mut().unwrap().priority = Some(priority);
    p
}

/// J3: with priority groups the lowest group stops first; the next one starts once its
/// pods stopped, or once its grace period is over (the pod still stopping is then
/// killed at its own cut grace period, which is the group's).
#[tokio::test(start_paused = true)]
async fn j3_node_shutdown_stops_pods_group_by_group_lowest_first() {
    use outpost_core::node_shutdown::PriorityGroup;
    let groups = vec![
        PriorityGroup { priority: -10, grace: secs(4) },
        PriorityGroup { priority: 0, grace: secs(5) },
        PriorityGroup { priority: 2_000_000_000, grace: secs(6) },
    ];
    let d = Dispatcher::start_with(super::super::fake::shared_with_shutdown_groups(groups), vec![])
        .await;
    d.running(&prioritized("low", "ul", -5)).await;
    d.running(&prioritized("web", "uw", 0)).await;
    d.running(&prioritized("critical", "uc", 2_000_001_000)).await;
    d.calls();
    d.shutdown.cancel();
    settle().await;
    assert_eq!(d.calls(), ["kill c1 TERM", "task c1"], "the lowest group alone");
    d.exit("c1", 143).await;
    assert_eq!(d.calls(), ["kill c2 TERM", "task c2"], "then the next, at once");
    // web never exits by itself: its grace period is its group's 5 s (not its own 30 s).
    pass(secs(5)).await;
    let calls = d.calls();
    assert!(calls.contains(&"kill c2 KILL".to_owned()), "{calls:?}");
    assert!(calls.contains(&"kill c3 TERM".to_owned()), "the last group after 5 s: {calls:?}");
    d.exit("c2", 137).await;
    d.exit("c3", 143).await;
    assert!(d.ended());
    for uid in ["ul", "uw", "uc"] {
        let status = d.shared.statuses.get(uid).unwrap();
        assert_eq!(
            (status.phase.as_deref(), status.reason.as_deref()),
            (Some("Failed"), Some("Terminated")),
            "{uid}"
        );
    }
}

mod k4;
