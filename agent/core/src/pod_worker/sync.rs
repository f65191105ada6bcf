//! Bringing the current pod's containers where its spec wants them, once its sandbox is
//! up: init containers one at a time, each to success (I1, I2); sidecars in their turn,
//! each gating the next until it has started (I3); then the app containers. A finished
//! pod (its app containers completed, an init container failed for good, or its active
//! deadline passed) starts nothing more and stops its sidecars last, in reverse order.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::objects::{Gate, Needs, ObjectsWait, SERVICES_NOT_READ};
use super::slot::{self, KillReason, Slot, SlotKind, SlotState, WaitingReason, creating};
use super::{
    Action, Current, Now, PodFailure, PodFailureReason, Sandbox, StartFailure, container_hash,
    kill, probing, resizing,
};
use crate::event_aggregate::{EventType, reason};
use crate::probe::Target;
use crate::{lifecycle, pod};

/// kubelet's word for a pod past its `activeDeadlineSeconds`.
pub const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

impl Current {
    /// Sets up the sandbox when due; then per container in its turn: one whose spec
    /// changed is killed gracefully and recreated, a running one is probed when due, and
    /// one due to (re)start is started. Both wait for the pod's objects' first answers
    /// ([`super::objects`]). Returns the starts refused here (K1: the Services not read),
    /// to be failed as the runtime's would be.
    pub(super) fn sync(
        &mut self,
        now: Now,
        host_ip: Option<IpAddr>,
        jitter: &mut fastrand::Rng,
        out: &mut Vec<Action>,
    ) -> Vec<(String, StartFailure)> {
        match self.sandbox {
            Sandbox::Pending { retry_at } if retry_at <= now.at => {
                if let Gate::Until(at) = self.objects.gate(Needs::Volumes, now.at) {
                    self.sandbox = Sandbox::Pending { retry_at: at };
                    return Vec::new();
                }
                self.sandbox = Sandbox::SettingUp;
                out.push(Action::SetUpSandbox { pod: self.pod.clone() });
                return Vec::new();
            }
            Sandbox::Pending { .. } | Sandbox::SettingUp => return Vec::new(),
            Sandbox::Ready { .. } => {}
        }
        let target = self.target(host_ip);
        let pod = self.pod.clone();
        self.check_deadline(now, out);
        if self.finished() {
            self.gate = 0;
            self.finish(&pod, target, now, out);
            return Vec::new();
        }
        let objects = &mut self.objects;
        let mut turn = Turn { pod: &pod, target, now, jitter, objects, refused: Vec::new(), out };
        // Init containers and sidecars, in order: each waits for the one before it; the
        // app containers wait for them all.
        let initialized = self.initialized;
        let mut gate = None;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(container) = pod::container(&pod, &slot.name) else { continue };
            let may_start = initialized || gate.is_none();
            match slot.kind {
                // Completed ones do not run again while the sandbox lives (I2).
                SlotKind::Init if initialized || slot.is_completed() => {}
                SlotKind::Init => {
                    turn.sync_slot(container, slot, may_start);
                    gate = gate.or(Some(i + 1));
                }
                SlotKind::Sidecar | SlotKind::App => {
                    turn.sync_slot(container, slot, may_start);
                    if slot.kind == SlotKind::Sidecar && !slot.is_started() {
                        gate = gate.or(Some(i + 1));
                    }
                }
                // Not in `containers` or `initContainers`: synced below.
                SlotKind::Ephemeral => {}
            }
        }
        // X1: ephemeral containers start whether or not the pod is initialized.
        turn.sync_ephemeral(&mut self.slots);
        if gate.is_none() && !initialized {
            tracing::info!(pod.uid = self.uid, "pod initialized");
            self.initialized = true;
        }
        self.gate = if self.initialized { self.slots.len() } else { gate.unwrap_or(0) };
        turn.refused
    }

    /// The instant `activeDeadlineSeconds` runs out, if the pod has one.
    pub(super) fn active_deadline(&self) -> Option<Instant> {
        let seconds = self.pod.spec.as_ref()?.active_deadline_seconds?;
        let seconds = u64::try_from(seconds).unwrap_or(0);
        Some(self.active_since + Duration::from_secs(seconds))
    }

    fn check_deadline(&mut self, now: Now, out: &mut Vec<Action>) {
        if self.failed.is_some() || self.active_deadline().is_none_or(|at| at > now.at) {
            return;
        }
        tracing::warn!(pod.uid = self.uid, "{DEADLINE_MESSAGE}; stopping its containers");
        self.failed = Some(PodFailure {
            reason: PodFailureReason::DeadlineExceeded,
            message: DEADLINE_MESSAGE.to_owned(),
            grace: None,
        });
        out.push(Action::Event {
            pod: self.pod.clone(),
            container: None,
            kind: EventType::Warning,
            reason: reason::DEADLINE_EXCEEDED,
            message: DEADLINE_MESSAGE.to_owned(),
        });
    }

    /// The eviction manager chose the pod (E2): nothing more of it starts, its containers
    /// stop within `grace`, and it is Failed with reason `Evicted`.
    pub(super) fn evict(&mut self, message: String, grace: Duration, out: &mut Vec<Action>) {
        if self.failed.as_ref().is_some_and(|f| f.reason == PodFailureReason::Evicted) {
            return;
        }
        tracing::warn!(pod.uid = self.uid, message, "pod evicted; stopping its containers");
        out.push(Action::Event {
            pod: self.pod.clone(),
            container: None,
            kind: EventType::Warning,
            reason: reason::EVICTED,
            message: message.clone(),
        });
        self.failed =
            Some(PodFailure { reason: PodFailureReason::Evicted, message, grace: Some(grace) });
    }

    /// K4: a critical pod was admitted in its place (kubelet's preemption): a Warning
    /// Event `Preempting`, and the pod stops within its own grace period, Failed.
    pub(super) fn preempt(&mut self, out: &mut Vec<Action>) {
        if self.failed.is_some() {
            return;
        }
        let message = crate::node_admission::PREEMPTED_MESSAGE;
        tracing::warn!(pod.uid = self.uid, message, "pod preempted; stopping its containers");
        out.push(Action::Event {
            pod: self.pod.clone(),
            container: None,
            kind: EventType::Warning,
            reason: reason::PREEMPTING,
            message: message.to_owned(),
        });
        let failure = PodFailure {
            reason: PodFailureReason::Preempted,
            message: message.to_owned(),
            grace: None,
        };
        self.failed = Some(failure);
    }

    /// Nothing more of the pod starts: it was evicted, its active deadline passed, an init container
    /// failed and is not retried (`restartPolicy: Never`, I2, or its own policy, I4), or every
    /// app container completed and is not restarted (sidecars do not keep a pod going, I3).
    pub(super) fn finished(&self) -> bool {
        let init_failed = self.slots.iter().any(Slot::is_failed_init);
        let apps_done = self.initialized
            && self
                .slots
                .iter()
                .filter(|s| s.kind == SlotKind::App)
                .all(|s| matches!(s.state, SlotState::Terminated(_)));
        self.failed.is_some() || init_failed || apps_done
    }

    /// A finished pod's running containers stop: app and init containers first, then
    /// the sidecars one at a time, the last declared first (I3).
    fn finish(
        &mut self,
        pod: &std::sync::Arc<Pod>,
        target: Target,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let grace = self.failed.as_ref().and_then(|f| f.grace);
        let grace = grace.unwrap_or_else(|| lifecycle::grace_period(pod));
        let kill = |slot: &mut Slot, out: &mut Vec<Action>| {
            let container = pod::container(pod, &slot.name);
            let hooks = kill::Hooks { pod, container, target };
            hooks.kill(slot, KillReason::PodFinished, grace, now, out);
        };
        let mut others_running = false;
        for slot in self.slots.iter_mut().filter(|s| s.kind != SlotKind::Sidecar) {
            if slot.is_running() {
                kill(slot, out);
                others_running = true;
            }
        }
        if others_running {
            return;
        }
        if let Some(last) =
            self.slots.iter_mut().filter(|s| s.kind == SlotKind::Sidecar).rfind(|s| s.is_running())
        {
            kill(last, out);
            return;
        }
        let starting = self.slots.iter().any(|s| matches!(s.state, SlotState::Starting { .. }));
        if !starting && !std::mem::replace(&mut self.volumes_released, true) {
            out.push(Action::ReleaseVolumes { uid: self.uid.clone() });
        }
    }
}

