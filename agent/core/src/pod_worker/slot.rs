//! One container of the pod spec across its restarts (a slot), its states, and kubelet's
//! reasons for them.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use crate::backoff::Backoff;
use crate::lifecycle::{ContainerPhase, ContainerRestart, CrashLoop};
use crate::probe::{ProbeKind, Probes};

/// kubelet's waiting reasons (`ContainerStateWaiting.reason`) that Outpost reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitingReason {
    ContainerCreating,
    /// Waiting for the pod's init containers (I1).
    PodInitializing,
    CrashLoopBackOff,
    ErrImagePull,
    ImagePullBackOff,
    ErrImageNeverPull,
    InspectFailed,
    CreateContainerConfigError,
    CreateContainerError,
    RunContainerError,
}

impl WaitingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitingReason::ContainerCreating => "ContainerCreating",
            WaitingReason::PodInitializing => "PodInitializing",
            WaitingReason::CrashLoopBackOff => "CrashLoopBackOff",
            WaitingReason::ErrImagePull => "ErrImagePull",
            WaitingReason::ImagePullBackOff => "ImagePullBackOff",
            WaitingReason::ErrImageNeverPull => "ErrImageNeverPull",
            WaitingReason::InspectFailed => "InspectFailed",
            WaitingReason::CreateContainerConfigError => "CreateContainerConfigError",
            WaitingReason::CreateContainerError => "CreateContainerError",
            WaitingReason::RunContainerError => "RunContainerError",
        }
    }
}

/// kubelet's terminated reasons (`ContainerStateTerminated.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminatedReason {
    Completed,
    Error,
    OOMKilled,
}

impl TerminatedReason {
    /// How kubelet names an exit with `exit_code`.
    pub fn of(exit_code: i32, oom_killed: bool) -> TerminatedReason {
        match (oom_killed, exit_code) {
            (true, _) => TerminatedReason::OOMKilled,
            (false, 0) => TerminatedReason::Completed,
            (false, _) => TerminatedReason::Error,
        }
    }

    /// The reason as recorded in a container's label by an earlier run.
    pub fn parse(text: &str) -> Option<TerminatedReason> {
        match text {
            "Completed" => Some(TerminatedReason::Completed),
            "Error" => Some(TerminatedReason::Error),
            "OOMKilled" => Some(TerminatedReason::OOMKilled),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TerminatedReason::Completed => "Completed",
            TerminatedReason::Error => "Error",
            TerminatedReason::OOMKilled => "OOMKilled",
        }
    }
}

/// How a container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    pub container_id: String,
    pub exit_code: i32,
    pub reason: TerminatedReason,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// The signal that killed it, when the kernel said so.
    pub signal: Option<i32>,
    /// What else is known (the OOM killer's victim).
    pub message: Option<String>,
}

/// A container's current state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotState {
    /// Not running; the worker (re)starts it at `retry_at`.
    Waiting {
        reason: WaitingReason,
        message: Option<String>,
        retry_at: Instant,
    },
    /// A start of run number `restart_count` is under way.
    Starting {
        restart_count: u32,
    },
    Running {
        started_at: Timestamp,
    },
    /// Exited and not restarted (restartPolicy), or stopped by a node shutdown.
    Terminated(Terminated),
}

/// Which list of the pod spec a container is in, and how it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    /// `initContainers`: runs to success before the next starts (I1, I2).
    Init,
    /// `initContainers` with `restartPolicy: Always`: starts in its turn and runs beside
    /// the app containers (I3).
    Sidecar,
    /// `containers`.
    App,
    /// `ephemeralContainers`: started once when added, never restarted, no probes or
    /// hooks, not counted in readiness or phase (X1, X2).
    Ephemeral,
}

impl SlotKind {
    /// The kind of a container of `initContainers`.
    pub fn of_init(container: &k8s_openapi::api::core::v1::Container) -> SlotKind {
        if crate::pod::is_sidecar(container) { SlotKind::Sidecar } else { SlotKind::Init }
    }

