//! A pod worker's decisions, as a pure state machine: [`PodWorker::step`] takes one
//! [`Input`] (a desired-pod update, a runtime result, an exit, a timer) and the time, and
//! returns the [`Action`]s to perform and when to wake it next. The agent's executor
//! performs the actions through the container runtime and feeds their results back as
//! inputs; nothing here waits, sleeps or calls anything.
//!
//! One worker serves one pod full name. Its rules, in the order [`PodWorker::step`]
//! applies them:
//! - a stop under way finishes first: SIGTERM, the grace period, SIGKILL, then the
//!   containers and sandbox are removed;
//! - containers an earlier run left for another pod (or a deleted one) stop before
//!   anything else happens, and so does the current pod when another UID is desired
//!   under its name (M10: the old pod has stopped before the new one's containers start);
//! - the desired pod adopts what an earlier run left of it (running containers are kept);
//! - its sandbox is set up (with backoff), then each container due is started; exits are
//!   restarted by `restartPolicy` with CrashLoopBackOff, image pulls back off apart;
//! - a node shutdown stops the pod's containers gracefully, leaves them in place and
//!   reports the pod as kubelet's graceful node shutdown does.

mod action;
mod adopt;
mod ephemeral;
mod exit;
mod input;
mod kill;
pub mod objects;
mod probing;
mod resizing;
pub mod slot;
pub mod status;
mod stop;
mod sync;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;

pub use self::action::{Action, Metric, ResizeContainer, Step, StopSignal};
pub use self::input::{
    Answers, Desired, Exit, ExitSource, Found, FoundTask, Input, RecordedExit, SandboxProblem,
    SandboxReason, StartFailure, Started,
};
use self::objects::ObjectsWait;
use self::slot::{Slot, SlotState, creating};
pub use self::slot::{Terminated, TerminatedReason, WaitingReason};
use self::status::PodView;
use crate::admission::{self, NodeFacts, Severity};
use crate::backoff::Backoff;
use crate::event_aggregate::{EventType, reason};
use crate::lifecycle::CrashLoopConfig;
use crate::pod::{self, FullName, Source};
use crate::qos::{QosClass, qos_class};

/// After SIGKILL, how long to wait for the exits before giving up on them.
pub const KILL_WAIT: Duration = Duration::from_secs(10);
/// A container whose preStop hook the grace period cut short still gets SIGTERM and
/// this long before SIGKILL (kubelet's `minimumGracePeriodInSeconds`).
pub const MIN_SHUTDOWN_WINDOW: Duration = Duration::from_secs(2);
/// The grace period of containers whose pod is gone and whose labels do not say.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// An exit status as kubelet reports it (`exitCode` is an int32; containerd and the
/// kernel report it unsigned).
pub fn exit_code(status: u32) -> i32 {
    i32::try_from(status).unwrap_or(i32::MAX)
}

/// The time, both ways: monotonic for deadlines, wall for what the status shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub at: Instant,
    pub wall: Timestamp,
}

/// What every worker is configured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub crash_loop: CrashLoopConfig,
    /// The node's address (status.hostIP).
    pub host_ip: Option<IpAddr>,
    /// Seeds the jitter of the backoffs.
    pub seed: u64,
    /// What the node can do: a pod asking for more is refused (A1).
    pub facts: Arc<NodeFacts>,
}

/// Why a pod failed as a whole: kubelet's pod-level reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFailure {
    pub reason: PodFailureReason,
    pub message: String,
    /// The grace period its containers get (`None`: the pod's own).
    pub grace: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodFailureReason {
    /// `activeDeadlineSeconds` passed.
    DeadlineExceeded,
    /// The eviction manager reclaimed a resource with it (E2).
    Evicted,
    /// A critical pod was admitted in its place (K4).
    Preempted,
}

impl PodFailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PodFailureReason::DeadlineExceeded => "DeadlineExceeded",
            PodFailureReason::Evicted => "Evicted",
            PodFailureReason::Preempted => crate::node_admission::PREEMPTED_REASON,
        }
    }
}

