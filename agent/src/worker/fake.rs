//! A recording fake [`PodRuntime`] for the pod workers' and the dispatcher's unit tests,
//! on tokio's paused clock: every call is a line of its log ("create c#0", "kill c1
//! TERM"), answers are scripted, containerd's event stream is a channel the test feeds.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;
use outpost_core::lifecycle::CrashLoopConfig;
use outpost_core::pod::FullName;
use outpost_core::pod_worker::{
    self, Found, FoundTask, SandboxProblem, SandboxReason, StartFailure, StopSignal, Terminated,
    WaitingReason, container_hash,
};
use tokio::sync::{Semaphore, mpsc};

use super::pod_runtime::{Created, NewContainer, PodRuntime, SetUp, TaskState};
use super::probe::Prober;
use super::{Routes, Shared};
use crate::apiserver::Recorder;
use crate::ebpf;
use crate::runtime::container;
use crate::runtime::events::TaskEvent;
use crate::runtime::exec::{self, ExecOutput};
use crate::status::StatusStore;
use crate::worker::metrics::Metrics;

/// The address the fake gives every pod.
pub fn pod_ip() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))
}

/// A [`PodRuntime`] that records every call as a line ("create c#0", "kill c1 TERM") and
/// answers as scripted. Container ids are c1, c2, … in creation order.
#[derive(Debug, Default)]
pub struct Fake(Mutex<FakeState>);

#[derive(Debug, Default)]
pub struct FakeState {
    pub log: Vec<String>,
    pub ids: u32,
    /// Sandbox set-ups still to fail.
    pub sandbox_failures: u32,
    /// Pulls still to fail, by image.
    pub pull_failures: HashMap<String, u32>,
    /// Starts still to fail.
    pub start_failures: u32,
    /// Removals still to fail as if containerd were unreachable.
    pub unreachable_removals: u32,
    /// What `task()` answers, by container id (Running when not scripted).
    pub tasks: HashMap<String, TaskState>,
    /// Calls that wait until their gate is opened (by log line).
    pub holds: HashMap<String, Arc<Semaphore>>,
    /// What `list()` answers.
    pub found: Vec<(FullName, Found)>,
    /// The workers' routes: a start checks that the container's events are routed.
    pub routes: Option<Routes>,
    /// What `exec` answers, by command (joined with spaces): exit codes in turn, then 0.
    pub exec_results: HashMap<String, VecDeque<i32>>,
    /// What `termination_message` answers, by container id.
    pub termination_messages: HashMap<String, String>,
    /// containerd's event stream: what the test sends is delivered (taken by the first
    /// watch).
    pub events: Option<mpsc::UnboundedReceiver<TaskEvent>>,
}

impl Fake {
    pub fn state(&self) -> MutexGuard<'_, FakeState> {
        self.0.lock().unwrap()
    }

    /// Logs the call; waits while it is held.
    async fn call(&self, line: String) {
        let gate = {
            let mut state = self.state();
            let gate = state.holds.get(&line).cloned();
            state.log.push(line);
            gate
        };
        if let Some(gate) = gate {
            let _ = gate.acquire().await;
        }
    }

    /// Holds the call logged as `line` until [`Gate::open`].
    pub fn hold(&self, line: &str) -> Gate {
        let gate = Arc::new(Semaphore::new(0));
        self.state().holds.insert(line.to_owned(), gate.clone());
        Gate(gate)
    }

    pub fn set_task(&self, id: &str, task: TaskState) {
        self.state().tasks.insert(id.to_owned(), task);
    }

    /// The sender of containerd's event stream (the dispatcher's watch delivers it).
    pub fn events(&self) -> mpsc::UnboundedSender<TaskEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.state().events = Some(rx);
        tx
    }

    /// The calls since the last look.
    pub fn calls(&self) -> Vec<String> {
        std::mem::take(&mut self.state().log)
    }
}

#[derive(Debug)]
pub struct Gate(Arc<Semaphore>);

impl Gate {
    pub fn open(&self) {
        self.0.close();
    }
}

fn signal(signal: StopSignal) -> &'static str {
    match signal {
        StopSignal::Term => "TERM",
        StopSignal::Kill => "KILL",
    }
}