    /// Whether a container of this kind that exited with `exit_code` is started again,
    /// as its `restart` policies and rules say (I4): an init container until it succeeds
    /// (I2), a sidecar always (I3), an app container by what they say.
    pub fn restarts(self, restart: &ContainerRestart, exit_code: i32) -> bool {
        match self {
            SlotKind::Init => exit_code != 0 && restart.after_exit(exit_code),
            SlotKind::Sidecar => true,
            SlotKind::App => restart.after_exit(exit_code),
            SlotKind::Ephemeral => false,
        }
    }

    /// In `initContainerStatuses` rather than `containerStatuses`.
    pub fn is_init(self) -> bool {
        matches!(self, SlotKind::Init | SlotKind::Sidecar)
    }
}

/// One container of the pod spec, across its restarts.
#[derive(Debug, Clone)]
pub struct Slot {
    pub name: String,
    pub kind: SlotKind,
    /// The hash of the container's spec its current containerd container was made from.
    pub hash: String,
    pub restart_count: u32,
    /// It has been started at least once (the next start is a restart).
    pub ran: bool,
    /// The containerd container that currently stands for it (running or exited).
    pub id: Option<String>,
    pub image_id: Option<String>,
    pub state: SlotState,
    pub last_termination: Option<Terminated>,
    pub crash_loop: CrashLoop,
    /// Consecutive image pull failures (ErrImagePull, then ImagePullBackOff).
    pub pull_failures: u32,
    /// The wait between pull attempts (kubelet's image backoff).
    pub pull_backoff: Backoff,
    /// The OOM killer acted in it since it started: `Some`, with its victim when the
    /// kernel named it ("pid 42 (tail)").
    pub oom: Option<Option<String>>,
    /// When the running container started, on the monotonic clock (its probes' initial
    /// delays count from then).
    pub running_since: Option<Instant>,
    /// Its postStart hook runs: not `Running` until it returns (L1).
    pub post_start: bool,
    /// The running container's probes, once scheduled (after postStart, with the pod's
    /// address known).
    pub probes: Option<Probes>,
    /// The running container is being killed (and then restarted or not).
    pub kill: Option<Kill>,
    /// Its start put off for its pod's objects (V1): when it was due, and until when.
    held: Option<(Instant, Instant)>,
    /// The cpu and memory its current container runs with (K6: kubelet's actuated
    /// resources; a resize changes them in place).
    pub resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
}

/// Why a running container is killed on its own (not with its pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    /// Its liveness or startup probe failed (P3).
    Probe(ProbeKind),
    /// Its postStart hook failed (L1).
    PostStartHook,
    /// Its spec changed: it is recreated from the new one.
    SpecChanged,
    /// Its pod is finished (its app containers completed, or its active deadline passed):
    /// it is not restarted.
    PodFinished,
}

/// A container kill under way: preStop, then SIGTERM, the grace period, SIGKILL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    pub reason: KillReason,
    /// The grace period's end (then SIGKILL), or after SIGKILL the end of the wait for
    /// the exit.
    pub deadline: Instant,
    /// Its preStop hook runs: SIGTERM waits for it (L2).
    pub pre_stop: bool,
    pub killed: bool,
}