/// The pod whose sandbox and containers exist (or are being made).
#[derive(Debug, Clone)]
struct Current {
    pod: Arc<Pod>,
    source: Source,
    uid: String,
    /// When the merge first saw the pod (`config.seen`), until its first container runs;
    /// `None` for a pod adopted with containers that already ran.
    seen: Option<Timestamp>,
    started: Timestamp,
    /// When the worker took the pod on, on the monotonic clock (its active deadline
    /// counts from then).
    active_since: Instant,
    /// Every init container completed and every sidecar started once (I1, I3): the app
    /// containers run, and completed init containers do not run again while the sandbox
    /// lives (I2).
    initialized: bool,
    /// The pod failed as a whole (its active deadline passed, or it was evicted):
    /// nothing more of it starts.
    failed: Option<PodFailure>,
    /// Slots from this index on may not start yet (their turn has not come, I1, I3);
    /// none may once the pod finished.
    gate: usize,
    sandbox: Sandbox,
    /// What the objects' cache answered of the pod's objects, and the wait for the rest.
    objects: ObjectsWait,
    /// An object changed while the sandbox was being set up: its volumes are written
    /// again once it is ready.
    refresh_volumes: bool,
    /// The pod finished and its emptyDir volumes were released.
    volumes_released: bool,
    problem: Option<SandboxProblem>,
    sandbox_backoff: Backoff,
    slots: Vec<Slot>,
    /// Stopped by a node shutdown and reported so.
    shut_down: bool,
    /// The in-place resize of its containers (K6).
    resize: resizing::Resize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Sandbox {
    /// To be set up at `retry_at`.
    Pending {
        retry_at: Instant,
    },
    SettingUp,
    Ready {
        ips: Vec<IpAddr>,
    },
}

/// A stop under way: what for, which containers it still waits for, until when.
#[derive(Debug, Clone)]
struct Stopping {
    target: StopTarget,
    waiting: BTreeSet<String>,
    /// Containers whose preStop hook runs: their SIGTERM waits for it (L2).
    hooks: BTreeSet<String>,
    /// Sidecars not signalled yet, in the order they stop (I3).
    later: Vec<String>,
    deadline: Instant,
    killed: bool,
}

#[derive(Debug, Clone)]
enum StopTarget {
    /// Containers an earlier run left for a pod that is not desired.
    Stale(Vec<Found>),
    /// The current pod, replaced or no longer desired.
    Current(Box<Current>),
    /// Every container of the current pod, at a node shutdown.
    Shutdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shutdown {
    No,
    /// With the pod's group's grace period, if the shutdown has groups (J3).
    Requested(Option<Duration>),
    Done,
}

/// One pod full name's worker state.
#[derive(Debug, Clone)]
pub struct PodWorker {
    name: FullName,
    settings: Settings,
    /// The jitter of the backoffs, seeded: a worker's delays are reproducible.
    jitter: fastrand::Rng,
    desired: Option<Desired>,
    current: Option<Current>,
    /// Containers an earlier run left for this full name, not yet adopted or removed.
    found: Vec<Found>,
    stopping: Option<Stopping>,
    shutdown: Shutdown,
    /// The desired pod, refused by admission (A1): nothing of it runs.
    refused: Option<Refused>,
}

/// A pod admission refused, and why (kubelet's rejected pod: phase Failed, a reason and a
/// message, and a Warning Event).
#[derive(Debug, Clone)]
struct Refused {
    uid: String,
    started: Timestamp,
    reason: String,
    /// The status message.
    message: String,
    qos: QosClass,
}

impl PodWorker {
    pub fn new(name: FullName, settings: Settings, found: Vec<Found>) -> PodWorker {
        PodWorker {
            name,
            jitter: fastrand::Rng::with_seed(settings.seed),
            settings,
            desired: None,
            current: None,
            found,
            stopping: None,
            shutdown: Shutdown::No,
            refused: None,
        }
    }

    pub fn name(&self) -> &FullName {
        &self.name
    }

    /// Applies `input` at `now`; returns what to do and when to wake next.
    pub fn step(&mut self, input: Input, now: Now) -> Step {
        let mut out = Vec::new();
        self.apply(input, now, &mut out);
        self.advance(now, &mut out);
        Step { actions: out, wake: self.next_wake() }
    }

