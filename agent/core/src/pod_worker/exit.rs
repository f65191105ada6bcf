//! Starts and exits: a start's result, a running container's exit and the restart it
//! leads to (restartPolicy, CrashLoopBackOff), the OOM killer's word, and image pulls
//! backing off.

use std::time::Duration;

use super::slot::{KillReason, SlotKind, SlotState, Terminated, TerminatedReason, WaitingReason};
use super::{
    Action, Exit, ExitSource, Metric, Now, PodWorker, StartFailure, Started, StopTarget, probing,
    reason,
};
use crate::event_aggregate::EventType;
use crate::lifecycle::ContainerRestart;

impl PodWorker {
    pub(super) fn started(
        &mut self,
        container: &str,
        started: Started,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let host_ip = self.settings.host_ip;
        let Some(current) = &mut self.current else { return };
        let source = current.source;
        let seen = current.seen;
        let target = current.target(host_ip);
        let pod = current.pod.clone();
        let spec = crate::pod::container(&pod, container);
        let Some(slot) = current.slot_mut(container) else { return };
        let SlotState::Starting { restart_count } = slot.state else { return };
        tracing::info!(container, container_id = started.id, restart_count, "container started");
        if slot.ran {
            out.push(Action::Count(Metric::ContainerRestarted { source }));
        }
        let id = started.id.clone();
        slot.id = Some(started.id);
        slot.image_id = Some(started.image_id);
        slot.restart_count = restart_count;
        slot.ran = true;
        slot.state = SlotState::Running { started_at: started.started_at };
        slot.pull_failures = 0;
        slot.pull_backoff.reset();
        slot.oom = None;
        slot.stopped_running();
        slot.running_since = Some(now.at);
        slot.resources = crate::resize::resizable_part(spec.and_then(|c| c.resources.as_ref()));
        let hook = probing::post_start(&pod, spec, slot, target, out);
        if let Some(seen) = seen {
            let latency = started.started_at.duration_since(seen).unsigned_abs();
            current.seen = None;
            out.push(Action::Count(Metric::PodStarted { source, latency }));
        }
        if let Err(error) = hook {
            self.post_start_done(&id, Err(error.to_string()), now, out);
        }
    }

    pub(super) fn start_failed(
        &mut self,
        container: &str,
        failure: StartFailure,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let Some(current) = &mut self.current else { return };
        let pod = current.pod.clone();
        let Some(slot) = current.slot_mut(container) else { return };
        if !matches!(slot.state, SlotState::Starting { .. }) {
            return;
        }
        let pull = failure.is_pull();
        let delay = if pull {
            slot.pull_backoff.next_delay(self.jitter.f64())
        } else {
            slot.crash_loop.after_exit(Duration::ZERO)
        };
        let waiting = if pull && slot.pull_failures > 0 {
            WaitingReason::ImagePullBackOff
        } else {
            failure.reason
        };
        if pull {
            slot.pull_failures += 1;
        }
        tracing::warn!(container, reason = waiting.as_str(), error = failure.message, retry_in = ?delay, "cannot start container");
        let event = |kind, reason, message| Action::Event {
            pod: pod.clone(),
            container: Some(container.to_owned()),
            kind,
            reason,
            message,
        };
        if waiting == WaitingReason::ImagePullBackOff {
            let image = crate::pod::container(&pod, container)
                .and_then(|c| c.image.as_deref())
                .unwrap_or_default();
            let message = format!("Back-off pulling image \"{image}\"");
            out.push(event(EventType::Normal, reason::BACK_OFF, message));
        }
        // kubelet: the waiting reason for image trouble, the error otherwise.
        let error = if pull { waiting.as_str() } else { failure.message.as_str() };
        out.push(event(EventType::Warning, reason::FAILED, format!("Error: {error}")));
        slot.state = SlotState::Waiting {
            reason: waiting,
            message: Some(failure.message),
            retry_at: now.at + delay,
        };
    }

