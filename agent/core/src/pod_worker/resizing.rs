//! K6: in-place resize in a pod worker. The worker's pod carries each container's
//! allocated resources (the dispatcher allocated them, [`crate::resize::decide`]); a
//! running container whose actual resources differ is restarted when its
//! `resizePolicy` asks for it, else updated in place through the runtime
//! ([`Action::ResizeContainers`]); the status reports the actual and allocated resources
//! and kubelet's `PodResizePending` and `PodResizeInProgress` conditions.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Pod, PodCondition, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::slot::{KillReason, Slot, SlotKind};
use super::{Action, Current, Now, PodWorker, ResizeContainer, Sandbox, kill};
use crate::event_aggregate::{EventType, reason};
use crate::probe::Target;
use crate::resize::{self, Amounts, Pending};
use crate::{lifecycle, pod};

/// A pod's resize state.
#[derive(Debug, Clone, Default)]
pub(super) struct Resize {
    /// The node has not allocated the pod's last resize: why.
    pub pending: Option<Pending>,
    /// The containers of a [`Action::ResizeContainers`] under way.
    in_flight: Option<Vec<ResizeContainer>>,
    /// The last resize failed: the runtime's error, and what it was for (not tried again
    /// until the allocation changes).
    failed: Option<(String, Vec<ResizeContainer>)>,
}

/// kubelet's message when a resize restarts a container (`resizePolicy`).
pub(super) fn restart_message(container: &str) -> String {
    format!("Container {container} resize requires restart")
}

/// Restarts the running container of `slot` when its allocated resources changed and
/// its `resizePolicy` says `RestartContainer` for a resource that changed: true if it
/// is being restarted for it.
pub(super) fn restart_for_resize(
    pod: &Arc<Pod>,
    container: &Container,
    slot: &mut Slot,
    target: Target,
    now: Now,
    out: &mut Vec<Action>,
) -> bool {
    if slot.kill.is_some() || !resizable(slot) {
        return false;
    }
    let actual = Amounts::of(slot.resources.as_ref());
    let changed = actual.changed(&Amounts::of(container.resources.as_ref()));
    if changed.is_empty() || !resize::restart_needed(container, &changed) {
        return false;
    }
    let message = restart_message(&slot.name);
    tracing::info!(container = slot.name, "{message}");
    out.push(Action::Event {
        pod: pod.clone(),
        container: Some(slot.name.clone()),
        kind: EventType::Normal,
        reason: reason::KILLING,
        message,
    });
    let grace = lifecycle::grace_period(pod);
    let hooks = kill::Hooks { pod, container: Some(container), target };
    hooks.kill(slot, KillReason::SpecChanged, grace, now, out);
    true
}

/// Whether the slot's container is one kubelet resizes: an app container or a sidecar.
fn resizable(slot: &Slot) -> bool {
    slot.kind != SlotKind::Init
}

impl Current {
    /// Updates in place the running containers whose actual resources differ from their
    /// allocated ones (those whose `resizePolicy` restarts them are restarted by
    /// [`restart_for_resize`]); one at a time per pod.
    pub(super) fn resize_running(&mut self, out: &mut Vec<Action>) {
        let ready = matches!(self.sandbox, Sandbox::Ready { .. });
        if self.resize.in_flight.is_some() || !ready || self.finished() {
            return;
        }
        let mut containers = Vec::new();
        for slot in self.slots.iter_mut().filter(|s| resizable(s) && s.kill.is_none()) {
            let Some(id) = slot.running_id().map(str::to_owned) else { continue };
            let Some(container) = pod::container(&self.pod, &slot.name) else { continue };
            let allocated = resize::resizable_part(container.resources.as_ref());
            if resize::same_resources(slot.resources.as_ref(), allocated.as_ref()) {
                continue;
            }
            let changed =
                Amounts::of(slot.resources.as_ref()).changed(&Amounts::of(allocated.as_ref()));
            if changed.is_empty() {
                // A memory request alone: no cgroup changes (kubelet's actuated resources
                // follow at once).
                slot.resources = allocated;
                continue;
            }
            if resize::restart_needed(container, &changed) {
                continue;
            }
            let resources = allocated.unwrap_or_default();
            containers.push(ResizeContainer {
                name: slot.name.clone(),
                container_id: id,
                resources,
                changed,
            });
        }
        if containers.is_empty()
            || self.resize.failed.as_ref().is_some_and(|(_, f)| *f == containers)
        {
            return;
        }
        self.resize.failed = None;
        let actual: BTreeMap<String, ResourceRequirements> = self
            .slots
            .iter()
            .filter(|s| s.is_running())
            .map(|s| (s.name.clone(), s.resources.clone().unwrap_or_default()))
            .collect();
        let actual = Arc::new(resize::allocated_pod(&self.pod, &actual));
        tracing::info!(
            pod.uid = self.uid,
            containers = containers.len(),
            "resizing containers in place"
        );
        self.resize.in_flight = Some(containers.clone());
        out.push(Action::ResizeContainers { pod: self.pod.clone(), actual, containers });
    }