    /// Nothing is desired and nothing is left running or to remove, or the node shut
    /// down: the worker can end.
    pub fn is_done(&self) -> bool {
        self.shutdown == Shutdown::Done
            || (self.desired.is_none()
                && self.current.is_none()
                && self.found.is_empty()
                && self.stopping.is_none())
    }

    /// The current pod's UID and status, as kubelet would report it at `now`.
    pub fn status(&self, now: Timestamp) -> Option<(&str, PodStatus)> {
        let Some(current) = self.current.as_ref() else {
            let refused = self.refused.as_ref()?;
            let status =
                status::refused(&refused.reason, &refused.message, refused.started, refused.qos);
            return Some((&refused.uid, status));
        };
        let ips = match &current.sandbox {
            Sandbox::Ready { ips } => ips.as_slice(),
            _ => &[],
        };
        let view = PodView {
            pod: &current.pod,
            slots: &current.slots,
            ips,
            host_ip: self.settings.host_ip,
            started: current.started,
            sandbox_problem: current.problem.as_ref(),
            shut_down: current.shut_down,
            initialized: current.initialized,
            failed: current.failed.as_ref(),
        };
        let mut status = status::pod_status(&view, now);
        current.resize_status(&mut status, now);
        Some((&current.uid, status))
    }

    /// The current pod's UID (or the refused one's).
    pub fn uid(&self) -> Option<&str> {
        let refused = self.refused.as_ref().map(|r| r.uid.as_str());
        self.current.as_ref().map(|c| c.uid.as_str()).or(refused)
    }

    /// The current pod (the one whose sandbox and containers exist or are being made).
    pub fn pod(&self) -> Option<&Arc<Pod>> {
        self.current.as_ref().map(|c| &c.pod)
    }

    /// The name of the container `container_id` stands for, if it is the current pod's.
    pub fn container_name(&self, container_id: &str) -> Option<&str> {
        let current = self.current.as_ref()?;
        let slot = current.slots.iter().find(|s| s.id.as_deref() == Some(container_id))?;
        Some(&slot.name)
    }

    fn apply(&mut self, input: Input, now: Now, out: &mut Vec<Action>) {
        match input {
            Input::Desired(desired) => {
                self.desired = desired;
                if let (Some(current), Some(desired)) = (&mut self.current, &self.desired)
                    && pod::uid(&desired.pod) == current.uid
                {
                    current.objects.told(desired.answers);
                }
                self.admit(now, out);
            }
            Input::SandboxReady { ips, fresh } => {
                if let Some(current) = &mut self.current {
                    current.sandbox = Sandbox::Ready { ips };
                    current.problem = None;
                    current.sandbox_backoff.reset();
                    if fresh {
                        current.sandbox_made_anew(now, out);
                    }
                    if std::mem::take(&mut current.refresh_volumes) {
                        out.push(Action::RefreshVolumes { pod: current.pod.clone() });
                    }
                }
            }
            Input::SandboxFailed(problem) => self.sandbox_failed(problem, now, out),
            Input::Started { container, started } => {
                self.started(&container, started, now, out);
            }
            Input::StartFailed { container, failure } => {
                self.start_failed(&container, failure, now, out);
            }
            Input::Exited(exit) => self.exited(exit, now, out),
            Input::Oom { container_id, victim } => self.oom(&container_id, victim),
            Input::Probed { container_id, kind, outcome } => {
                self.probed(&container_id, kind, &outcome, now, out);
            }
            Input::HookDone { container_id, hook, result } => {
                self.hook_done(&container_id, hook, result, now, out);
            }
            Input::TerminationMessage { container_id, message } => {
                self.termination_message(&container_id, message);
            }
            Input::ObjectsChanged(answers) => self.objects_changed(answers, now, out),
            Input::Resized { applied, error } => self.resized(applied, error),
            Input::Resync => {
                // Running containers, and those a stop under way waits for: their exits
                // may have gone by while containerd was away.
                let mut container_ids: BTreeSet<String> = self
                    .current
                    .iter()
                    .flat_map(|c| &c.slots)
                    .filter_map(|s| s.running_id().map(str::to_owned))
                    .collect();
                container_ids.extend(self.stopping.iter().flat_map(|s| s.waiting.iter().cloned()));
                let container_ids: Vec<String> = container_ids.into_iter().collect();
                if !container_ids.is_empty() {
                    out.push(Action::CheckExited { container_ids });
                }
            }
            Input::Evict { uid, message, grace } => {
                if let Some(current) = self.current.as_mut().filter(|c| c.uid == uid) {
                    current.evict(message, grace, out);
                }
            }
            Input::Preempt { uid } => {
                if let Some(current) = self.current.as_mut().filter(|c| c.uid == uid) {
                    current.preempt(out);
                }
            }
            Input::Shutdown => {
                if self.shutdown == Shutdown::No {
                    self.shutdown = Shutdown::Requested(None);
                }
            }
            Input::ShutdownWithin { grace } => {
                if self.shutdown == Shutdown::No {
                    self.shutdown = Shutdown::Requested(Some(grace));
                }
            }
            Input::Tick => {}
        }
    }