    /// A container's task exited. While a stop is under way, containerd's exit is what
    /// the stop waits for; otherwise a running container's exit is recorded and
    /// restarted by its restart policies and rules (I4). A second report of the same exit (the kernel
    /// and containerd both tell) finds the container no longer running, and only adds
    /// what the kernel knows (the signal).
    pub(super) fn exited(&mut self, exit: Exit, now: Now, out: &mut Vec<Action>) {
        if let Some(stopping) = &mut self.stopping {
            // The task must be stopped as containerd sees it to be removed: the kernel's
            // word does not end the wait.
            let awaited =
                exit.by == ExitSource::Containerd && stopping.waiting.remove(&exit.container_id);
            if awaited && matches!(stopping.target, StopTarget::Shutdown) {
                self.stopped_by_shutdown(&exit, now);
            }
            return;
        }
        let Some(current) = &mut self.current else { return };
        let pod = current.pod.clone();
        let uid = current.uid.clone();
        // A finished pod restarts nothing (a sidecar exiting after its app containers
        // completed stays down).
        let finished = current.finished();
        let Some(slot) =
            current.slots.iter_mut().find(|s| s.running_id() == Some(&exit.container_id))
        else {
            // Reported before by the other side: the kernel still knows the signal.
            if exit.by == ExitSource::Kernel
                && let Some(t) =
                    current.slots.iter_mut().find_map(|s| s.terminated_mut(&exit.container_id))
                && t.signal.is_none()
            {
                t.signal = exit.signal;
            }
            return;
        };
        let SlotState::Running { started_at } = slot.state else { return };
        let restart = ContainerRestart::of_named(&pod, &slot.name);
        let killed_for = slot.kill.as_ref().map(|k| k.reason);
        slot.stopped_running();
        let id = exit.container_id;
        let exit_code = exit.exit_code;
        let finished_at = exit.finished_at.unwrap_or(now.wall);
        let oom = slot.oom.take();
        let reason = TerminatedReason::of(exit_code, oom.is_some());
        // kubelet restarts a container killed for a failed probe unless its policy is
        // Never (I4), and one whose spec changed in any case; other exits go by exit code.
        let restarts = !finished
            && match killed_for {
                Some(KillReason::Probe(_)) => {
                    slot.kind == SlotKind::Sidecar || restart.after_probe()
                }
                Some(KillReason::SpecChanged) => true,
                Some(KillReason::PodFinished) => false,
                Some(KillReason::PostStartHook) | None => slot.kind.restarts(&restart, exit_code),
            };
        tracing::info!(
            container = slot.name,
            container_id = id,
            exit_code,
            signal = exit.signal,
            reason = reason.as_str(),
            restarts,
            // How long after the exit's own stamp (the kernel's tracepoint, the shim's
            // reap) the worker took it: B3 reads it to split its figure.
            after_us = exit.finished_at.map(|at| now.wall.duration_since(at).as_micros()),
            source = match exit.by {
                ExitSource::Kernel => "kernel",
                ExitSource::Containerd => "containerd",
            },
            "container exited"
        );
        let oom_killed = oom.is_some();
        let victim = oom.flatten();
        if oom_killed {
            // kubelet shows this only in the container's status; an Event makes it visible
            // in `kubectl get events` too.
            let chose = victim.as_deref().map(|v| format!(" (it chose {v})")).unwrap_or_default();
            out.push(Action::Event {
                pod: pod.clone(),
                container: Some(slot.name.clone()),
                kind: EventType::Warning,
                reason: reason::OOM_KILLED,
                message: format!(
                    "Container {} was killed by the kernel: out of memory{chose}",
                    slot.name
                ),
            });
        }
        out.push(Action::DeleteTask {
            container_id: id.clone(),
            reap: exit.by == ExitSource::Kernel,
        });
        out.push(Action::ReadTerminationMessage {
            pod: pod.clone(),
            container: slot.name.clone(),
            container_id: id.clone(),
            exit_code,
        });
        let terminated = Terminated {
            container_id: id.clone(),
            exit_code,
            reason,
            started_at: Some(started_at),
            finished_at: Some(finished_at),
            signal: exit.signal,
            message: victim.map(|v| format!("The OOM killer chose {v}")),
        };
        let delay = restarts.then(|| {
            if killed_for == Some(KillReason::SpecChanged) {
                // Replaced by its new spec at once: no crash loop.
                return Duration::ZERO;
            }
            let ran_for = finished_at.duration_since(started_at).unsigned_abs();
            slot.crash_loop.after_exit(ran_for)
        });
        // A container restarted at once is removed in a moment: no need to record how it
        // ended (a later run that finds it without its task restarts it all the same).
        if delay != Some(Duration::ZERO) {
            out.push(Action::RecordExit { container_id: id, terminated: terminated.clone() });
        }
        let Some(delay) = delay else {
            tracing::info!(
                container = slot.name,
                exit_code,
                reason = reason.as_str(),
                "container exited; not restarted (restartPolicy)"
            );
            slot.state = SlotState::Terminated(terminated);
            return;
        };
        tracing::debug!(container = slot.name, restart_in = ?delay, "restarting");
        let (namespace, name) = (&self.name.namespace, &self.name.name);
        if !delay.is_zero() {
            out.push(Action::Event {
                pod,
                container: Some(slot.name.clone()),
                kind: EventType::Warning,
                reason: reason::BACK_OFF,
                message: format!(
                    "Back-off restarting failed container {} in pod {name}_{namespace}({uid})",
                    slot.name
                ),
            });
        }
        slot.state = SlotState::Waiting {
            reason: if delay.is_zero() {
                WaitingReason::ContainerCreating
            } else {
                WaitingReason::CrashLoopBackOff
            },
            message: Some(format!(
                "back-off {delay:?} restarting failed container={} pod={name}_{namespace}({uid})",
                slot.name
            )),
            retry_at: now.at + delay,
        };
        slot.last_termination = Some(terminated);
    }

    /// The message an exited container left: it is what `terminated.message` shows
    /// (kubelet's), over what the OOM killer's record said.
    pub(super) fn termination_message(&mut self, container_id: &str, message: String) {
        let Some(current) = &mut self.current else { return };
        if let Some(t) = current.slots.iter_mut().find_map(|s| s.terminated_mut(container_id)) {
            t.message = Some(message);
        }
    }

    /// The OOM killer acted in a container. Before its exit: the exit is OOMKilled. After
    /// containerd's exit (the kernel's record read late): the reason is corrected.
    pub(super) fn oom(&mut self, container_id: &str, victim: Option<String>) {
        let Some(current) = &mut self.current else { return };
        if let Some(slot) = current.slots.iter_mut().find(|s| s.running_id() == Some(container_id))
        {
            // containerd's event names no victim; the kernel's, read later, does.
            let known = slot.oom.take().flatten();
            slot.oom = Some(victim.or(known));
        } else if let Some(victim) = victim
            && let Some(t) = current.slots.iter_mut().find_map(|s| s.terminated_mut(container_id))
            && t.message.is_none()
        {
            t.reason = TerminatedReason::OOMKilled;
            t.message = Some(format!("The OOM killer chose {victim}"));
        }
    }
}
