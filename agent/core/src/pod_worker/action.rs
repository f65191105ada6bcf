//! What a pod worker asks its executor to do: the [`Action`]s of a [`Step`], in order,
//! and when to step it again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::Terminated;
use crate::event_aggregate::EventType;
use crate::pod::Source;
use crate::probe::{Handler, Hook, ProbeKind};

/// Signals a stop sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Term,
    Kill,
}

/// What the worker counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    ContainerRestarted {
        source: Source,
    },
    /// From `config.seen` to the pod's first container running.
    PodStarted {
        source: Source,
        latency: Duration,
    },
}

/// What the executor does for a worker, in order.
#[derive(Debug, Clone)]
pub enum Action {
    /// The kernel's events of the pod's cgroups resolve to it from now on.
    TrackPod {
        uid: String,
    },
    ForgetPod {
        uid: String,
    },
    /// Route the container's task events to this worker.
    Watch {
        container_id: String,
    },
    /// Create (or find) the pod's namespaces, network and files → `SandboxReady` or
    /// `SandboxFailed`.
    SetUpSandbox {
        pod: Arc<Pod>,
    },
    /// Remove what `SetUpSandbox` made for the pod, and the dead containers it kept.
    TearDownSandbox {
        uid: String,
    },
    /// Ensure the image, create and start the container → `Started` or `StartFailed`.
    StartContainer {
        pod: Arc<Pod>,
        container: String,
        restart_count: u32,
        hash: String,
        /// X1: an ephemeral container's target, the running container (its containerd
        /// id) whose process namespace it joins.
        target: Option<String>,
    },
    Signal {
        container_ids: Vec<String>,
        signal: StopSignal,
    },
    /// Run a probe of the running container, off the worker's path, within `timeout`
    /// → `Probed`.
    Probe {
        pod: Arc<Pod>,
        container: String,
        container_id: String,
        kind: ProbeKind,
        handler: Handler,
        timeout: Duration,
    },
    /// Run a hook in the container, off the worker's path → `HookDone`. A hook still
    /// running when its container gets SIGKILL or is removed is abandoned.
    RunHook {
        pod: Arc<Pod>,
        container: String,
        container_id: String,
        hook: Hook,
        handler: Handler,
        timeout: Option<Duration>,
    },
    /// Report (as `Exited`) each of these whose task is no longer running.
    CheckExited {
        container_ids: Vec<String>,
    },
    /// Delete an exited task; `reap`: containerd may not have seen it stop yet (the
    /// kernel said so first), so wait for that, off the worker's path.
    DeleteTask {
        container_id: String,
        reap: bool,
    },
    /// Read the termination message the exited container left → `TerminationMessage`
    /// (nothing when it left none).
    ReadTerminationMessage {
        pod: Arc<Pod>,
        container: String,
        container_id: String,
        exit_code: i32,
    },
    /// Write the pod's configMap, secret, downwardAPI and projected volumes again from
    /// the objects as they are now (V1); nothing comes back (a failure is an Event).
    RefreshVolumes {
        pod: Arc<Pod>,
    },
    /// The pod finished and nothing of it runs any more: its emptyDir volumes go now
    /// (kubelet tears down a terminated pod's volumes), so an evicted pod gives back the
    /// disk or memory it filled. Its sandbox and dead containers stay until it is removed.
    ReleaseVolumes {
        uid: String,
    },
    /// Record how the container ended in its labels, for a later run.
    RecordExit {
        container_id: String,
        terminated: Terminated,
    },
    /// The exited container is replaced (restarted, its spec changed, or run again in a
    /// new sandbox): it stays as a dead container, which the garbage collector removes
    /// with its logs by kubelet's dead-container policy (G1), or the pod's removal with
    /// the pod. Its events no longer come to the worker.
    KeepDead {
        container_id: String,
    },
    /// Remove the container (its task, record and snapshot); `background`: off the
    /// worker's path.
    RemoveContainer {
        container_id: String,
        background: bool,
    },
    /// K6: update the running containers' cgroups to their allocated resources in place
    /// (and the pod's cgroup, in [`crate::resize::order`]), recording them in the
    /// containers' labels → `Resized`. `pod` carries the allocated resources, `actual`
    /// those the containers run with now.
    ResizeContainers {
        pod: Arc<Pod>,
        actual: Arc<Pod>,
        containers: Vec<ResizeContainer>,
    },
    Event {
        pod: Arc<Pod>,
        container: Option<String>,
        kind: EventType,
        reason: &'static str,
        message: String,
    },
    Count(Metric),
    /// The pod is gone: its status goes too.
    RemoveStatus {
        uid: String,
    },
}

/// One running container of a resize, and its resources after it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResizeContainer {
    pub name: String,
    pub container_id: String,
    pub resources: k8s_openapi::api::core::v1::ResourceRequirements,
    /// The resources whose cgroup values change.
    pub changed: Vec<crate::resize::Resource>,
}

/// The result of a step.
#[derive(Debug, Default)]
pub struct Step {
    pub actions: Vec<Action>,
    /// When to step again with [`Input::Tick`] if nothing else happens first.
    pub wake: Option<Instant>,
}