    /// Moves on as far as the state allows without waiting.
    fn advance(&mut self, now: Now, out: &mut Vec<Action>) {
        loop {
            if self.stopping.is_some() {
                if !self.continue_stop(now, out) {
                    return;
                }
                continue;
            }
            match self.shutdown {
                Shutdown::Done => return,
                Shutdown::Requested(group_grace) => {
                    // A start under way reports first: what it started is stopped too.
                    if self.current.as_ref().is_some_and(Current::busy) {
                        return;
                    }
                    self.begin_shutdown(group_grace, now, out);
                    continue;
                }
                Shutdown::No => {}
            }
            let desired = self.live_desired().cloned();
            let desired_uid = desired.as_ref().map(|d| pod::uid(&d.pod).to_owned());
            // M10: whatever runs under this name for another pod (or a deleted one) stops
            // first, completely, before anything of the desired pod starts.
            let stale: Vec<Found> = self
                .found
                .extract_if(.., |f| f.pod_uid.as_deref() != desired_uid.as_deref())
                .collect();
            if !stale.is_empty() {
                self.begin_stop_stale(stale, now, out);
                continue;
            }
            if self.current.as_ref().is_some_and(|c| Some(&c.uid) != desired_uid.as_ref()) {
                // Its sandbox or a start under way reports first: what it made is stopped
                // with the rest, before anything of another pod starts (M10).
                if self.current.as_ref().is_some_and(Current::busy) {
                    return;
                }
                self.begin_stop_current(now, out);
                continue;
            }
            let Some(desired) = desired else { return };
            if self.current.is_none() {
                let found = std::mem::take(&mut self.found);
                let current = self.adopt(&desired, found, now, out);
                self.current = Some(current);
            }
            self.kill_deadlines(now, out);
            let host_ip = self.settings.host_ip;
            if let Some(current) = &mut self.current {
                // The downward API's labels and annotations are in its volumes (V1).
                let relabelled = !same_labels_and_annotations(&current.pod, &desired.pod);
                if relabelled && matches!(current.sandbox, Sandbox::Ready { .. }) {
                    out.push(Action::RefreshVolumes { pod: desired.pod.clone() });
                }
                current.pod = desired.pod;
                current.source = desired.source;
                // X1: the ephemeral containers the change added.
                ephemeral::add_slots(
                    &mut current.slots,
                    &current.pod,
                    self.settings.crash_loop,
                    now,
                );
                current.resize.pending = desired.resize_pending;
                let refused = current.sync(now, host_ip, &mut self.jitter, out);
                current.resize_running(out);
                // K1: as if the runtime had failed them (its result, decided here).
                for (container, failure) in refused {
                    self.start_failed(&container, failure, now, out);
                }
            }
            return;
        }
    }

    /// The desired pod, unless it is being deleted or was refused.
    fn live_desired(&self) -> Option<&Desired> {
        let refused = self.refused.as_ref().map(|r| r.uid.as_str());
        self.desired
            .as_ref()
            .filter(|d| d.pod.metadata.deletion_timestamp.is_none())
            .filter(|d| Some(pod::uid(&d.pod)) != refused)
    }

