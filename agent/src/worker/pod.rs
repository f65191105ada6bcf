//! One pod worker: the loop that takes desired-pod updates and task events for one pod
//! full name and brings containerd to match, one step at a time. Each wake-up (a message,
//! or a restart/retry time coming due) ends in one `sync`, then the status is published.

mod adopt;
mod kernel;
mod stop;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use outpost_core::backoff::Backoff;
use outpost_core::lifecycle::RestartPolicy;
use outpost_core::pod::{self, FullName, Source};
use tokio::time::Instant;
use tracing::Instrument as _;

use super::sandbox::{self, Sandbox};
use super::start::{self, container_hash};
use super::state::{self, SandboxProblem, Slot, SlotState, Terminated};
use super::{Inbox, Message, Outbox, Runtime};
use crate::error_chain::describe;
use crate::runtime::container::{
    self, LABEL_EXIT_CODE, LABEL_FINISHED_AT, LABEL_POD_UID, LABEL_REASON, Listed,
};
use crate::runtime::events::{TaskEvent, timestamp};
use crate::sync::events::{EventType, pod_ref, reason};

/// After SIGKILL, how long to wait for the exit before giving up on it.
const KILL_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(super) struct PodWorker {
    runtime: Arc<Runtime>,
    name: FullName,
    outbox: Outbox,
    desired: Option<(Source, Arc<Pod>)>,
    current: Option<Current>,
    /// Containers an earlier agent left for this full name, not yet adopted or removed.
    adoptable: Vec<Listed>,
    /// The node shuts down: stop, report, end.
    shutdown: bool,
}

/// The pod whose sandbox and containers exist.
#[derive(Debug)]
struct Current {
    pod: Arc<Pod>,
    /// The source the merge took the pod from (the metrics' label).
    source: Source,
    uid: String,
    /// When the merge first saw the pod (`config.seen`), until its first container runs;
    /// `None` for a pod adopted with containers that already ran.
    seen: Option<Timestamp>,
    started: Timestamp,
    sandbox: Option<Sandbox>,
    problem: Option<SandboxProblem>,
    sandbox_retry: Instant,
    sandbox_backoff: Backoff,
    slots: Vec<Slot>,
}

enum Wake {
    Message(Message),
    Timer,
}

impl PodWorker {
    pub(super) fn new(
        runtime: Arc<Runtime>,
        name: FullName,
        outbox: Outbox,
        adoptable: Vec<Listed>,
    ) -> PodWorker {
        PodWorker {
            runtime,
            name,
            outbox,
            desired: None,
            current: None,
            adoptable,
            shutdown: false,
        }
    }

    /// Runs until nothing is desired and nothing is left running; hands the inbox back
    /// (messages may have arrived meanwhile).
    pub(super) async fn run(mut self, mut inbox: Inbox) -> Inbox {
        let span = tracing::info_span!("pod", pod.namespace = %self.name.namespace, pod.name = %self.name.name);
        async move {
            loop {
                let wake = match self.next_deadline() {
                    Some(at) => tokio::select! {
                        m = inbox.recv() => m.map(Wake::Message),
                        () = tokio::time::sleep_until(at) => Some(Wake::Timer),
                    },
                    None => inbox.recv().await.map(Wake::Message),
                };
                match wake {
                    None => return inbox,
                    Some(Wake::Message(message)) => self.handle(message).await,
                    Some(Wake::Timer) => {}
                }
                while let Ok(message) = inbox.try_recv() {
                    self.handle(message).await;
                }
                if self.shutdown {
                    self.shut_down(&mut inbox).await;
                    return inbox;
                }
                self.sync(&mut inbox).await;
                self.publish();
                if self.current.is_none() && self.desired.is_none() && self.adoptable.is_empty() {
                    return inbox;
                }
            }
        }
        .instrument(span)
        .await
    }

    fn next_deadline(&self) -> Option<Instant> {
        let current = self.current.as_ref()?;
        if current.sandbox.is_none() {
            return Some(current.sandbox_retry);
        }
        current.slots.iter().filter(|s| !s.is_running()).filter_map(|s| s.retry_at).min()
    }

    async fn handle(&mut self, message: Message) {
        match message {
            Message::Desired(pod) => self.desired = pod,
            Message::Task(TaskEvent::Exit { container_id, exit_status, exited_at }) => {
                self.exited(&container_id, exit_status, exited_at, None).await;
            }
            Message::Kernel(observed) => self.kernel(observed).await,
            Message::Task(TaskEvent::Oom { container_id }) => {
                if let Some(slot) = self.slot_mut(&container_id) {
                    slot.oom_killed = true;
                }
            }
            Message::Task(TaskEvent::Resync) => self.resync().await,
            Message::Shutdown => self.shutdown = true,
        }
    }

