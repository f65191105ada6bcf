//! The `v1.PodStatus` a pod worker's slots add up to, as kubelet reports it.

use std::collections::HashMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::SandboxProblem;
use super::slot::{Slot, SlotState, Terminated, WaitingReason};
use crate::lifecycle::{self, ContainerPhase, RestartPolicy};

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
}

/// The status kubelet would report for the pod, at `now`.
pub fn pod_status(view: &PodView<'_>, now: Timestamp) -> PodStatus {
    let PodView { pod, slots, ips, host_ip, started, sandbox_problem: sandbox, shut_down } = *view;
    let policy = RestartPolicy::of(pod);
    let phases: Vec<ContainerPhase> = slots.iter().map(Slot::phase).collect();
    let phase = lifecycle::pod_phase(policy, &phases);
    let containers_ready = !slots.is_empty() && slots.iter().all(Slot::is_ready);
    // Readiness gates are conditions others set through the API server (P4): none is
    // here, so a pod with gates is not ready, as kubelet reports it without them.
    let gates: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.readiness_gates.iter().flatten())
        .map(|g| g.condition_type.as_str())
        .collect();
    let ready = containers_ready && gates.is_empty();
    let images: HashMap<&str, &str> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| (c.name.as_str(), c.image.as_deref().unwrap_or_default()))
        .collect();
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
    let not_ready = slots
        .iter()
        .filter(|s| !s.is_ready())
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let not_ready_message =
        (!containers_ready).then(|| format!("containers with unready status: [{not_ready}]"));
    let (ready_reason, ready_message) = if !containers_ready {
        (Some("ContainersNotReady"), not_ready_message.clone())
    } else if let Some(gate) = gates.first() {
        let message =
            format!("corresponding condition of pod readiness gate \"{gate}\" does not exist.");
        (Some("ReadinessGatesNotReady"), Some(message))
    } else {
        (None, None)
    };
    let mut conditions = vec![
        condition(
            "PodReadyToStartContainers",
            sandbox.is_none(),
            sandbox.map(|p| p.reason.as_str()),
            sandbox.map(|p| p.message.as_str()),
        ),
        condition("Initialized", true, None, None),
        condition("Ready", ready, ready_reason, ready_message.as_deref()),
        condition(
            "ContainersReady",
            containers_ready,
            (!containers_ready).then_some("ContainersNotReady"),
            not_ready_message.as_deref(),
        ),
        condition("PodScheduled", true, None, None),
    ];
    let mut status = PodStatus {
        phase: Some(phase.as_str().to_owned()),
        host_ip: host_ip.map(|ip| ip.to_string()),
        pod_ip: ips.first().map(ToString::to_string),
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
    };
    if shut_down {
        // kubelet's graceful node shutdown: phase Failed, reason Terminated, and a
        // DisruptionTarget condition.
        const MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
        status.phase = Some("Failed".to_owned());
        status.reason = Some("Terminated".to_owned());
        status.message = Some(MESSAGE.to_owned());
        conditions.push(condition(
            "DisruptionTarget",
            true,
            Some("TerminationByKubelet"),
            Some(MESSAGE),
        ));
    }
    status.conditions = Some(conditions);
    status
}

fn container_status(slot: &Slot, image: Option<&str>) -> ContainerStatus {
    ContainerStatus {
        name: slot.name.clone(),
        image: image.unwrap_or_default().to_owned(),
        image_id: slot.image_id.clone().unwrap_or_default(),
        container_id: slot.id.as_ref().map(|id| format!("containerd://{id}")),
        ready: slot.is_ready(),
        started: Some(slot.is_started()),
        restart_count: i32::try_from(slot.restart_count).unwrap_or(i32::MAX),
        state: Some(state(slot)),
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
