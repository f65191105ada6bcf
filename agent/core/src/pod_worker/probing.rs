//! A running container's hooks and probes in the pod worker: postStart before it counts
//! as running (L1), its probes scheduled on the worker's one timer and never while it is
//! not running (P1), their results turned into readiness, `started`, events and kills
//! (P2–P4).

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::kill;
use super::slot::{KillReason, Slot, SlotState};
use super::{Action, Current, Now, PodWorker, reason};
use crate::event_aggregate::EventType;
use crate::lifecycle;
use crate::probe::{self, Hook, Outcome, ProbeKind, Probes, Target, Verdict, hook_handler};

impl Current {
    /// Where the pod's probes and hooks go by default.
    pub(super) fn target(&self, host_ip: Option<std::net::IpAddr>) -> Target {
        let pod_ip = match &self.sandbox {
            super::Sandbox::Ready { ips } => ips.first().copied(),
            _ => None,
        };
        Target { pod_ip, host_ip }
    }

    /// The spec of the container `name`.
    pub(super) fn container(&self, name: &str) -> Option<&Container> {
        crate::pod::container(&self.pod, name)
    }
}

/// Runs the postStart hook of a container that just started, if it has one: the
/// container is not `Running` until it returns. `Err`: the hook cannot run (validation
/// refuses that for static pods; an API pod's fails as the hook would).
pub(super) fn post_start(
    pod: &Arc<Pod>,
    container: Option<&Container>,
    slot: &mut Slot,
    target: Target,
    out: &mut Vec<Action>,
) -> Result<(), probe::Error> {
    let (Some(container), Some(id)) = (container, slot.running_id().map(str::to_owned)) else {
        return Ok(());
    };
    let Some(handler) = Hook::PostStart.of(container) else { return Ok(()) };
    slot.post_start = true;
    let handler = hook_handler(handler, container, target)?;
    out.push(Action::RunHook {
        pod: pod.clone(),
        container: container.name.clone(),
        container_id: id,
        hook: Hook::PostStart,
        handler,
        timeout: None,
    });
    Ok(())
}

/// Schedules the probes of a running container and emits those due at `now`.
pub(super) fn probe(
    pod: &Arc<Pod>,
    container: &Container,
    slot: &mut Slot,
    target: Target,
    now: Now,
    jitter: &mut fastrand::Rng,
    out: &mut Vec<Action>,
) {
    if slot.post_start || slot.kill.is_some() {
        return;
    }
    let Some(id) = slot.running_id().map(str::to_owned) else { return };
    if slot.probes.is_none() {
        let (since, spread) = match slot.running_since {
            Some(since) => (since, None),
            // Adopted from an earlier run: its first probes are spread over a period.
            None => (adopted_since(slot, now), Some(jitter.f64())),
        };
        slot.running_since = Some(since);
        let probes = Probes::new(container, target, since, now.at, spread);
        for (kind, error) in probes.errors() {
            tracing::warn!(
                container = container.name,
                probe = kind.as_str(),
                %error,
                "probe cannot run"
            );
            out.push(Action::Event {
                pod: pod.clone(),
                container: Some(container.name.clone()),
                kind: EventType::Warning,
                reason: reason::UNHEALTHY,
                message: format!("{} probe errored: {error}", kind.as_str()),
            });
        }
        slot.probes = Some(probes);
    }
    let Some(probes) = &mut slot.probes else { return };
    for run in probes.due(now.at) {
        out.push(Action::Probe {
            pod: pod.clone(),
            container: container.name.clone(),
            container_id: id.clone(),
            kind: run.kind,
            handler: run.handler,
            timeout: run.timeout,
        });
    }
}

/// When an adopted container started, on the monotonic clock (from its wall start).
fn adopted_since(slot: &Slot, now: Now) -> Instant {
    let SlotState::Running { started_at } = slot.state else { return now.at };
    let ago = now.wall.duration_since(started_at).unsigned_abs();
    now.at.checked_sub(ago).unwrap_or(now.at)
}

