//! The executor driven through its inbox, with a recording fake [`PodRuntime`], on
//! tokio's paused clock: grace periods and backoffs pass in no real time. The tests
//! assert on the fake's call log (in order), the status published to the
//! [`StatusStore`], the Events recorded, the routes of task events and the worker's end.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::jiff::Timestamp;
use outpost_core::pod::{FullName, Source};
use outpost_core::pod_worker::testing::pod;
use outpost_core::pod_worker::{self, Desired, Found};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::PodWorker;
use crate::ebpf;
use crate::ebpf::records::{KernelEvent, Task};
use crate::runtime::events::TaskEvent;
use crate::worker::fake::{Fake, first_container, found_running, pass, settle, shared};
use crate::worker::pod_runtime::TaskState;
use crate::worker::{Inbox, Message, Outbox, Shared};

const MS: Duration = Duration::from_millis(1);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

// ---------------------------------------------------------------------------------------
// Pods

fn name() -> FullName {
    FullName { namespace: "default".into(), name: "web".into() }
}

/// UID `u1`, one container `c` of image `img:1`.
fn web() -> Pod {
    pod("u1", &[("c", "img:1")])
}

fn with_grace(mut p: Pod, seconds: i64) -> Pod {
    if let Some(spec) = p.spec.as_mut() {
        spec.termination_grace_period_seconds = Some(seconds);
    }
    p
}

fn desired(p: &Pod) -> Message {
    Message::Desired(Some(Box::new(Desired {
        source: Source::File,
        pod: Arc::new(p.clone()),
        rejected: None,
        answers: outpost_core::pod_worker::Answers::ALL,
        resize_pending: None,
    })))
}

// ---------------------------------------------------------------------------------------
// The harness

/// One `default/web` worker on a fake runtime.
struct Harness {
    shared: Arc<Shared<Fake>>,
    outbox: Outbox,
    worker: JoinHandle<Inbox>,
}

impl Harness {
    fn new() -> Harness {
        Harness::with_found(Vec::new())
    }

    fn with_found(found: Vec<Found>) -> Harness {
        let shared = shared();
        let (outbox, inbox) = mpsc::unbounded_channel();
        let worker = PodWorker::new(shared.clone(), name(), outbox.clone(), found);
        let worker = tokio::spawn(worker.run(inbox));
        Harness { shared, outbox, worker }
    }

    fn fake(&self) -> &Fake {
        &self.shared.runtime
    }

    async fn send(&self, message: Message) {
        self.outbox.send(message).unwrap();
        settle().await;
    }

    /// `p` desired, run until its containers are running; the calls are taken.
    async fn running(&self, p: &Pod) {
        self.send(desired(p)).await;
        let calls = self.calls();
        assert!(calls.iter().any(|c| c.starts_with("start")), "{calls:?}");
        assert_eq!(self.phase(p), "Running");
    }

