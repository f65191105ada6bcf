//! What a pod worker is told: the desired pod, what an earlier run left, and the
//! runtime's results and events, as [`Input`]s of [`super::PodWorker::step`].

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::WaitingReason;
use crate::pod::Source;
use crate::probe::{Hook, Outcome, ProbeKind};

/// The pod the merge wants under this name, and its source.
#[derive(Debug, Clone)]
pub struct Desired {
    pub source: Source,
    pub pod: Arc<Pod>,
    /// K4: the node rejected the pod (kubelet's `rejectPod`): it is Failed with this
    /// reason and `Pod was rejected: <message>`, and nothing of it runs.
    pub rejected: Option<crate::node_admission::Rejection>,
    /// What the objects' cache has answered of the objects the pod refers to.
    pub answers: Answers,
    /// K6: a resize of the pod the node has not allocated (the pod's containers carry
    /// their allocated resources meanwhile).
    pub resize_pending: Option<crate::resize::Pending>,
}

/// What the node knows of the API objects a pod refers to (V1, K1), as the objects'
/// cache tells its worker ([`super::objects`] decides what waits for them). A static
/// pod, or a node without an API server, has all its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answers {
    /// Every ConfigMap and Secret the pod refers to was answered: found, or known absent.
    pub objects: bool,
    /// The Services its containers' variables are made of were read (K1).
    pub services: bool,
    /// The API server answers: what is missing may still come (offline, nothing will).
    pub reachable: bool,
}

impl Answers {
    /// Nothing to wait for.
    pub const ALL: Answers = Answers { objects: true, services: true, reachable: true };

    pub fn complete(self) -> bool {
        self.objects && self.services
    }
}

impl Default for Answers {
    fn default() -> Answers {
        Answers::ALL
    }
}

/// A container an earlier run of the agent left, as the runtime lists it (its labels).
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub id: String,
    pub pod_uid: Option<String>,
    pub container: Option<String>,
    pub restart_count: u32,
    pub hash: Option<String>,
    pub started_at: Option<Timestamp>,
    /// The grace period its pod had.
    pub grace: Option<Duration>,
    pub task: FoundTask,
    /// How it ended, as recorded in its labels once its task was deleted.
    pub recorded_exit: RecordedExit,
    /// K6: the cpu and memory it was resized to, as recorded in its labels.
    pub resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
}

/// A found container's task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FoundTask {
    None,
    Running,
    /// Created, stopped or paused: not running.
    NotRunning {
        exit_code: i32,
        exited_at: Option<Timestamp>,
    },
}

/// What a container's labels say about its end (nothing, before its task was deleted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedExit {
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    pub finished_at: Option<Timestamp>,
}

/// Why the pod's sandbox is not ready (the `PodReadyToStartContainers` condition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxReason {
    NamespacesFailed,
    NetworkNotReady,
    VolumesNotReady,
    /// The pod's cgroup could not be made or limited (kubelet's
    /// `FailedCreatePodContainer`).
    PodCgroupFailed,
    /// No runtime handler for the pod's RuntimeClass (D5): kubelet's
    /// `CreatePodSandboxError`.
    CreatePodSandboxError,
}

impl SandboxReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxReason::NamespacesFailed => "NamespacesFailed",
            SandboxReason::NetworkNotReady => "NetworkNotReady",
            SandboxReason::VolumesNotReady => "VolumesNotReady",
            SandboxReason::PodCgroupFailed => "FailedCreatePodContainer",
            SandboxReason::CreatePodSandboxError => crate::runtime_class::CREATE_POD_SANDBOX_ERROR,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxProblem {
    pub reason: SandboxReason,
    pub message: String,
}

/// Why a container could not be started: kubelet's waiting reason and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    pub reason: WaitingReason,
    pub message: String,
}

impl StartFailure {
    pub fn new(reason: WaitingReason, message: String) -> StartFailure {
        StartFailure { reason, message }
    }

    /// The image could not be pulled (the next failure reports ImagePullBackOff).
    pub fn is_pull(&self) -> bool {
        self.reason == WaitingReason::ErrImagePull
    }
}

/// A started container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub id: String,
    pub image_id: String,
    pub started_at: Timestamp,
}

/// Who reported an exit. The kernel (eBPF) may report it before containerd has reaped
/// the task; whichever comes first is acted on, the other finds the container gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitSource {
    Containerd,
    Kernel,
}

/// A container's task exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub container_id: String,
    pub exit_code: i32,
    pub finished_at: Option<Timestamp>,
    /// The signal that killed it (the kernel knows).
    pub signal: Option<i32>,
    pub by: ExitSource,
}

/// What happens to a worker.
#[derive(Debug, Clone)]
pub enum Input {
    /// The desired pod of this name (`None`: no longer desired).
    Desired(Option<Desired>),
    /// The sandbox is set up; the pod's addresses. `fresh`: it was made anew, not found
    /// as an earlier run left it (a new sandbox runs the init containers again, I2).
    SandboxReady {
        ips: Vec<IpAddr>,
        fresh: bool,
    },
    SandboxFailed(SandboxProblem),
    Started {
        container: String,
        started: Started,
    },
    StartFailed {
        container: String,
        failure: StartFailure,
    },
    Exited(Exit),
    /// The OOM killer acted in a container (`victim`: the process it chose, when known).
    Oom {
        container_id: String,
        victim: Option<String>,
    },
    /// A probe run's result.
    Probed {
        container_id: String,
        kind: ProbeKind,
        outcome: Outcome,
    },
    /// A hook returned (`Err`: why it failed).
    HookDone {
        container_id: String,
        hook: Hook,
        result: Result<(), String>,
    },
    /// What an exited container left as its termination message (its
    /// `terminationMessagePath` file, or its log's tail by `terminationMessagePolicy`).
    TerminationMessage {
        container_id: String,
        message: String,
    },
    /// An API object the pod refers to changed (or came, or went), or a token of its
    /// service account is due for refresh (V1), with what is answered now: its volumes
    /// are written again, and what waits for the objects (the sandbox's volumes, a
    /// container's env) is retried now.
    ObjectsChanged(Answers),
    /// The runtime's event stream had a gap: exits may have been missed.
    Resync,
    /// The node is under resource pressure and the eviction manager chose this pod
    /// (E2): its containers are killed within `grace` and not restarted; the pod is
    /// Failed with reason `Evicted` and `message`.
    Evict {
        uid: String,
        message: String,
        grace: Duration,
    },
    /// K4: a critical pod was admitted in its place: its containers are killed within
    /// its own grace period and not restarted; the pod is Failed with kubelet's reason
    /// `Preempting`.
    Preempt {
        uid: String,
    },
    /// The node shuts down: stop the pod, report it, end.
    Shutdown,
    /// The node shuts down and the pod's priority group has `grace` (J3): stop the pod
    /// within the shorter of its own grace period and the group's, report it, end.
    ShutdownWithin {
        grace: Duration,
    },
    /// K6: the resize of [`super::Action::ResizeContainers`] ran: the containers (ids)
    /// now at their new resources, and the error that stopped it, if one did.
    Resized {
        applied: Vec<(String, k8s_openapi::api::core::v1::ResourceRequirements)>,
        error: Option<String>,
    },
    /// A wake-up time came due.
    Tick,
}