impl Slot {
    /// A container not started yet, due at `now`.
    pub fn new(
        name: &str,
        kind: SlotKind,
        hash: String,
        crash_loop: CrashLoop,
        now: Instant,
    ) -> Slot {
        Slot {
            name: name.to_owned(),
            kind,
            hash,
            restart_count: 0,
            ran: false,
            id: None,
            image_id: None,
            state: creating(now),
            last_termination: None,
            crash_loop,
            pull_failures: 0,
            pull_backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(300)),
            oom: None,
            running_since: None,
            post_start: false,
            probes: None,
            kill: None,
            held: None,
            resources: None,
        }
    }

    /// An init container that ran to success (I1).
    pub fn is_completed(&self) -> bool {
        matches!(&self.state, SlotState::Terminated(t) if t.exit_code == 0)
    }

    /// An init container that failed and is not retried: its pod fails (I2).
    pub fn is_failed_init(&self) -> bool {
        self.kind == SlotKind::Init
            && matches!(&self.state, SlotState::Terminated(t) if t.exit_code != 0)
    }

    pub fn is_running(&self) -> bool {
        matches!(self.state, SlotState::Running { .. })
    }

    /// The running container's id.
    pub fn running_id(&self) -> Option<&str> {
        self.is_running().then_some(self.id.as_deref()).flatten()
    }

    /// When the worker acts on it next (waiting for its start).
    /// A waiting container's start put off to `at` (V1: its pod's objects are awaited).
    pub fn hold_until(&mut self, at: Instant) {
        if let SlotState::Waiting { retry_at, .. } = &mut self.state {
            let due = self.held.map_or(*retry_at, |(due, _)| due);
            self.held = Some((due, at));
            *retry_at = at;
        }
    }

    /// The objects came: a start put off for them is due when it was before.
    pub fn release_hold(&mut self) {
        let Some((due, until)) = self.held.take() else { return };
        if let SlotState::Waiting { retry_at, .. } = &mut self.state
            && *retry_at == until
        {
            *retry_at = due;
        }
    }

    pub fn due(&self) -> Option<Instant> {
        match self.state {
            SlotState::Waiting { retry_at, .. } => Some(retry_at),
            _ => None,
        }
    }

    /// Running, its postStart hook done: what the status shows as `Running`.
    pub fn is_up(&self) -> bool {
        self.is_running() && !self.post_start
    }

    /// Up and its startup probe passed (`started`).
    pub fn is_started(&self) -> bool {
        self.is_up() && self.probes.as_ref().is_some_and(Probes::started)
    }

    /// Up and its probes say ready (P4).
    pub fn is_ready(&self) -> bool {
        self.is_up() && self.probes.as_ref().is_some_and(Probes::ready)
    }

    /// Leaves running: what a running container carries goes.
    pub fn stopped_running(&mut self) {
        self.running_since = None;
        self.post_start = false;
        self.probes = None;
        self.kill = None;
    }

    /// When the worker acts on it next: its start, a probe, or a kill's deadline.
    pub fn wake(&self) -> Option<Instant> {
        if let Some(kill) = &self.kill {
            return Some(kill.deadline);
        }
        self.due().or_else(|| self.probes.as_ref()?.next_due())
    }

    /// What the pod's phase counts of it, `restart` saying what its exit leads to (I4).
    pub fn phase(&self, restart: &ContainerRestart) -> ContainerPhase {
        match &self.state {
            SlotState::Running { .. } if self.post_start && self.last_termination.is_some() => {
                ContainerPhase::Restarting
            }
            SlotState::Running { .. } if self.post_start => ContainerPhase::Waiting,
            SlotState::Running { .. } => ContainerPhase::Running,
            SlotState::Terminated(t) => ContainerPhase::Exited {
                exit_code: t.exit_code,
                restarts: restart.after_exit(t.exit_code),
            },
            SlotState::Waiting { .. } | SlotState::Starting { .. }
                if self.last_termination.is_some() =>
            {
                ContainerPhase::Restarting
            }
            SlotState::Waiting { .. } | SlotState::Starting { .. } => ContainerPhase::Waiting,
        }
    }

    /// How the container `id` ended, if this slot knows.
    pub fn terminated_mut(&mut self, id: &str) -> Option<&mut Terminated> {
        let Slot { state, last_termination, .. } = self;
        match state {
            SlotState::Terminated(t) if t.container_id == id => Some(t),
            _ => last_termination.as_mut().filter(|t| t.container_id == id),
        }
    }
}

/// Waiting to be created, due at `at`.
pub fn creating(at: Instant) -> SlotState {
    SlotState::Waiting { reason: WaitingReason::ContainerCreating, message: None, retry_at: at }
}