impl PodRuntime for Fake {
    /// The pod UID it was set up for.
    type Sandbox = String;
    /// The image reference.
    type Image = String;

    async fn set_up_sandbox(&self, pod: &Pod) -> Result<SetUp<String>, SandboxProblem> {
        let uid = outpost_core::pod::uid(pod).to_owned();
        self.call(format!("set_up_sandbox {uid}")).await;
        let mut state = self.state();
        if state.sandbox_failures > 0 {
            state.sandbox_failures -= 1;
            return Err(SandboxProblem {
                reason: SandboxReason::NetworkNotReady,
                message: "cni: no route".into(),
            });
        }
        Ok(SetUp { sandbox: uid, ips: vec![pod_ip()], fresh: true })
    }

    async fn refresh_volumes(&self, pod: &Pod) {
        self.call(format!("refresh_volumes {}", outpost_core::pod::uid(pod))).await;
    }

    async fn release_volumes(&self, uid: &str) {
        self.call(format!("release_volumes {uid}")).await;
    }

    async fn tear_down_sandbox(&self, uid: &str) {
        self.call(format!("tear_down {uid}")).await;
    }

    async fn ensure_image(
        &self,
        _pod: &Pod,
        container: &Container,
    ) -> Result<String, StartFailure> {
        let image = container.image.clone().unwrap_or_default();
        self.call(format!("ensure_image {image}")).await;
        let mut state = self.state();
        if let Some(failures) = state.pull_failures.get_mut(&image).filter(|n| **n > 0) {
            *failures -= 1;
            return Err(StartFailure::new(
                WaitingReason::ErrImagePull,
                "registry unreachable".into(),
            ));
        }
        Ok(image)
    }

    async fn create_container(
        &self,
        new: NewContainer<'_, String, String>,
    ) -> Result<Created, StartFailure> {
        let NewContainer { pod, sandbox, container, image, restart_count, hash, target: _ } = new;
        assert_eq!(sandbox, outpost_core::pod::uid(pod), "the pod's own sandbox");
        assert_eq!(Some(image), container.image.as_ref());
        assert_eq!(hash, container_hash(container));
        self.call(format!("create {}#{restart_count}", container.name)).await;
        let mut state = self.state();
        state.ids += 1;
        Ok(Created {
            id: format!("c{}", state.ids),
            image_id: format!("sha256:{image}"),
            started_at: Timestamp::now(),
        })
    }

    async fn termination_message(
        &self,
        _pod: &Pod,
        _container: &Container,
        id: &str,
        _exit_code: i32,
    ) -> Option<String> {
        self.state().termination_messages.get(id).cloned()
    }

    async fn start_container(&self, id: &str) -> Result<(), StartFailure> {
        let routed = self.state().routes.as_ref().is_some_and(|r| r.get(id).is_some());
        let unrouted = if routed { "" } else { " UNROUTED" };
        self.call(format!("start {id}{unrouted}")).await;
        let mut state = self.state();
        if state.start_failures > 0 {
            state.start_failures -= 1;
            return Err(StartFailure::new(
                WaitingReason::RunContainerError,
                "exec format error".into(),
            ));
        }
        Ok(())
    }

    async fn kill(&self, id: &str, s: StopSignal) -> Result<(), container::Error> {
        self.call(format!("kill {id} {}", signal(s))).await;
        Ok(())
    }

    async fn task(&self, id: &str) -> Result<TaskState, container::Error> {
        self.call(format!("task {id}")).await;
        Ok(self.state().tasks.get(id).copied().unwrap_or(TaskState::Running))
    }

    async fn delete_task(&self, id: &str, wait: bool) -> Result<(), container::Error> {
        self.call(format!("delete_task {id}{}", if wait { " wait" } else { "" })).await;
        Ok(())
    }