    /// Admission (A1): a desired pod asking for what this node does not do is refused,
    /// once per pod UID, with a Warning Event and a log line; a refused pod no longer
    /// desired (or replaced) takes its status with it.
    fn admit(&mut self, now: Now, out: &mut Vec<Action>) {
        let desired = self.desired.as_ref();
        let uid = desired.map(|d| pod::uid(&d.pod).to_owned());
        if let Some(refused) = self.refused.take_if(|r| Some(&r.uid) != uid.as_ref()) {
            out.push(Action::RemoveStatus { uid: refused.uid });
        }
        let (Some(desired), Some(uid)) = (desired, uid) else { return };
        let known = self.refused.is_some() || self.current.as_ref().is_some_and(|c| c.uid == uid);
        if known {
            return;
        }
        if let Some(rejected) = &desired.rejected {
            // K4: the dispatcher rejected it and sent its Event, as kubelet's `rejectPod`.
            self.refused = Some(Refused {
                uid,
                started: now.wall,
                reason: rejected.reason.clone(),
                message: rejected.status_message(),
                qos: qos_class(&desired.pod),
            });
            return;
        }
        let findings = admission::review(&desired.pod, &self.settings.facts, desired.source);
        let mut refusals = findings.iter().filter(|f| f.severity == Severity::Refused);
        let Some(first) = refusals.next() else { return };
        let message = std::iter::once(first)
            .chain(refusals)
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        tracing::warn!(pod.uid = uid, reason = first.reason, message, "pod refused");
        out.push(Action::Event {
            pod: desired.pod.clone(),
            container: None,
            kind: EventType::Warning,
            reason: first.reason,
            message: message.clone(),
        });
        let qos = qos_class(&desired.pod);
        let reason = first.reason.to_owned();
        self.refused = Some(Refused { uid, started: now.wall, reason, message, qos });
    }

    fn next_wake(&self) -> Option<Instant> {
        if let Some(stopping) = &self.stopping {
            return Some(stopping.deadline);
        }
        if self.shutdown != Shutdown::No {
            // Nothing starts any more.
            return None;
        }
        let current = self.current.as_ref()?;
        if self.live_desired().is_none_or(|d| pod::uid(&d.pod) != current.uid) {
            // To be stopped once its results are in: nothing of it is due any more.
            return None;
        }
        match current.sandbox {
            Sandbox::Pending { retry_at } => Some(retry_at),
            Sandbox::SettingUp => None,
            Sandbox::Ready { .. } => {
                let deadline = current.active_deadline().filter(|_| current.failed.is_none());
                // A container that may not start yet has no wake of its own (its turn
                // comes with another's result).
                let wakes = current.slots.iter().enumerate().filter_map(|(i, slot)| {
                    // X1: ephemeral containers wait for no one's turn.
                    let waits_its_turn = i >= current.gate
                        && slot.due().is_some()
                        && slot.kind != slot::SlotKind::Ephemeral;
                    if waits_its_turn { None } else { slot.wake() }
                });
                wakes.chain(deadline).min()
            }
        }
    }

    /// V1: what waits for the pod's API objects goes on now; a set-up sandbox's volumes
    /// are written again.
    fn objects_changed(&mut self, answers: Answers, now: Now, out: &mut Vec<Action>) {
        let Some(current) = &mut self.current else { return };
        current.objects.told(answers);
        match &mut current.sandbox {
            Sandbox::Pending { retry_at } => *retry_at = now.at,
            Sandbox::SettingUp => current.refresh_volumes = true,
            Sandbox::Ready { .. } => out.push(Action::RefreshVolumes { pod: current.pod.clone() }),
        }
        // Those whose env waited for them: held for their answers, or refused for them.
        for slot in &mut current.slots {
            slot.release_hold();
            if let SlotState::Waiting {
                reason: WaitingReason::CreateContainerConfigError,
                retry_at,
                ..
            } = &mut slot.state
            {
                *retry_at = now.at;
            }
        }
    }

