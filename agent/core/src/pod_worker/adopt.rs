//! Adoption: what an earlier agent left for the desired pod is taken over, not restarted.

use k8s_openapi::jiff::Timestamp;

use super::slot::{Slot, SlotKind, SlotState, Terminated, TerminatedReason, creating};
use k8s_openapi::api::core::v1::Pod;

use super::{
    Action, Current, Desired, Found, FoundTask, Now, PodFailure, PodFailureReason, PodWorker,
    Sandbox,
};
use crate::backoff::Backoff;
use crate::lifecycle::{ContainerRestart, CrashLoop};
use crate::pod::{self, CONFIG_SEEN};

impl PodWorker {
    /// The desired pod, with what an earlier run left of it adopted: per container, the
    /// newest of its containers; running ones are kept running. Its earlier exits stay as
    /// dead containers for the garbage collector; anything else is removed.
    pub(super) fn adopt(
        &self,
        desired: &Desired,
        mut found: Vec<Found>,
        now: Now,
        out: &mut Vec<Action>,
    ) -> Current {
        let pod = &desired.pod;
        let uid = pod::uid(pod).to_owned();
        out.push(Action::TrackPod { uid: uid.clone() });
        let crash_loop = CrashLoop::new(self.settings.crash_loop);
        // Init containers and sidecars first, in their order, then the app containers.
        let init = pod.spec.iter().flat_map(|s| s.init_containers.iter().flatten());
        let init = init.map(|c| (c, SlotKind::of_init(c)));
        let app = pod.spec.iter().flat_map(|s| &s.containers).map(|c| (c, SlotKind::App));
        let mut slots: Vec<Slot> = init
            .chain(app)
            .map(|(c, kind)| {
                let mut slot =
                    Slot::new(&c.name, kind, super::container_hash(c), crash_loop, now.at);
                slot.resources = crate::resize::resizable_part(c.resources.as_ref());
                slot
            })
            .collect();
        super::ephemeral::add_slots(&mut slots, pod, self.settings.crash_loop, now);
        // Kept for the pod's life: not the four a filtered collection starts with (B5).
        slots.shrink_to_fit();
        found.sort_by_key(|f| f.restart_count);
        for container in found.into_iter().rev() {
            let name = container.container.as_deref().unwrap_or_default();
            match slots.iter_mut().find(|s| s.name == name) {
                Some(slot) if slot.id.is_none() && same_spec(pod, slot, &container) => {
                    let restart = ContainerRestart::of_named(pod, name);
                    adopt_container(&restart, slot, container, now, out);
                }
                // An earlier exit of an adopted container: a dead container, left to the
                // garbage collector's count (G1).
                Some(slot)
                    if slot.id.is_some()
                        && container.restart_count < slot.restart_count
                        && container.task != FoundTask::Running => {}
                _ => out.push(Action::RemoveContainer {
                    container_id: container.id,
                    background: false,
                }),
            }
        }
        // Only a pod none of whose containers ran yet has a start latency to measure.
        let seen = slots
            .iter()
            .all(|s| !s.ran)
            .then(|| pod::annotation(pod, CONFIG_SEEN)?.parse::<Timestamp>().ok())
            .flatten();
        // Init containers that completed do not run again while the sandbox lives (I2);
        // a new sandbox runs them all again (`SandboxReady { fresh }`).
        let initialized = slots.iter().all(|s| !s.kind.is_init())
            || slots.iter().any(|s| s.kind == SlotKind::App && s.ran);
        Current {
            initialized,
            active_since: now.at,
            failed: evicted_before(pod),
            gate: 0,
            pod: pod.clone(),
            source: desired.source,
            uid,
            seen,
            started: now.wall,
            sandbox: Sandbox::Pending { retry_at: now.at },
            objects: super::ObjectsWait::new(desired.answers),
            refresh_volumes: false,
            volumes_released: false,
            problem: None,
            sandbox_backoff: Backoff::new(SANDBOX_RETRY_INITIAL, SANDBOX_RETRY_MAX),
            slots,
            shut_down: false,
            resize: super::resizing::Resize::default(),
        }
    }
}

/// Whether `found` was made from the spec `slot` stands for: its hash label is the
/// spec's, or the hash an agent before in-place resize gave the same spec (K6).
fn same_spec(pod: &Pod, slot: &Slot, found: &Found) -> bool {
    let Some(hash) = found.hash.as_deref() else { return false };
    hash == slot.hash
        || pod::container(pod, &slot.name).is_some_and(|c| super::legacy_container_hash(c) == hash)
}

/// A sandbox that cannot be set up is tried again after 1 s, doubling (jittered) up to
/// kubelet's pod-worker back-off after a failed sync (`backOffPeriod`, 10 s): a pod
/// waiting for its claim to bind (K3) reads it again at each try (K5: with `get`), so it
/// starts at most about 10 s after the claim binds.
const SANDBOX_RETRY_INITIAL: std::time::Duration = std::time::Duration::from_secs(1);
const SANDBOX_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// Takes over one container an earlier run left: kept if running, else treated as an exit
/// seen now.
fn adopt_container(
    restart: &ContainerRestart,
    slot: &mut Slot,
    found: Found,
    now: Now,
    out: &mut Vec<Action>,
) {
    slot.restart_count = found.restart_count;
    slot.ran = true;
    // K6: what the container was resized to, or else made with.
    if found.resources.is_some() {
        slot.resources = found.resources.clone();
    }
    let started_at = found.started_at.unwrap_or(now.wall);
    let recorded = &found.recorded_exit;
    let (exit_code, finished_at) = match found.task {
        FoundTask::Running => {
            out.push(Action::Watch { container_id: found.id.clone() });
            tracing::info!(
                container = slot.name,
                container_id = found.id,
                "adopted running container"
            );
            slot.id = Some(found.id);
            slot.state = SlotState::Running { started_at };
            return;
        }
        FoundTask::NotRunning { exit_code, exited_at } => {
            out.push(Action::DeleteTask { container_id: found.id.clone(), reap: false });
            (exit_code, exited_at.or(recorded.finished_at))
        }
        FoundTask::None => (recorded.exit_code.unwrap_or(-1), recorded.finished_at),
    };
    let reason = recorded
        .reason
        .as_deref()
        .and_then(TerminatedReason::parse)
        .unwrap_or_else(|| TerminatedReason::of(exit_code, false));
    let terminated = Terminated {
        container_id: found.id.clone(),
        exit_code,
        reason,
        started_at: Some(started_at),
        finished_at,
        signal: None,
        message: None,
    };
    tracing::info!(
        container = slot.name,
        container_id = found.id,
        exit_code,
        "adopted exited container"
    );
    slot.id = Some(found.id);
    if slot.kind.restarts(restart, exit_code) {
        slot.last_termination = Some(terminated);
        slot.state = creating(now.at);
    } else {
        slot.state = SlotState::Terminated(terminated);
    }
}

/// An API pod the API server already has as evicted (an earlier run of the agent evicted
/// it): it stays so, and nothing of it starts again.
fn evicted_before(pod: &Pod) -> Option<PodFailure> {
    let status = pod.status.as_ref()?;
    let evicted = status.phase.as_deref() == Some("Failed")
        && status.reason.as_deref() == Some(PodFailureReason::Evicted.as_str());
    evicted.then(|| PodFailure {
        reason: PodFailureReason::Evicted,
        message: status.message.clone().unwrap_or_default(),
        grace: None,
    })
}