    /// The calls since the last look.
    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut self.fake().state().log)
    }

    /// containerd's exit of `id`, through the dispatcher's routes.
    async fn exit(&self, id: &str, exit_status: u32) {
        assert!(self.shared.routes.get(id).is_some(), "{id}'s events are routed to the worker");
        let event = TaskEvent::Exit {
            container_id: id.into(),
            exit_status,
            exited_at: Some(Timestamp::now()),
        };
        self.shared.routes.task(event);
        settle().await;
    }

    /// The kernel's record of the exit of `id`'s init (`wait_status` as the kernel has
    /// it: a signal in the low bits, or the exit code shifted left by 8), routed.
    async fn kernel_exit(&self, uid: &str, id: &str, wait_status: u32) {
        // Stamped now, on the kernel's boot clock (the wall times of the exit and the
        // start tell the crash loop how long the container ran).
        let boot = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).unwrap();
        let ktime_ns = u64::try_from(boot.tv_sec()).unwrap() * 1_000_000_000
            + u64::try_from(boot.tv_nsec()).unwrap();
        let task =
            Task { tgid: 4242, pid: 4242, ns_tgid: 1, cgroup_id: 77, ktime_ns, comm: "sh".into() };
        let observed = ebpf::Observed {
            pod_uid: uid.into(),
            container_id: id.into(),
            event: KernelEvent::Exit { task, exit_code: wait_status },
        };
        self.shared.routes.kernel(observed);
        settle().await;
    }

    fn routed(&self, id: &str) -> bool {
        self.shared.routes.get(id).is_some()
    }

    fn status(&self, p: &Pod) -> Arc<PodStatus> {
        let uid = outpost_core::pod::uid(p);
        self.shared.statuses.get(uid).unwrap_or_else(|| panic!("no status of {uid}"))
    }

    fn phase(&self, p: &Pod) -> String {
        self.status(p).phase.clone().unwrap()
    }

    fn container(&self, p: &Pod, name: &str) -> ContainerStatus {
        let status = self.status(p);
        let statuses = status.container_statuses.as_deref().unwrap_or_default();
        statuses.iter().find(|c| c.name == name).unwrap().clone()
    }

    fn waiting(&self, p: &Pod, name: &str) -> ContainerStateWaiting {
        self.container(p, name).state.unwrap().waiting.unwrap()
    }

    fn terminated(&self, p: &Pod, name: &str) -> ContainerStateTerminated {
        self.container(p, name).state.unwrap().terminated.unwrap()
    }

    fn last_terminated(&self, p: &Pod, name: &str) -> ContainerStateTerminated {
        self.container(p, name).last_state.unwrap().terminated.unwrap()
    }

    fn condition(&self, p: &Pod, kind: &str) -> PodCondition {
        let status = self.status(p);
        let conditions = status.conditions.as_deref().unwrap_or_default();
        conditions.iter().find(|c| c.type_ == kind).unwrap().clone()
    }

    /// The Events recorded, oldest first: "Type Reason: message (xN)" for repeats.
    fn events(&self) -> Vec<String> {
        let mut recent = self.shared.events.recent(100);
        recent.sort_by_key(|(_, series)| series.first);
        recent
            .into_iter()
            .map(|(key, series)| {
                let repeats =
                    if series.count > 1 { format!(" (x{})", series.count) } else { String::new() };
                format!("{} {}: {}{repeats}", key.kind.as_str(), key.reason, key.message)
            })
            .collect()
    }

    fn has_event(&self, event: &str) -> bool {
        self.events().iter().any(|e| e == event)
    }

    fn ended(&self) -> bool {
        self.worker.is_finished()
    }
}

// ---------------------------------------------------------------------------------------
// Starting

#[tokio::test(start_paused = true)]
async fn a_pod_starts_sandbox_image_create_start_in_order() {
    let h = Harness::new();
    let p = pod("u1", &[("a", "img:a"), ("b", "img:b")]);
    h.send(desired(&p)).await;
    assert_eq!(
        h.calls(),
        [
            "set_up_sandbox u1",
            "ensure_image img:a",
            "create a#0",
            "start c1",
            "ensure_image img:b",
            "create b#0",
            "start c2",
        ],
        "no start UNROUTED: each container's events go to the worker from before its start"
    );
    assert!(h.routed("c1") && h.routed("c2"));
    let status = h.status(&p);
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.pod_ip.as_deref(), Some("10.0.0.7"));
    assert_eq!(status.host_ip.as_deref(), Some("192.168.1.10"));
    assert_eq!(h.condition(&p, "Ready").status, "True");
    let a = h.container(&p, "a");
    assert_eq!(a.container_id.as_deref(), Some("containerd://c1"));
    assert_eq!(a.image_id, "sha256:img:a");
    assert_eq!(a.restart_count, 0);
    assert!(a.state.unwrap().running.is_some());
    assert_eq!(
        h.events(),
        [
            "Normal Created: Created container: a",
            "Normal Started: Started container a",
            "Normal Created: Created container: b",
            "Normal Started: Started container b",
        ]
    );
    // Nothing more happens by itself.
    pass(secs(3600)).await;
    assert!(h.calls().is_empty());
    assert!(!h.ended());
}

#[tokio::test(start_paused = true)]
async fn a_failed_start_is_unrouted_and_retried_at_once() {
    let h = Harness::new();
    h.fake().state().start_failures = 1;
    let p = web();
    h.send(desired(&p)).await;
    assert_eq!(
        h.calls(),
        [
            "set_up_sandbox u1",
            "ensure_image img:1",
            "create c#0",
            "start c1",
            "remove c1",
            "ensure_image img:1",
            "create c#0",
            "start c2",
        ]
    );
    assert!(!h.routed("c1"), "the failed container's events are no longer routed");
    assert!(h.routed("c2"));
    assert!(h.has_event("Warning Failed: Error: exec format error"));
    assert_eq!(h.phase(&p), "Running");
    assert_eq!(h.container(&p, "c").restart_count, 0);
}