/// What syncing one container needs besides it.
pub(super) struct Turn<'a, 'o> {
    pub(super) pod: &'a std::sync::Arc<Pod>,
    target: Target,
    pub(super) now: Now,
    jitter: &'o mut fastrand::Rng,
    objects: &'o mut ObjectsWait,
    /// Starts refused here, to be failed as the runtime's would be.
    pub(super) refused: Vec<(String, StartFailure)>,
    pub(super) out: &'o mut Vec<Action>,
}

impl Turn<'_, '_> {
    /// One container: replaced when its spec changed, probed while it runs, started
    /// when due and `may_start`.
    fn sync_slot(&mut self, container: &Container, slot: &mut Slot, may_start: bool) {
        let Turn { pod, target, now, .. } = *self;
        let hash = container_hash(container);
        // A start under way finishes first (its result would stand for the new spec
        // otherwise, and the container it makes would be left behind).
        if slot.hash != hash && !matches!(slot.state, SlotState::Starting { .. }) {
            if slot.is_running() {
                // The container's spec changed (an API pod's image, say): it stops
                // gracefully (preStop, SIGTERM, grace period) and is recreated.
                if slot.kill.is_none() {
                    tracing::info!(container = slot.name, "container spec changed; replacing it");
                    self.out.push(Action::Event {
                        pod: pod.clone(),
                        container: Some(slot.name.clone()),
                        kind: EventType::Normal,
                        reason: reason::KILLING,
                        message: format!(
                            "Container {} definition changed, will be restarted",
                            slot.name
                        ),
                    });
                    let grace = lifecycle::grace_period(pod);
                    let hooks = kill::Hooks { pod, container: Some(container), target };
                    hooks.kill(slot, slot::KillReason::SpecChanged, grace, now, self.out);
                }
                return;
            }
            if let Some(id) = slot.id.take() {
                self.out.push(Action::KeepDead { container_id: id });
                slot.last_termination = None;
            }
            slot.hash.clone_from(&hash);
            slot.state = creating(now.at);
        }
        // K6: a resize whose resizePolicy restarts the container.
        if slot.is_running()
            && resizing::restart_for_resize(pod, container, slot, target, now, self.out)
        {
            return;
        }
        if slot.is_running() {
            probing::probe(pod, container, slot, target, now, self.jitter, self.out);
            return;
        }
        if may_start {
            self.start_when_due(slot, hash, None);
        }
    }