    fn slot_mut(&mut self, container_id: &str) -> Option<&mut Slot> {
        let current = self.current.as_mut()?;
        current.slots.iter_mut().find(|s| s.id.as_deref() == Some(container_id))
    }

    /// After the event stream had a gap: look at every running container's task once.
    async fn resync(&mut self) {
        let running: Vec<String> = self
            .current
            .iter()
            .flat_map(|c| &c.slots)
            .filter(|s| s.is_running())
            .filter_map(|s| s.id.clone())
            .collect();
        for id in running {
            if let Ok(Some(process)) = container::task(&self.runtime.containerd, &id).await
                && process.status() == containerd_client::types::v1::Status::Stopped
            {
                let exited_at = process.exited_at.as_ref().and_then(timestamp);
                self.exited(&id, process.exit_status, exited_at, None).await;
            }
        }
    }

    /// A running container's task exited: reap it, record how, and decide on a restart.
    /// `kernel`: the kernel said so (eBPF), before containerd may have seen it.
    async fn exited(
        &mut self,
        id: &str,
        exit_status: u32,
        exited_at: Option<Timestamp>,
        kernel: Option<kernel::KernelExit>,
    ) {
        let runtime = self.runtime.clone();
        let Some(current) = self.current.as_mut() else { return };
        let policy = RestartPolicy::of(&current.pod);
        let pod = current.pod.clone();
        let (namespace, name, uid) = (&self.name.namespace, &self.name.name, &current.uid);
        let Some(slot) = current.slots.iter_mut().find(|s| s.id.as_deref() == Some(id)) else {
            return;
        };
        let SlotState::Running { started_at } = slot.state else { return };
        let exit_code = i32::try_from(exit_status).unwrap_or(i32::MAX);
        let finished_at = exited_at.unwrap_or_else(Timestamp::now);
        let reason = state::exit_reason(exit_code, slot.oom_killed);
        let restarts = policy.restarts(exit_code);
        let signal = kernel.and_then(|k| k.signal);
        tracing::info!(
            container = slot.name,
            container_id = id,
            exit_code,
            signal,
            reason,
            restarts,
            source = if kernel.is_some() { "kernel" } else { "containerd" },
            "container exited"
        );
        let object = pod_ref(&pod, Some(&slot.name));
        if slot.oom_killed {
            // kubelet shows this only in the container's status; an Event makes it visible
            // in `kubectl get events` too.
            let victim =
                slot.oom_victim.as_deref().map(|v| format!(" (it chose {v})")).unwrap_or_default();
            runtime.events.emit(
                &object,
                EventType::Warning,
                reason::OOM_KILLED,
                format!("Container {} was killed by the kernel: out of memory{victim}", slot.name),
            );
        }
        runtime.routes.remove(id);
        if kernel.is_some() {
            // containerd may not have reaped the task yet: delete it once it has, off the
            // path of this status update and restart decision.
            let containerd = runtime.containerd.clone();
            let (container, id) = (slot.name.clone(), id.to_owned());
            tokio::spawn(async move {
                if let Err(e) = container::reap(&containerd, &id, container::REAP_WAIT).await {
                    tracing::warn!(container, container_id = id, error = %describe(&e), "cannot delete the exited task");
                }
            });
        } else if let Err(e) = container::delete_task(&runtime.containerd, id).await {
            tracing::warn!(container = slot.name, error = %describe(&e), "cannot delete the exited task");
        }
        let message = slot
            .oom_victim
            .take()
            .filter(|_| slot.oom_killed)
            .map(|victim| format!("The OOM killer chose {victim}"));
        slot.oom_killed = false;
        let terminated = Terminated {
            container_id: id.to_owned(),
            exit_code,
            reason: reason.to_owned(),
            started_at: Some(started_at),
            finished_at: Some(finished_at),
            signal,
            message,
        };
        let delay = restarts.then(|| {
            let ran_for = finished_at.duration_since(started_at).unsigned_abs();
            slot.crash_loop.after_exit(ran_for)
        });
        // A container restarted at once is removed in a moment: no need to record how it
        // ended (a later run that finds it without its task restarts it all the same).
        if delay != Some(Duration::ZERO) {
            record_exit(&runtime, id, &terminated).await;
        }
        if let Some(delay) = delay {
            tracing::debug!(container = slot.name, restart_in = ?delay, "restarting");
            if !delay.is_zero() {
                runtime.events.emit(
                    &object,
                    EventType::Warning,
                    reason::BACK_OFF,
                    format!(
                        "Back-off restarting failed container {} in pod {name}_{namespace}({uid})",
                        slot.name
                    ),
                );
            }
            slot.state = SlotState::Waiting {
                reason: if delay.is_zero() { "ContainerCreating" } else { "CrashLoopBackOff" }
                    .to_owned(),
                message: Some(format!(
                    "back-off {delay:?} restarting failed container={} pod={name}_{namespace}({uid})",
                    slot.name
                )),
            };
            slot.last_termination = Some(terminated);
            slot.retry_at = Some(Instant::now() + delay);
        } else {
            tracing::info!(
                container = slot.name,
                exit_code,
                reason,
                "container exited; not restarted (restartPolicy)"
            );
            slot.state = SlotState::Terminated(terminated);
            slot.retry_at = None;
        }
    }

