//! The `v1.PodStatus` a pod worker's slots add up to, as kubelet reports it.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::SandboxProblem;
use super::slot::{Slot, SlotKind, SlotState, Terminated, WaitingReason};
use crate::lifecycle::{self, ContainerPhase, ContainerRestart, Phase};
use crate::qos::{QosClass, qos_class};

/// What the status is made of besides the slots.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    pub pod: &'a Pod,
    pub slots: &'a [Slot],
    pub ips: &'a [IpAddr],
    pub host_ip: Option<IpAddr>,
    /// When the worker took the pod on (`status.startTime`).
    pub started: Timestamp,
    pub sandbox_problem: Option<&'a SandboxProblem>,
    /// Stopped by a node shutdown.
    pub shut_down: bool,
    /// Its init containers completed and sidecars started (I1, I3).
    pub initialized: bool,
    /// It failed as a whole (deadline, eviction).
    pub failed: Option<&'a super::PodFailure>,
}

/// The status kubelet would report for the pod, at `now`.
pub fn pod_status(view: &PodView<'_>, now: Timestamp) -> PodStatus {
    let PodView { pod, slots, ips, host_ip, started, sandbox_problem: sandbox, .. } = *view;
    let phase = phase(view);
    let apps = || slots.iter().filter(|s| s.kind == SlotKind::App);
    // Sidecars count for readiness beside the app containers; init and ephemeral
    // containers do not (X2).
    let counted = || slots.iter().filter(|s| matches!(s.kind, SlotKind::Sidecar | SlotKind::App));
    let containers_ready = apps().next().is_some() && counted().all(Slot::is_ready);
    // Readiness gates are conditions others set through the API server (P4): none is
    // here, so a pod with gates is not ready, as kubelet reports it without them.
    let gates: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.readiness_gates.iter().flatten())
        .map(|g| g.condition_type.as_str())
        .collect();
    let ready = containers_ready && gates.is_empty();
    let now = Time(now);
    let condition =
        |kind: &str, ok: bool, reason: Option<&str>, message: Option<&str>| PodCondition {
            type_: kind.to_owned(),
            status: if ok { "True" } else { "False" }.to_owned(),
            reason: reason.map(str::to_owned),
            message: message.map(str::to_owned),
            last_transition_time: Some(now.clone()),
            ..PodCondition::default()
        };
    // Go prints the names as a slice: `[a b]`.
    let listed = |names: Vec<&str>| format!("[{}]", names.join(" "));
    let not_ready = listed(counted().filter(|s| !s.is_ready()).map(|s| s.name.as_str()).collect());
    let not_ready_message =
        (!containers_ready).then(|| format!("containers with unready status: {not_ready}"));
    let (ready_reason, ready_message) = if !containers_ready {
        (Some("ContainersNotReady"), not_ready_message.clone())
    } else if let Some(gate) = gates.first() {
        let message =
            format!("corresponding condition of pod readiness gate \"{gate}\" does not exist.");
        (Some("ReadinessGatesNotReady"), Some(message))
    } else {
        (None, None)
    };
    let incomplete = listed(
        slots
            .iter()
            .filter(|s| match s.kind {
                SlotKind::Init => !s.is_completed(),
                SlotKind::Sidecar => !s.is_started(),
                SlotKind::App | SlotKind::Ephemeral => false,
            })
            .map(|s| s.name.as_str())
            .collect(),
    );
    let incomplete = format!("containers with incomplete status: {incomplete}");
    let initialized = view.initialized;
    let mut conditions = vec![
        condition(
            "PodReadyToStartContainers",
            sandbox.is_none(),
            sandbox.map(|p| p.reason.as_str()),
            sandbox.map(|p| p.message.as_str()),
        ),
        condition(
            "Initialized",
            initialized,
            (!initialized).then_some("ContainersNotInitialized"),
            (!initialized).then_some(incomplete.as_str()),
        ),
        condition("Ready", ready, ready_reason, ready_message.as_deref()),
        condition(
            "ContainersReady",
            containers_ready,
            (!containers_ready).then_some("ContainersNotReady"),
            not_ready_message.as_deref(),
        ),
        condition("PodScheduled", true, None, None),
    ];
    let statuses = |init: bool| {
        let mut list: Vec<ContainerStatus> = slots
            .iter()
            .filter(|s| s.kind.is_init() == init && s.kind != SlotKind::Ephemeral)
            .map(|s| container_status(pod, s, !initialized))
            .collect();
        // The status is kept until the next (the status store, the API's copy): without
        // the room for four that a filtered collection starts with (B5: 2.2 KB a pod).
        list.shrink_to_fit();
        (!init || !list.is_empty()).then_some(list)
    };
    let mut status = PodStatus {
        phase: Some(phase.as_str().to_owned()),
        host_ip: host_ip.map(|ip| ip.to_string()),
        pod_ip: ips.first().map(ToString::to_string),
        pod_ips: (!ips.is_empty())
            .then(|| ips.iter().map(|ip| PodIP { ip: ip.to_string() }).collect()),
        start_time: Some(Time(started)),
        // Q1: computed from the spec, as kubelet does (a pod's class never changes).
        qos_class: Some(qos_class(pod).as_str().to_owned()),
        container_statuses: statuses(false),
        init_container_statuses: statuses(true),
        ephemeral_container_statuses: ephemeral_statuses(pod, slots),
        ..PodStatus::default()
    };
    if let Some(failed) = view.failed {
        status.reason = Some(failed.reason.as_str().to_owned());
        status.message = Some(failed.message.clone());
        // kubelet marks an evicted or preempted pod as disrupted by itself.
        let disruption = match failed.reason {
            super::PodFailureReason::Evicted => Some(failed.message.as_str()),
            super::PodFailureReason::Preempted => {
                Some(crate::node_admission::PREEMPTED_CONDITION_MESSAGE)
            }
            super::PodFailureReason::DeadlineExceeded => None,
        };
        if let Some(message) = disruption {
            conditions.push(condition(
                "DisruptionTarget",
                true,
                Some("TerminationByKubelet"),
                Some(message),
            ));
        }
    }
    if view.shut_down {
        // kubelet's graceful node shutdown (J3): phase Failed, reason Terminated, and a
        // DisruptionTarget condition.
        use crate::node_shutdown::{DISRUPTION_REASON, POD_MESSAGE, POD_REASON};
        status.phase = Some("Failed".to_owned());
        status.reason = Some(POD_REASON.to_owned());
        status.message = Some(POD_MESSAGE.to_owned());
        conditions.push(condition(
            "DisruptionTarget",
            true,
            Some(DISRUPTION_REASON),
            Some(POD_MESSAGE),
        ));
    }
    status.conditions = Some(conditions);
    status
}

