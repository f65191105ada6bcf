//! What a pod worker knows about its pod: the sandbox and each container's slot, and the
//! `v1.PodStatus` they add up to, as kubelet reports it.

use std::collections::HashMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use outpost_core::lifecycle::{self, ContainerPhase, CrashLoop, RestartPolicy};
use std::time::Duration;

use outpost_core::backoff::Backoff;
use tokio::time::Instant;

/// How a container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    pub container_id: String,
    pub exit_code: i32,
    pub reason: String,
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
    /// Not running; `retry_at` says when the worker tries (again).
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: Timestamp,
    },
    /// Exited and not restarted (restartPolicy).
    Terminated(Terminated),
}

/// One container of the pod spec, across its restarts.
#[derive(Debug)]
pub struct Slot {
    pub name: String,
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
    /// When to (re)start it, while waiting.
    pub retry_at: Option<Instant>,
    pub crash_loop: CrashLoop,
    /// Consecutive image pull failures (ErrImagePull, then ImagePullBackOff).
    pub pull_failures: u32,
    /// The wait between pull attempts (kubelet's image backoff).
    pub pull_backoff: Backoff,
    /// The kernel OOM-killed something in it since it started.
    pub oom_killed: bool,
    /// Which process the OOM killer chose ("pid 42 (tail)"), when the kernel said so.
    pub oom_victim: Option<String>,
}

impl Slot {
    pub fn new(name: &str, hash: String, crash_loop: CrashLoop) -> Slot {
        Slot {
            name: name.to_owned(),
            hash,
            restart_count: 0,
            ran: false,
            id: None,
            image_id: None,
            state: SlotState::Waiting { reason: "ContainerCreating".to_owned(), message: None },
            last_termination: None,
            retry_at: Some(Instant::now()),
            crash_loop,
            pull_failures: 0,
            pull_backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(300)),
            oom_killed: false,
            oom_victim: None,
        }
    }

    pub fn is_running(&self) -> bool {
        matches!(self.state, SlotState::Running { .. })
    }

    fn phase(&self) -> ContainerPhase {
        match &self.state {
            SlotState::Running { .. } => ContainerPhase::Running,
            SlotState::Terminated(t) => ContainerPhase::Exited { exit_code: t.exit_code },
            SlotState::Waiting { .. } if self.last_termination.is_some() => {
                ContainerPhase::Restarting
            }
            SlotState::Waiting { .. } => ContainerPhase::Waiting,
        }
    }
}

/// Why the pod's sandbox (namespaces, network, volumes) is not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxProblem {
    pub reason: &'static str,
    pub message: String,
}