    async fn sync(&mut self, inbox: &mut Inbox) {
        let desired = self.desired.clone().filter(|(_, p)| p.metadata.deletion_timestamp.is_none());
        let desired_uid = desired.as_ref().map(|(_, p)| pod::uid(p).to_owned());
        // M10: whatever runs under this name for another pod (or a deleted one) stops
        // first, completely, before anything of the desired pod starts.
        let stale: Vec<Listed> = self
            .adoptable
            .extract_if(.., |c| c.label(LABEL_POD_UID) != desired_uid.as_deref())
            .collect();
        if !stale.is_empty() {
            self.stop_stale(inbox, stale).await;
        }
        if self.current.as_ref().is_some_and(|c| Some(&c.uid) != desired_uid.as_ref()) {
            self.stop_current(inbox).await;
        }
        let Some((source, pod)) = desired else { return };
        let adoptable = std::mem::take(&mut self.adoptable);
        let runtime = self.runtime.clone();
        let current = match &mut self.current {
            Some(current) => {
                current.pod = pod;
                current.source = source;
                current
            }
            None => {
                // The kernel's events of its cgroups resolve to it from its first container on.
                runtime.ebpf.track_pod(pod::uid(&pod));
                let current = Current::adopt(&runtime, source, pod, adoptable, &self.outbox).await;
                self.current.insert(current)
            }
        };
        current.sync(&runtime, &self.outbox).await;
    }

    fn publish(&self) {
        let Some(current) = &self.current else { return };
        let status = current.status(self.runtime.settings.host_ip);
        self.runtime.statuses.set(&current.uid, status);
    }
}

impl Current {
    /// The pod's status as kubelet would report it now.
    fn status(&self, host_ip: Option<std::net::IpAddr>) -> k8s_openapi::api::core::v1::PodStatus {
        let ips = self.sandbox.as_ref().map(|s| s.ips.as_slice()).unwrap_or_default();
        state::pod_status(&self.pod, &self.slots, ips, host_ip, self.started, self.problem.as_ref())
    }
}