    async fn record_exit(&self, id: &str, t: &Terminated) -> Result<(), container::Error> {
        self.call(format!("record_exit {id} {}", t.reason.as_str())).await;
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<(), container::Error> {
        self.call(format!("remove {id}")).await;
        let mut state = self.state();
        if state.unreachable_removals > 0 {
            state.unreachable_removals -= 1;
            let source = tonic::Status::unavailable("connection refused");
            return Err(container::Error::Containerd { id: id.into(), step: "removing", source });
        }
        Ok(())
    }

    async fn exec(
        &self,
        id: &str,
        command: &[String],
        _timeout: Duration,
    ) -> Result<ExecOutput, exec::Error> {
        let command = command.join(" ");
        self.call(format!("exec {id} {command}")).await;
        let exit_code =
            self.state().exec_results.get_mut(&command).and_then(VecDeque::pop_front).unwrap_or(0);
        Ok(ExecOutput { exit_code, output: format!("exit {exit_code}").into_bytes() })
    }

    async fn list(&self) -> Result<Vec<(FullName, Found)>, container::Error> {
        self.call("list".into()).await;
        Ok(self.state().found.clone())
    }

    async fn watch_events(&self, mut deliver: impl FnMut(TaskEvent) -> bool + Send) {
        let events = self.state().events.take();
        let Some(mut events) = events else { return std::future::pending().await };
        while let Some(event) = events.recv().await {
            if !deliver(event) {
                return;
            }
        }
    }

    async fn remove_orphans(&self, owned: &HashSet<String>) {
        let mut owned: Vec<&str> = owned.iter().map(String::as_str).collect();
        owned.sort_unstable();
        self.call(format!("remove_orphans but {}", owned.join(","))).await;
    }

    async fn resize(
        &self,
        _pod: &k8s_openapi::api::core::v1::Pod,
        _actual: &k8s_openapi::api::core::v1::Pod,
        containers: &[outpost_core::pod_worker::ResizeContainer],
    ) -> (Vec<(String, k8s_openapi::api::core::v1::ResourceRequirements)>, Option<String>) {
        let ids: Vec<&str> = containers.iter().map(|c| c.container_id.as_str()).collect();
        self.call(format!("resize {}", ids.join(","))).await;
        (containers.iter().map(|c| (c.container_id.clone(), c.resources.clone())).collect(), None)
    }
}

/// Lets every task that can run, run (the fake never waits unless held): yields leave
/// tokio's paused clock where it is.
pub async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// Lets `d` pass on the paused clock, everything running meanwhile.
pub async fn pass(d: Duration) {
    tokio::time::sleep(d).await;
    settle().await;
}

/// What the workers share, on a fake runtime.
pub fn shared() -> Arc<Shared<Fake>> {
    routed(base())
}

/// What the workers share, on a fake runtime, admitting pods against `node` (K4).
pub fn shared_on(node: outpost_core::node_admission::Node) -> Arc<Shared<Fake>> {
    routed(base().with_node(tokio::sync::watch::channel(node).1))
}

/// What the workers share, on a fake runtime, stopping pods by `groups` at a node
/// shutdown (J3).
pub fn shared_with_shutdown_groups(
    groups: Vec<outpost_core::node_shutdown::PriorityGroup>,
) -> Arc<Shared<Fake>> {
    routed(base().with_shutdown_groups(groups))
}

fn routed(shared: Shared<Fake>) -> Arc<Shared<Fake>> {
    let shared = Arc::new(shared);
    shared.runtime.state().routes = Some(shared.routes.clone());
    shared
}

fn base() -> Shared<Fake> {
    let settings = pod_worker::Settings {
        crash_loop: CrashLoopConfig::default(),
        host_ip: Some(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 10))),
        seed: 7,
        facts: Arc::default(),
    };
    Shared::with_runtime(
        Fake::default(),
        settings,
        StatusStore::default(),
        Recorder::default(),
        Metrics::default(),
        ebpf::Handle::default(),
        Prober::new().expect("the probes' HTTP client"),
    )
}

/// A running container `id` of pod `uid` that an earlier run left.
pub fn found_running(id: &str, uid: &str, container: &Container, restart_count: u32) -> Found {
    Found {
        id: id.into(),
        pod_uid: Some(uid.into()),
        container: Some(container.name.clone()),
        restart_count,
        hash: Some(container_hash(container)),
        started_at: Some(Timestamp::from_second(1_700_000_000).unwrap()),
        grace: Some(Duration::from_secs(30)),
        task: FoundTask::Running,
        recorded_exit: pod_worker::RecordedExit::default(),
        resources: None,
    }
}

/// The first container of `p`'s spec.
pub fn first_container(p: &Pod) -> Container {
    p.spec.as_ref().unwrap().containers[0].clone()
}