    /// The resize's part of the pod's status: each running resizable container's actual
    /// `resources` and its `allocatedResources` (the allocated requests), and the
    /// `PodResizePending` and `PodResizeInProgress` conditions as kubelet 1.33 sets them.
    pub(super) fn resize_status(&self, status: &mut PodStatus, now: Timestamp) {
        let lists = [status.container_statuses.as_mut(), status.init_container_statuses.as_mut()];
        for statuses in lists.into_iter().flatten() {
            for container_status in statuses.iter_mut() {
                self.container_resources(container_status);
            }
        }
        let condition = |kind: &str, reason: Option<&str>, message: Option<&str>| PodCondition {
            type_: kind.to_owned(),
            status: "True".to_owned(),
            reason: reason.map(str::to_owned),
            message: message.map(str::to_owned),
            last_probe_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
            ..PodCondition::default()
        };
        let mut added = Vec::new();
        if let Some(pending) = &self.resize.pending {
            let reason = Some(pending.reason.as_str());
            added.push(condition(resize::POD_RESIZE_PENDING, reason, Some(&pending.message)));
        }
        if let Some((error, _)) = &self.resize.failed {
            let reason = Some(resize::REASON_ERROR);
            added.push(condition(resize::POD_RESIZE_IN_PROGRESS, reason, Some(error)));
        } else if self.resize_in_progress() {
            added.push(condition(resize::POD_RESIZE_IN_PROGRESS, None, None));
        }
        if !added.is_empty() {
            status.conditions.get_or_insert_with(Vec::new).extend(added);
        }
    }

    /// kubelet's `IsPodResizeInProgress`: a running resizable container's actual
    /// resources are not its allocated ones yet.
    fn resize_in_progress(&self) -> bool {
        self.resize.in_flight.is_some()
            || self.slots.iter().filter(|s| resizable(s) && s.is_running()).any(|slot| {
                let container = pod::container(&self.pod, &slot.name);
                let allocated = container.and_then(|c| c.resources.as_ref());
                let actual = Amounts::of(slot.resources.as_ref());
                !actual.changed(&Amounts::of(allocated)).is_empty()
            })
    }

    fn container_resources(&self, status: &mut ContainerStatus) {
        let Some(slot) = self.slots.iter().find(|s| s.name == status.name) else { return };
        if !resizable(slot) {
            return;
        }
        let container = pod::container(&self.pod, &slot.name);
        let requests = container.and_then(|c| c.resources.as_ref()?.requests.clone());
        status.allocated_resources = requests.filter(|r| !r.is_empty());
        if slot.is_running() {
            status.resources = slot.resources.clone();
        }
    }
}

impl PodWorker {
    /// The runtime's result of [`Action::ResizeContainers`].
    pub(super) fn resized(
        &mut self,
        applied: Vec<(String, ResourceRequirements)>,
        error: Option<String>,
    ) {
        let Some(current) = &mut self.current else { return };
        let in_flight = current.resize.in_flight.take().unwrap_or_default();
        for (id, resources) in applied {
            if let Some(slot) = current.slots.iter_mut().find(|s| s.id.as_deref() == Some(&id)) {
                slot.resources = resize::resizable_part(Some(&resources));
            }
        }
        if let Some(error) = error {
            tracing::warn!(pod.uid = current.uid, error, "in-place resize failed");
            current.resize.failed = Some((error, in_flight));
        }
    }
}