impl Current {
    async fn sync(&mut self, runtime: &Runtime, outbox: &Outbox) {
        let now = Instant::now();
        if self.sandbox.is_none() {
            if now < self.sandbox_retry {
                return;
            }
            match sandbox::set_up(runtime, &self.pod).await {
                Ok(sandbox) => {
                    self.sandbox = Some(sandbox);
                    self.problem = None;
                    self.sandbox_backoff.reset();
                }
                Err(problem) => {
                    let delay = self.sandbox_backoff.next_delay(fastrand::f64());
                    tracing::warn!(reason = problem.reason, error = problem.message, retry_in = ?delay, "cannot set up the pod sandbox");
                    runtime.events.emit(
                        &pod_ref(&self.pod, None),
                        EventType::Warning,
                        reason::FAILED_CREATE_POD_SANDBOX,
                        format!("Failed to create pod sandbox: {}", problem.message),
                    );
                    for slot in self.slots.iter_mut().filter(|s| !s.is_running()) {
                        slot.state = SlotState::Waiting {
                            reason: "ContainerCreating".to_owned(),
                            message: Some(problem.message.clone()),
                        };
                    }
                    self.problem = Some(problem);
                    self.sandbox_retry = now + delay;
                    return;
                }
            }
        }
        let Some(sandbox) = &self.sandbox else { return };
        let pod = self.pod.clone();
        for container in pod.spec.iter().flat_map(|s| &s.containers) {
            let Some(slot) = self.slots.iter_mut().find(|s| s.name == container.name) else {
                continue;
            };
            let hash = container_hash(container);
            if slot.hash != hash {
                // The container's spec changed (an API pod's image, say): replace it.
                if let Some(id) = slot.id.take() {
                    tracing::info!(container = slot.name, "container spec changed; replacing it");
                    if slot.is_running() {
                        runtime.events.emit(
                            &pod_ref(&pod, Some(&slot.name)),
                            EventType::Normal,
                            reason::KILLING,
                            format!(
                                "Container {} definition changed, will be restarted",
                                slot.name
                            ),
                        );
                    }
                    replace(runtime, &id).await;
                    slot.last_termination = None;
                }
                slot.hash = hash.clone();
                slot.state =
                    SlotState::Waiting { reason: "ContainerCreating".to_owned(), message: None };
                slot.retry_at = Some(now);
            }
            if !matches!(slot.state, SlotState::Waiting { .. })
                || slot.retry_at.is_some_and(|at| at > now)
            {
                continue;
            }
            let restart_count = if slot.ran { slot.restart_count + 1 } else { 0 };
            // The container this start replaces goes afterwards, off the restart's path.
            if let Some(old) = slot.id.take() {
                runtime.routes.remove(&old);
                let containerd = runtime.containerd.clone();
                tokio::spawn(async move {
                    if let Err(e) = container::remove(&containerd, &old).await {
                        tracing::warn!(container_id = old, error = %describe(&e), "cannot remove the replaced container");
                    }
                });
            }
            match start::start(runtime, &pod, sandbox, container, restart_count, &hash, outbox)
                .await
            {
                Ok(started) => {
                    tracing::info!(
                        container = slot.name,
                        container_id = started.id,
                        restart_count,
                        "container started"
                    );
                    if slot.ran {
                        runtime.metrics.container_restarted(self.source);
                    }
                    if let Some(seen) = self.seen.take() {
                        let latency = started.started_at.duration_since(seen).unsigned_abs();
                        runtime.metrics.pod_started(self.source, latency);
                    }
                    slot.id = Some(started.id);
                    slot.image_id = Some(started.image_id);
                    slot.restart_count = restart_count;
                    slot.ran = true;
                    slot.state = SlotState::Running { started_at: started.started_at };
                    slot.retry_at = None;
                    slot.pull_failures = 0;
                    slot.pull_backoff.reset();
                }
                Err(failure) => {
                    let delay = if failure.pull {
                        slot.pull_backoff.next_delay(fastrand::f64())
                    } else {
                        slot.crash_loop.after_exit(Duration::ZERO)
                    };
                    let reason = if failure.pull && slot.pull_failures > 0 {
                        "ImagePullBackOff"
                    } else {
                        failure.reason
                    };
                    if failure.pull {
                        slot.pull_failures += 1;
                    }
                    tracing::warn!(container = slot.name, reason, error = failure.message, retry_in = ?delay, "cannot start container");
                    let object = pod_ref(&pod, Some(&slot.name));
                    if reason == "ImagePullBackOff" {
                        let image = container.image.as_deref().unwrap_or_default();
                        let message = format!("Back-off pulling image \"{image}\"");
                        runtime.events.emit(&object, EventType::Normal, reason::BACK_OFF, message);
                    }
                    // kubelet: the waiting reason for image trouble, the error otherwise.
                    let error = if failure.pull { reason } else { failure.message.as_str() };
                    runtime.events.emit(
                        &object,
                        EventType::Warning,
                        reason::FAILED,
                        format!("Error: {error}"),
                    );
                    slot.state = SlotState::Waiting {
                        reason: reason.to_owned(),
                        message: Some(failure.message),
                    };
                    slot.retry_at = Some(now + delay);
                }
            }
        }
    }
}

/// Records a container's end in its labels, so that a later run knows it.
async fn record_exit(runtime: &Runtime, id: &str, t: &Terminated) {
    let mut labels = std::collections::HashMap::new();
    labels.insert(LABEL_EXIT_CODE.to_owned(), t.exit_code.to_string());
    labels.insert(LABEL_REASON.to_owned(), t.reason.clone());
    if let Some(at) = t.finished_at {
        labels.insert(LABEL_FINISHED_AT.to_owned(), at.to_string());
    }
    if let Err(e) = container::label(&runtime.containerd, id, labels).await {
        tracing::debug!(container_id = id, error = %describe(&e), "cannot label the exited container");
    }
}

/// Removes a container that a new one replaces.
async fn replace(runtime: &Runtime, id: &str) {
    runtime.routes.remove(id);
    if let Err(e) = container::remove(&runtime.containerd, id).await {
        tracing::warn!(container_id = id, error = %describe(&e), "cannot remove the replaced container");
    }
}
