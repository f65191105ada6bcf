//! Ephemeral containers in a pod worker (X1, X2): a slot for each one the pod's spec
//! adds, started once in the pod's sandbox (its target's process namespace joined),
//! never restarted or recreated, never probed, hooked or counted in readiness; stopped
//! with the pod.

use super::slot::{Slot, SlotKind, SlotState, WaitingReason};
use super::sync::Turn;
use k8s_openapi::api::core::v1::Pod;

use super::{Now, StartFailure, container_hash};
use crate::ephemeral;
use crate::lifecycle::{CrashLoop, CrashLoopConfig};

/// X1: a slot for each ephemeral container of `pod` that has none among `slots` yet (the
/// API server only ever adds them). One already there is never replaced: a later change
/// of the pod does not recreate it.
pub(super) fn add_slots(slots: &mut Vec<Slot>, pod: &Pod, crash_loop: CrashLoopConfig, now: Now) {
    for container in ephemeral::all(pod) {
        if slots.iter().any(|s| s.name == container.name) {
            continue;
        }
        let hash = container_hash(&ephemeral::as_container(container));
        let crash_loop = CrashLoop::new(crash_loop);
        slots.push(Slot::new(&container.name, SlotKind::Ephemeral, hash, crash_loop, now.at));
    }
}

impl Turn<'_, '_> {
    /// X1, X2: each ephemeral container not created yet is started when due; one that
    /// ran is left as it is (running, or exited for good).
    pub(super) fn sync_ephemeral(&mut self, slots: &mut [Slot]) {
        let running: Vec<(String, String)> = slots
            .iter()
            .filter(|s| s.kind != SlotKind::Ephemeral)
            .filter_map(|s| Some((s.name.clone(), s.running_id()?.to_owned())))
            .collect();
        let pod = self.pod;
        for slot in slots.iter_mut().filter(|s| s.kind == SlotKind::Ephemeral) {
            if slot.ran || slot.due().is_none_or(|at| at > self.now.at) {
                continue;
            }
            let target = match ephemeral::target(pod, &slot.name) {
                None => None,
                Some(name) => match running.iter().find(|(n, _)| n == name) {
                    Some((_, id)) => Some(id.clone()),
                    None => {
                        // kubelet's `getTargetID`: no container is created, the start is
                        // tried again at the next sync.
                        slot.state = SlotState::Starting { restart_count: 0 };
                        let reason = WaitingReason::CreateContainerConfigError;
                        let failure = StartFailure::new(reason, ephemeral::target_not_found(name));
                        self.refused.push((slot.name.clone(), failure));
                        continue;
                    }
                },
            };
            let hash = slot.hash.clone();
            self.start_when_due(slot, hash, target);
        }
    }
}