/// A start cut by containerd's death (chaos, seed 2026, trial 49: the task ran, its
/// answer was lost) is removed once containerd is back, not left running podless.
#[tokio::test(start_paused = true)]
async fn a_failed_start_is_removed_even_while_containerd_is_unreachable() {
    let h = Harness::new();
    {
        let mut state = h.fake().state();
        state.start_failures = 1;
        state.unreachable_removals = 2;
    }
    let p = web();
    h.send(desired(&p)).await;
    pass(secs(10)).await;
    let calls = h.calls();
    assert_eq!(
        calls,
        [
            "set_up_sandbox u1",
            "ensure_image img:1",
            "create c#0",
            "start c1",
            "remove c1",
            "remove c1",
            "remove c1",
            "ensure_image img:1",
            "create c#0",
            "start c2",
        ]
    );
    assert_eq!(h.phase(&p), "Running");
}

// ---------------------------------------------------------------------------------------
// Restarts and CrashLoopBackOff

#[tokio::test(start_paused = true)]
async fn an_exit_restarts_at_once_then_the_crash_loop_waits() {
    let h = Harness::new();
    let p = with_grace(web(), 5);
    h.running(&p).await;

    // The first restart is immediate; the old container stays as a dead container (the
    // garbage collector's), its events routed here a moment longer. Its task is deleted
    // once the replacement started, off the replacement's path (B3).
    h.exit("c1", 1).await;
    assert_eq!(h.calls(), ["ensure_image img:1", "create c#1", "start c2", "delete_task c1"]);
    assert!(h.routed("c1"));
    assert_eq!(h.phase(&p), "Running");
    assert_eq!(h.container(&p, "c").restart_count, 1);
    assert_eq!(h.container(&p, "c").container_id.as_deref(), Some("containerd://c2"));
    let last = h.last_terminated(&p, "c");
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));

    // The second waits a second (CrashLoopBackOff), its exit recorded.
    h.exit("c2", 2).await;
    assert_eq!(h.calls(), ["record_exit c2 Error", "delete_task c2"]);
    let waiting = h.waiting(&p, "c");
    assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(h.container(&p, "c").restart_count, 1);
    assert!(h.has_event(
        "Warning BackOff: Back-off restarting failed container c in pod web_default(u1)"
    ));
    pass(secs(1) - MS).await;
    assert!(h.calls().is_empty(), "no start before the backoff");
    pass(MS).await;
    assert!(!h.routed("c1"), "no longer, a second later");
    assert_eq!(h.calls(), ["ensure_image img:1", "create c#2", "start c3"]);
    assert_eq!(h.container(&p, "c").restart_count, 2);
    assert_eq!(h.phase(&p), "Running");

    // The pod goes: its containers are removed, the dead ones with its sandbox.
    h.send(Message::Desired(None)).await;
    assert_eq!(h.calls(), ["kill c3 TERM", "task c3"]);
    h.exit("c3", 143).await;
    assert_eq!(h.calls(), ["remove c3", "tear_down u1"]);
    assert!(h.shared.statuses.get("u1").is_none());
    pass(secs(1)).await;
    assert!(h.ended());
    assert!(h.calls().is_empty());
}

// ---------------------------------------------------------------------------------------
// Image pulls and the sandbox

#[tokio::test(start_paused = true)]
async fn an_image_that_cannot_be_pulled_backs_off() {
    let h = Harness::new();
    h.fake().state().pull_failures.insert("img:1".into(), 2);
    let p = web();
    h.send(desired(&p)).await;
    assert_eq!(h.calls(), ["set_up_sandbox u1", "ensure_image img:1"]);
    assert_eq!(h.waiting(&p, "c").reason.as_deref(), Some("ErrImagePull"));
    assert_eq!(h.waiting(&p, "c").message.as_deref(), Some("registry unreachable"));
    assert_eq!(h.phase(&p), "Pending");
    assert!(h.has_event("Warning Failed: Error: ErrImagePull"));

    // The first retry within 0.5–1 s: fails again, ImagePullBackOff.
    pass(secs(1) / 2 - MS).await;
    assert!(h.calls().is_empty());
    pass(secs(1) / 2 + MS).await;
    assert_eq!(h.calls(), ["ensure_image img:1"]);
    assert_eq!(h.waiting(&p, "c").reason.as_deref(), Some("ImagePullBackOff"));
    assert!(h.has_event("Normal BackOff: Back-off pulling image \"img:1\""));
    assert!(h.has_event("Warning Failed: Error: ImagePullBackOff"));

    // The next within 1–2 s of that: pulled, created, started.
    pass(secs(1) - MS).await;
    assert!(h.calls().is_empty());
    pass(secs(2)).await;
    assert_eq!(h.calls(), ["ensure_image img:1", "create c#0", "start c1"]);
    assert_eq!(h.phase(&p), "Running");
    assert_eq!(h.container(&p, "c").restart_count, 0);
}