/// The status of a pod admission refused (A1), as kubelet reports a rejected pod: Failed,
/// with the reason and message, and its QoS class (Q1), nothing else.
pub fn refused(reason: &str, message: &str, started: Timestamp, qos: QosClass) -> PodStatus {
    PodStatus {
        phase: Some(Phase::Failed.as_str().to_owned()),
        qos_class: Some(qos.as_str().to_owned()),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        start_time: Some(Time(started)),
        ..PodStatus::default()
    }
}

/// kubelet's `getPhase`: Failed past the active deadline or once an init container
/// failed for good (I2); Pending until initialized; then what the app containers add up
/// to, sidecars aside (I3), each by its restart policy and rules (I4).
fn phase(view: &PodView<'_>) -> Phase {
    let init_failed = view.slots.iter().any(Slot::is_failed_init);
    if view.failed.is_some() || init_failed {
        return Phase::Failed;
    }
    if !view.initialized {
        return Phase::Pending;
    }
    let apps: Vec<ContainerPhase> = view
        .slots
        .iter()
        .filter(|s| s.kind == SlotKind::App)
        .map(|s| s.phase(&ContainerRestart::of_named(view.pod, &s.name)))
        .collect();
    lifecycle::pod_phase(&apps)
}

/// X3: `ephemeralContainerStatuses`, as kubelet reports them: one per ephemeral
/// container the worker has a slot for, never ready, without `started` (its prober never
/// sees them); absent while the pod has none.
fn ephemeral_statuses(pod: &Pod, slots: &[Slot]) -> Option<Vec<ContainerStatus>> {
    let list: Vec<ContainerStatus> = slots
        .iter()
        .filter(|s| s.kind == SlotKind::Ephemeral)
        .map(|s| ContainerStatus {
            image: crate::ephemeral::find(pod, &s.name)
                .and_then(|c| c.image.clone())
                .unwrap_or_default(),
            ready: false,
            started: None,
            ..container_status(pod, s, false)
        })
        .collect();
    (!list.is_empty()).then_some(list)
}

/// A container's status; `initializing`: the pod's init containers are not done, so a
/// container not started yet waits with PodInitializing.
fn container_status(pod: &Pod, slot: &Slot, initializing: bool) -> ContainerStatus {
    let image = crate::pod::container(pod, &slot.name).and_then(|c| c.image.clone());
    let mut state = state(slot);
    if initializing
        && slot.kind != SlotKind::Sidecar
        && !slot.ran
        && let Some(waiting) = &mut state.waiting
        && waiting.reason.as_deref() == Some(WaitingReason::ContainerCreating.as_str())
    {
        waiting.reason = Some(WaitingReason::PodInitializing.as_str().to_owned());
    }
    ContainerStatus {
        name: slot.name.clone(),
        image: image.unwrap_or_default(),
        image_id: slot.image_id.clone().unwrap_or_default(),
        container_id: slot.id.as_ref().map(|id| format!("containerd://{id}")),
        // An init container that completed counts as ready, as kubelet reports it.
        ready: slot.is_ready() || (slot.kind == SlotKind::Init && slot.is_completed()),
        started: Some(slot.is_started()),
        restart_count: i32::try_from(slot.restart_count).unwrap_or(i32::MAX),
        state: Some(state),
        last_state: slot.last_termination.as_ref().map(|t| ContainerState {
            terminated: Some(terminated(t)),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

fn state(slot: &Slot) -> ContainerState {
    let waiting = |reason: WaitingReason, message: Option<String>| ContainerState {
        waiting: Some(ContainerStateWaiting { reason: Some(reason.as_str().to_owned()), message }),
        ..ContainerState::default()
    };
    match &slot.state {
        SlotState::Waiting { reason, message, .. } => waiting(*reason, message.clone()),
        SlotState::Starting { .. } => waiting(WaitingReason::ContainerCreating, None),
        // Not Running until its postStart hook returns (L1).
        SlotState::Running { .. } if slot.post_start => {
            waiting(WaitingReason::ContainerCreating, None)
        }
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
        reason: Some(t.reason.as_str().to_owned()),
        started_at: t.started_at.map(Time),
        finished_at: t.finished_at.map(Time),
        signal: t.signal,
        message: t.message.clone(),
    }
}