/// The status kubelet would report for `pod`.
pub fn pod_status(
    pod: &Pod,
    slots: &[Slot],
    ips: &[IpAddr],
    host_ip: Option<IpAddr>,
    started: Timestamp,
    sandbox: Option<&SandboxProblem>,
) -> PodStatus {
    let policy = RestartPolicy::of(pod);
    let phases: Vec<ContainerPhase> = slots.iter().map(Slot::phase).collect();
    let phase = lifecycle::pod_phase(policy, &phases);
    let ready = !slots.is_empty() && slots.iter().all(Slot::is_running);
    let images: HashMap<&str, &str> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| (c.name.as_str(), c.image.as_deref().unwrap_or_default()))
        .collect();
    let now = Time(Timestamp::now());
    let condition =
        |kind: &str, ok: bool, reason: Option<&str>, message: Option<&str>| PodCondition {
            type_: kind.to_owned(),
            status: if ok { "True" } else { "False" }.to_owned(),
            reason: reason.map(str::to_owned),
            message: message.map(str::to_owned),
            last_transition_time: Some(now.clone()),
            ..PodCondition::default()
        };
    let not_ready = slots
        .iter()
        .filter(|s| !s.is_running())
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let not_ready_message =
        (!ready).then(|| format!("containers with unready status: [{not_ready}]"));
    let conditions = vec![
        condition(
            "PodReadyToStartContainers",
            sandbox.is_none(),
            sandbox.map(|p| p.reason),
            sandbox.map(|p| p.message.as_str()),
        ),
        condition("Initialized", true, None, None),
        condition(
            "Ready",
            ready,
            (!ready).then_some("ContainersNotReady"),
            not_ready_message.as_deref(),
        ),
        condition(
            "ContainersReady",
            ready,
            (!ready).then_some("ContainersNotReady"),
            not_ready_message.as_deref(),
        ),
        condition("PodScheduled", true, None, None),
    ];
    let pod_ip = ips.first().map(ToString::to_string);
    PodStatus {
        phase: Some(phase.as_str().to_owned()),
        conditions: Some(conditions),
        host_ip: host_ip.map(|ip| ip.to_string()),
        pod_ip,
        pod_ips: (!ips.is_empty())
            .then(|| ips.iter().map(|ip| PodIP { ip: ip.to_string() }).collect()),
        start_time: Some(Time(started)),
        qos_class: pod.status.as_ref().and_then(|s| s.qos_class.clone()),
        container_statuses: Some(
            slots
                .iter()
                .map(|s| container_status(s, images.get(s.name.as_str()).copied()))
                .collect(),
        ),
        ..PodStatus::default()
    }
}

fn container_status(slot: &Slot, image: Option<&str>) -> ContainerStatus {
    ContainerStatus {
        name: slot.name.clone(),
        image: image.unwrap_or_default().to_owned(),
        image_id: slot.image_id.clone().unwrap_or_default(),
        container_id: slot.id.as_ref().map(|id| format!("containerd://{id}")),
        ready: slot.is_running(),
        started: Some(slot.is_running()),
        restart_count: i32::try_from(slot.restart_count).unwrap_or(i32::MAX),
        state: Some(state(&slot.state)),
        last_state: slot.last_termination.as_ref().map(|t| ContainerState {
            terminated: Some(terminated(t)),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

fn state(state: &SlotState) -> ContainerState {
    match state {
        SlotState::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: message.clone(),
            }),
            ..ContainerState::default()
        },
        SlotState::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning { started_at: Some(Time(*started_at)) }),
            ..ContainerState::default()
        },
        SlotState::Terminated(t) => {
            ContainerState { terminated: Some(terminated(t)), ..ContainerState::default() }
        }
    }
}

fn terminated(t: &Terminated) -> ContainerStateTerminated {
    ContainerStateTerminated {
        container_id: Some(format!("containerd://{}", t.container_id)),
        exit_code: t.exit_code,
        reason: Some(t.reason.clone()),
        started_at: t.started_at.map(Time),
        finished_at: t.finished_at.map(Time),
        signal: t.signal,
        message: t.message.clone(),
    }
}

/// What kubelet's graceful node shutdown reports for a pod it stopped: phase Failed,
/// reason `Terminated`, and a `DisruptionTarget` condition.
pub fn shut_down(status: &mut PodStatus) {
    status.phase = Some("Failed".to_owned());
    status.reason = Some("Terminated".to_owned());
    status.message = Some("Pod was terminated in response to imminent node shutdown.".to_owned());
    status.conditions.get_or_insert_default().push(PodCondition {
        type_: "DisruptionTarget".to_owned(),
        status: "True".to_owned(),
        reason: Some("TerminationByKubelet".to_owned()),
        message: Some("Pod was terminated in response to imminent node shutdown.".to_owned()),
        last_transition_time: Some(Time(Timestamp::now())),
        ..PodCondition::default()
    });
}

/// kubelet's reason for a terminated container.
pub fn exit_reason(exit_code: i32, oom_killed: bool) -> &'static str {
    match (oom_killed, exit_code) {
        (true, _) => "OOMKilled",
        (false, 0) => "Completed",
        (false, _) => "Error",
    }
}