#[tokio::test(start_paused = true)]
async fn a_sandbox_that_fails_is_set_up_again_on_backoff() {
    let h = Harness::new();
    h.fake().state().sandbox_failures = 2;
    let p = web();
    h.send(desired(&p)).await;
    assert_eq!(h.calls(), ["set_up_sandbox u1"]);
    assert_eq!(h.phase(&p), "Pending");
    let ready = h.condition(&p, "PodReadyToStartContainers");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("NetworkNotReady"));
    assert_eq!(h.waiting(&p, "c").reason.as_deref(), Some("ContainerCreating"));
    assert_eq!(h.waiting(&p, "c").message.as_deref(), Some("cni: no route"));
    assert!(
        h.has_event("Warning FailedCreatePodSandBox: Failed to create pod sandbox: cni: no route")
    );

    pass(secs(1) / 2 - MS).await;
    assert!(h.calls().is_empty());
    pass(secs(1) / 2 + MS).await;
    assert_eq!(h.calls(), ["set_up_sandbox u1"], "retried within 0.5–1 s");
    pass(secs(1) - MS).await;
    assert!(h.calls().is_empty(), "the next waits 1–2 s");
    pass(secs(2)).await;
    assert_eq!(h.calls(), ["set_up_sandbox u1", "ensure_image img:1", "create c#0", "start c1"]);
    assert_eq!(h.condition(&p, "PodReadyToStartContainers").status, "True");
    assert_eq!(h.phase(&p), "Running");
}

// ---------------------------------------------------------------------------------------
// Stopping

#[tokio::test(start_paused = true)]
async fn a_pod_no_longer_desired_stops_gracefully_and_is_removed() {
    let h = Harness::new();
    let p = with_grace(web(), 5);
    h.running(&p).await;
    h.send(Message::Desired(None)).await;
    assert_eq!(h.calls(), ["kill c1 TERM", "task c1"]);
    assert!(h.has_event("Normal Killing: Stopping container c"));
    pass(secs(5) - MS).await;
    assert!(h.calls().is_empty(), "the grace period");
    pass(MS).await;
    assert_eq!(h.calls(), ["kill c1 KILL"]);
    assert!(!h.ended());
    h.exit("c1", 137).await;
    assert_eq!(h.calls(), ["remove c1", "tear_down u1"]);
    assert!(h.shared.statuses.get("u1").is_none(), "its status is removed");
    assert!(!h.routed("c1"));
    assert!(h.ended());
    let inbox = (&mut { h.worker }).await.unwrap();
    drop(inbox);
}

#[tokio::test(start_paused = true)]
async fn a_container_that_does_not_exit_after_sigkill_is_removed_anyway() {
    let h = Harness::new();
    let p = with_grace(web(), 2);
    h.running(&p).await;
    h.send(Message::Desired(None)).await;
    pass(secs(2)).await;
    assert_eq!(h.calls(), ["kill c1 TERM", "task c1", "kill c1 KILL"]);
    pass(pod_worker::KILL_WAIT - MS).await;
    assert!(h.calls().is_empty());
    pass(MS).await;
    assert_eq!(h.calls(), ["remove c1", "tear_down u1"]);
    assert!(h.ended());
}

#[tokio::test(start_paused = true)]
async fn a_stop_finds_a_container_that_already_exited() {
    let h = Harness::new();
    let p = web();
    h.running(&p).await;
    // Its exit was missed: the stop's check finds it.
    h.fake().set_task("c1", TaskState::Missing);
    h.send(Message::Desired(None)).await;
    assert_eq!(h.calls(), ["kill c1 TERM", "task c1", "remove c1", "tear_down u1"]);
    assert!(h.ended());
}