    fn sandbox_failed(&mut self, problem: SandboxProblem, now: Now, out: &mut Vec<Action>) {
        let Some(current) = &mut self.current else { return };
        let delay = current.sandbox_backoff.next_delay(self.jitter.f64());
        tracing::warn!(reason = problem.reason.as_str(), error = problem.message, retry_in = ?delay, "cannot set up the pod sandbox");
        // kubelet's volume manager says FailedMount (its message is the runtime's).
        let (reason, message) = match problem.reason {
            SandboxReason::VolumesNotReady => (reason::FAILED_MOUNT, problem.message.clone()),
            SandboxReason::PodCgroupFailed => (
                reason::FAILED_CREATE_POD_CONTAINER,
                format!("unable to ensure pod container exists: {}", problem.message),
            ),
            _ => (
                reason::FAILED_CREATE_POD_SANDBOX,
                format!("Failed to create pod sandbox: {}", problem.message),
            ),
        };
        out.push(Action::Event {
            pod: current.pod.clone(),
            container: None,
            kind: EventType::Warning,
            reason,
            message,
        });
        for slot in current.slots.iter_mut().filter(|s| !s.is_running()) {
            if let SlotState::Waiting { retry_at, .. } = slot.state {
                slot.state = SlotState::Waiting {
                    reason: WaitingReason::ContainerCreating,
                    message: Some(problem.message.clone()),
                    retry_at,
                };
            }
        }
        current.problem = Some(problem);
        current.sandbox = Sandbox::Pending { retry_at: now.at + delay };
    }
}

impl Current {
    /// A sandbox set-up or a container start is under way (its result not in yet).
    fn busy(&self) -> bool {
        self.sandbox == Sandbox::SettingUp
            || self.slots.iter().any(|s| matches!(s.state, SlotState::Starting { .. }))
    }

    /// The sandbox was made anew: init containers that completed in the old one run
    /// again, and the app containers wait for them (I2).
    fn sandbox_made_anew(&mut self, now: Now, out: &mut Vec<Action>) {
        let completed = self.slots.iter_mut().filter(|s| s.kind.is_init() && !s.is_running());
        let mut rerun = false;
        for slot in completed.filter(|s| s.ran) {
            if let Some(id) = slot.id.take() {
                out.push(Action::KeepDead { container_id: id });
            }
            slot.last_termination = None;
            slot.state = creating(now.at);
            rerun = true;
        }
        if rerun || self.initialized {
            tracing::info!(
                pod.uid = self.uid,
                "new pod sandbox: running the init containers again"
            );
        }
        self.initialized = self.slots.iter().all(|s| !s.kind.is_init());
    }

    fn slot_mut(&mut self, name: &str) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.name == name)
    }
}

/// Whether two versions of a pod have the same labels and annotations.
fn same_labels_and_annotations(a: &Pod, b: &Pod) -> bool {
    a.metadata.labels == b.metadata.labels && a.metadata.annotations == b.metadata.annotations
}

/// The hash of a container's spec, as kubelet labels containers with it: a different
/// hash means the container must be recreated. Its cpu and memory and its
/// `resizePolicy` are left out, as kubelet hashes a container with in-place resize on
/// (K6): a change of them is a resize ([`crate::resize`]), not a new container.
pub fn container_hash(container: &Container) -> String {
    let mut container = container.clone();
    container.resize_policy = None;
    if let Some(resources) = container.resources.as_mut() {
        for list in [&mut resources.requests, &mut resources.limits] {
            if let Some(l) = list.as_mut() {
                l.retain(|name, _| !crate::resize::RESIZABLE.contains(&name.as_str()));
            }
            if list.as_ref().is_some_and(std::collections::BTreeMap::is_empty) {
                *list = None;
            }
        }
    }
    legacy_container_hash(&container)
}

/// The hash agents before in-place resize labelled containers with (the whole spec): a
/// container an earlier agent made with it is its spec's container all the same, and is
/// adopted, not restarted, after an upgrade.
pub fn legacy_container_hash(container: &Container) -> String {
    let bytes = serde_json::to_vec(container).unwrap_or_default();
    format!("{:x}", xxhash_rust::xxh3::xxh3_64(&bytes))
}

#[cfg(test)]
mod tests;