    /// A container not running, started if its start is due (once the pod's objects
    /// answered); `target`: the running container whose process namespace it shares (X1).
    pub(super) fn start_when_due(&mut self, slot: &mut Slot, hash: String, target: Option<String>) {
        let Turn { pod, now, .. } = *self;
        if slot.due().is_none_or(|at| at > now.at) {
            return;
        }
        let restart_count = if slot.ran { slot.restart_count + 1 } else { 0 };
        match self.objects.gate(Needs::Env, now.at) {
            Gate::Until(at) => {
                slot.hold_until(at);
                return;
            }
            Gate::Go if self.objects.services_missing() => {
                slot.state = SlotState::Starting { restart_count };
                let reason = WaitingReason::CreateContainerConfigError;
                let failure = StartFailure::new(reason, SERVICES_NOT_READ.to_owned());
                self.refused.push((slot.name.clone(), failure));
                return;
            }
            Gate::Go => {}
        }
        // The container this start replaces stays as a dead container (G1): the garbage
        // collector keeps the newest ones, as kubelet does (`logs --previous` reads its log).
        if let Some(old) = slot.id.take() {
            self.out.push(Action::KeepDead { container_id: old });
        }
        slot.state = SlotState::Starting { restart_count };
        self.out.push(Action::StartContainer {
            pod: pod.clone(),
            container: slot.name.clone(),
            restart_count,
            hash,
            target,
        });
    }
}