#[tokio::test(start_paused = true)]
async fn m10_a_new_uid_under_the_name_starts_after_the_old_pod_is_gone() {
    let h = Harness::new();
    let old = with_grace(web(), 3);
    h.running(&old).await;
    let new = pod("u2", &[("c", "img:2")]);
    h.send(desired(&new)).await;
    assert_eq!(h.calls(), ["kill c1 TERM", "task c1"]);
    pass(secs(1)).await;
    assert!(h.calls().is_empty(), "nothing of u2 while u1 stops");
    h.exit("c1", 143).await;
    assert_eq!(
        h.calls(),
        [
            "remove c1",
            "tear_down u1",
            "set_up_sandbox u2",
            "ensure_image img:2",
            "create c#0",
            "start c2",
        ]
    );
    assert!(h.shared.statuses.get("u1").is_none());
    assert_eq!(h.phase(&new), "Running");
    assert_eq!(h.container(&new, "c").restart_count, 0);
    assert!(!h.ended());
}

// ---------------------------------------------------------------------------------------
// Adoption

#[tokio::test(start_paused = true)]
async fn adopts_running_containers_without_starting_them() {
    let p = web();
    let h = Harness::with_found(vec![found_running("old-c", "u1", &first_container(&p), 3)]);
    h.send(desired(&p)).await;
    assert_eq!(h.calls(), ["set_up_sandbox u1"], "no create, no start");
    assert!(h.routed("old-c"), "watched");
    assert_eq!(h.phase(&p), "Running");
    let c = h.container(&p, "c");
    assert_eq!(c.restart_count, 3, "from its label");
    assert_eq!(c.container_id.as_deref(), Some("containerd://old-c"));
    assert!(!h.events().iter().any(|e| e.contains("Started")));
    // Its exit is the worker's like any other.
    h.exit("old-c", 1).await;
    assert_eq!(h.calls(), ["ensure_image img:1", "create c#4", "start c1", "delete_task old-c"]);
    assert_eq!(h.container(&p, "c").restart_count, 4);
}

#[tokio::test(start_paused = true)]
async fn m10_containers_an_earlier_run_left_for_another_uid_stop_first() {
    let p = web();
    let c = first_container(&p);
    let mut stale = found_running("s1", "u0", &c, 0);
    stale.grace = Some(secs(4));
    let h = Harness::with_found(vec![stale]);
    h.send(desired(&p)).await;
    assert_eq!(h.calls(), ["kill s1 TERM", "task s1"]);
    assert!(h.routed("s1"), "its exit is awaited");
    pass(secs(4)).await;
    assert_eq!(h.calls(), ["kill s1 KILL"]);
    h.exit("s1", 137).await;
    assert_eq!(
        h.calls(),
        [
            "remove s1",
            "tear_down u0",
            "set_up_sandbox u1",
            "ensure_image img:1",
            "create c#0",
            "start c1"
        ]
    );
    assert_eq!(h.phase(&p), "Running");
}

// ---------------------------------------------------------------------------------------
// The kernel and containerd both report an exit

#[tokio::test(start_paused = true)]
async fn the_kernels_exit_first_restarts_once_and_reaps_in_the_background() {
    let h = Harness::new();
    let p = web();
    h.running(&p).await;
    h.exit("c1", 1).await; // the immediate restart
    h.calls();
    // SIGKILL, as the kernel reports it.
    let reaped = h.fake().hold("delete_task c2 wait");
    h.kernel_exit("u1", "c2", 9).await;
    assert_eq!(h.calls(), ["record_exit c2 Error", "delete_task c2 wait"]);
    assert_eq!(h.waiting(&p, "c").reason.as_deref(), Some("CrashLoopBackOff"));
    let last = h.last_terminated(&p, "c");
    assert_eq!((last.exit_code, last.signal), (137, Some(9)));
    // containerd's word for the same exit, still routed to the worker, changes nothing.
    h.exit("c2", 137).await;
    assert!(h.calls().is_empty());
    // One restart, after the backoff, while the reaping is still under way.
    pass(secs(1)).await;
    assert_eq!(h.calls(), ["ensure_image img:1", "create c#2", "start c3"]);
    assert_eq!(h.container(&p, "c").restart_count, 2);
    pass(secs(60)).await;
    assert!(h.calls().is_empty(), "exactly one restart");
    // The exit went to the pod's exec audit log too.
    let audit = h.shared.ebpf.audit("u1");
    assert_eq!(audit.len(), 1);
    assert_eq!((audit[0].container.as_str(), audit[0].container_id.as_str()), ("c", "c2"));
    assert_eq!((audit[0].exit_code, audit[0].signal), (Some(137), Some(9)));
    // The agent leaves: the reaping is awaited.
    h.send(Message::Leave).await;
    assert!(!h.ended());
    reaped.open();
    settle().await;
    assert!(h.ended());
}