impl PodWorker {
    /// A probe's result: events for failures, and what the result changes.
    pub(super) fn probed(
        &mut self,
        container_id: &str,
        kind: ProbeKind,
        outcome: &Outcome,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        if self.stopping.is_some() {
            return;
        }
        let host_ip = self.settings.host_ip;
        let Some(current) = &mut self.current else { return };
        let target = current.target(host_ip);
        let pod = current.pod.clone();
        let Some(slot) = current.slots.iter_mut().find(|s| s.running_id() == Some(container_id))
        else {
            return;
        };
        if slot.kill.is_some() {
            return;
        }
        let Some(probes) = slot.probes.as_mut().filter(|p| p.awaits(kind)) else { return };
        let event = |kind_: EventType, reason: &'static str, message: String| Action::Event {
            pod: pod.clone(),
            container: Some(slot.name.clone()),
            kind: kind_,
            reason,
            message,
        };
        match outcome {
            Outcome::Success => {}
            Outcome::Warning(message) => out.push(event(
                EventType::Warning,
                reason::PROBE_WARNING,
                format!("{} probe warning: {message}", kind.as_str()),
            )),
            Outcome::Failure(message) => {
                tracing::debug!(
                    container = slot.name,
                    probe = kind.as_str(),
                    message,
                    "probe failed"
                );
                out.push(event(
                    EventType::Warning,
                    reason::UNHEALTHY,
                    format!("{} probe failed: {message}", kind.as_str()),
                ));
            }
        }
        match probes.record(kind, outcome.is_success()) {
            None => {}
            Some(Verdict::Started) => {
                tracing::info!(container = slot.name, "startup probe passed");
            }
            Some(Verdict::Ready(ready)) => {
                tracing::info!(container = slot.name, ready, "readiness changed");
            }
            Some(Verdict::Kill { kind, grace }) => {
                let probe = kind.as_str().to_ascii_lowercase();
                out.push(event(
                    EventType::Normal,
                    reason::KILLING,
                    format!("Container {} failed {probe} probe, will be restarted", slot.name),
                ));
                let grace = grace.unwrap_or_else(|| lifecycle::grace_period(&pod));
                let container = crate::pod::container(&pod, &slot.name);
                let hooks = kill::Hooks { pod: &pod, container, target };
                hooks.kill(slot, KillReason::Probe(kind), grace, now, out);
            }
        }
    }

    /// A hook returned.
    pub(super) fn hook_done(
        &mut self,
        container_id: &str,
        hook: Hook,
        result: Result<(), String>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        match hook {
            Hook::PreStop => self.pre_stop_done(container_id, result, out),
            Hook::PostStart => self.post_start_done(container_id, result, now, out),
        }
    }

    pub(super) fn post_start_done(
        &mut self,
        container_id: &str,
        result: Result<(), String>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        if self.stopping.is_some() {
            // The stop under way takes the container down anyway.
            return;
        }
        let host_ip = self.settings.host_ip;
        let Some(current) = &mut self.current else { return };
        let target = current.target(host_ip);
        let pod = current.pod.clone();
        let Some(slot) = current.slots.iter_mut().find(|s| s.running_id() == Some(container_id))
        else {
            return;
        };
        if !slot.post_start {
            return;
        }
        slot.post_start = false;
        let Err(error) = result else { return };
        // kubelet keeps the hook's message out of the event (it may carry secrets).
        tracing::warn!(
            container = slot.name,
            container_id,
            error,
            "postStart hook failed; killing the container"
        );
        out.push(Action::Event {
            pod: pod.clone(),
            container: Some(slot.name.clone()),
            kind: EventType::Warning,
            reason: reason::FAILED_POST_START_HOOK,
            message: "PostStartHook failed".to_owned(),
        });
        let grace = lifecycle::grace_period(&pod);
        let container = crate::pod::container(&pod, &slot.name);
        let hooks = kill::Hooks { pod: &pod, container, target };
        hooks.kill(slot, KillReason::PostStartHook, grace, now, out);
    }
}