#[tokio::test(start_paused = true)]
async fn the_kernels_word_after_containerds_exit_still_reaches_the_worker() {
    let h = Harness::new();
    let p = web();
    h.running(&p).await;
    // Restarted at once: c1 stays routed to the worker a moment.
    h.exit("c1", 137).await;
    assert_eq!(h.last_terminated(&p, "c").signal, None, "containerd knows no signal");
    h.kernel_exit("u1", "c1", 9).await;
    assert_eq!(h.last_terminated(&p, "c").signal, Some(9), "the kernel does");
    pass(secs(1)).await;
    assert!(!h.routed("c1"), "no longer once kept dead a while");
    // Backing off: c2 stays routed until its restart keeps it dead.
    h.exit("c2", 137).await;
    assert_eq!(h.waiting(&p, "c").reason.as_deref(), Some("CrashLoopBackOff"));
    h.calls();
    h.kernel_exit("u1", "c2", 9).await;
    let task =
        Task { tgid: 4243, pid: 4243, ns_tgid: 7, cgroup_id: 77, ktime_ns: 0, comm: "tail".into() };
    h.shared.routes.kernel(ebpf::Observed {
        pod_uid: "u1".into(),
        container_id: "c2".into(),
        event: KernelEvent::OomKill { task, uid: 0 },
    });
    settle().await;
    assert!(h.calls().is_empty(), "no second restart");
    let last = h.last_terminated(&p, "c");
    assert_eq!(last.signal, Some(9));
    assert_eq!(last.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(last.message.as_deref(), Some("The OOM killer chose pid 4243 (tail)"));
    pass(secs(1)).await;
    assert_eq!(h.calls(), ["ensure_image img:1", "create c#2", "start c3"]);
    pass(secs(1)).await;
    assert!(!h.routed("c2"));
}

// ---------------------------------------------------------------------------------------
// Node shutdown and the agent leaving

#[tokio::test(start_paused = true)]
async fn node_shutdown_stops_the_pod_and_leaves_its_containers() {
    let h = Harness::new();
    let p = with_grace(pod("u1", &[("a", "img:a"), ("b", "img:b")]), 10);
    h.running(&p).await;
    h.send(Message::Shutdown { grace: None }).await;
    assert_eq!(h.calls(), ["kill c1 TERM", "kill c2 TERM", "task c1", "task c2"]);
    h.exit("c1", 0).await;
    assert!(!h.ended(), "b still runs");
    pass(secs(10)).await;
    assert_eq!(h.calls(), ["kill c2 KILL"]);
    h.exit("c2", 137).await;
    assert!(h.calls().is_empty(), "nothing removed, no restart");
    assert!(h.ended());
    let status = h.status(&p);
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Terminated"));
    let disruption = h.condition(&p, "DisruptionTarget");
    assert_eq!(disruption.status, "True");
    assert_eq!(disruption.reason.as_deref(), Some("TerminationByKubelet"));
    let a = h.terminated(&p, "a");
    assert_eq!((a.exit_code, a.reason.as_deref()), (0, Some("Completed")));
    let b = h.terminated(&p, "b");
    assert_eq!((b.exit_code, b.reason.as_deref()), (137, Some("Error")));
    assert_eq!(h.container(&p, "b").restart_count, 0);
}

#[tokio::test(start_paused = true)]
async fn leaving_kills_nothing_and_awaits_the_cleanup_under_way() {
    let h = Harness::new();
    let p = web();
    h.running(&p).await;
    let reaped = h.fake().hold("delete_task c1 wait");
    h.kernel_exit("u1", "c1", 9).await;
    assert_eq!(h.calls(), ["ensure_image img:1", "create c#1", "start c2", "delete_task c1 wait"]);
    h.send(Message::Leave).await;
    assert!(!h.ended(), "the reaping of c1 is under way");
    pass(secs(3600)).await;
    assert!(!h.ended());
    reaped.open();
    settle().await;
    assert!(h.ended());
    assert!(h.calls().is_empty(), "no kill, no removal: c2 is left running");
    assert_eq!(h.phase(&p), "Running", "the status stays for the next agent");
}

mod probes;
