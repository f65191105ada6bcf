//! Killing one running container while its pod goes on (a failed liveness or startup
//! probe, a failed postStart hook, a changed spec): its preStop hook, then SIGTERM, both
//! within the grace period (L2), then SIGKILL and [`KILL_WAIT`] for the exit. The exit
//! then takes the usual way (restart or not), with the kill's say on restarting.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::slot::{Kill, KillReason, Slot};
use super::{
    Action, Exit, ExitSource, KILL_WAIT, MIN_SHUTDOWN_WINDOW, Now, PodWorker, StopSignal, reason,
};
use crate::event_aggregate::EventType;
use crate::probe::{Hook, Target, hook_handler};

/// A container's spec in its pod, and where its hooks go: what its preStop hook and a
/// kill need.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hooks<'a> {
    pub pod: &'a std::sync::Arc<Pod>,
    pub container: Option<&'a Container>,
    pub target: Target,
}

impl Hooks<'_> {
    /// Starts killing the running container of `slot` within `grace`.
    pub(super) fn kill(
        &self,
        slot: &mut Slot,
        why: KillReason,
        grace: Duration,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let Some(id) = slot.running_id().map(str::to_owned) else { return };
        if slot.kill.is_some() {
            return;
        }
        tracing::info!(container = slot.name, container_id = id, reason = ?why, ?grace, "killing container");
        let pre_stop = self.pre_stop(&id, grace, out);
        if !pre_stop {
            term(&id, out);
        }
        slot.kill = Some(Kill { reason: why, deadline: now.at + grace, pre_stop, killed: false });
    }

    /// Runs the container's preStop hook, if it has one that can run: true if it runs.
    pub(super) fn pre_stop(
        &self,
        container_id: &str,
        grace: Duration,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(container) = self.container else { return false };
        let Some(handler) = Hook::PreStop.of(container) else { return false };
        match hook_handler(handler, container, self.target) {
            Ok(handler) => {
                out.push(Action::RunHook {
                    pod: self.pod.clone(),
                    container: container.name.clone(),
                    container_id: container_id.to_owned(),
                    hook: Hook::PreStop,
                    handler,
                    // It shares the grace period with the signal's wait (L2).
                    timeout: Some(grace),
                });
                true
            }
            Err(e) => {
                tracing::warn!(
                    container = container.name,
                    error = %e,
                    "cannot run the preStop hook"
                );
                out.push(failed_pre_stop(self.pod, &container.name));
                false
            }
        }
    }
}

/// kubelet's event for a failed preStop hook (its message stays in the log: it may
/// carry secrets).
pub(super) fn failed_pre_stop(pod: &std::sync::Arc<Pod>, container: &str) -> Action {
    Action::Event {
        pod: pod.clone(),
        container: Some(container.to_owned()),
        kind: EventType::Warning,
        reason: reason::FAILED_PRE_STOP_HOOK,
        message: "PreStopHook failed".to_owned(),
    }
}

/// SIGTERM, and a check in case the task is already stopped (it sends no event then).
pub(super) fn term(container_id: &str, out: &mut Vec<Action>) {
    let container_ids = vec![container_id.to_owned()];
    out.push(Action::Signal { container_ids: container_ids.clone(), signal: StopSignal::Term });
    out.push(Action::CheckExited { container_ids });
}

impl PodWorker {
    /// Kills whose grace period is over get SIGKILL; those that did not exit within
    /// [`KILL_WAIT`] of it are taken as exited (137), so the pod goes on.
    pub(super) fn kill_deadlines(&mut self, now: Now, out: &mut Vec<Action>) {
        let Some(current) = &mut self.current else { return };
        let mut gone = Vec::new();
        for slot in &mut current.slots {
            let Some(id) = slot.running_id().map(str::to_owned) else { continue };
            let Some(kill) = &mut slot.kill else { continue };
            if kill.deadline > now.at {
                continue;
            }
            if kill.killed {
                tracing::warn!(
                    container = slot.name,
                    container_id = id,
                    "container did not exit after SIGKILL; taking it as killed"
                );
                gone.push(id);
                continue;
            }
            if kill.pre_stop {
                // The grace period cut its preStop hook short: SIGTERM now, SIGKILL after
                // kubelet's minimum shutdown window.
                tracing::info!(
                    container = slot.name,
                    container_id = id,
                    "grace period over with its preStop hook running; sending SIGTERM"
                );
                kill.pre_stop = false;
                kill.deadline = now.at + MIN_SHUTDOWN_WINDOW;
                term(&id, out);
                continue;
            }
            tracing::info!(
                container = slot.name,
                container_id = id,
                "grace period over; sending SIGKILL"
            );
            kill.killed = true;
            kill.pre_stop = false;
            kill.deadline = now.at + KILL_WAIT;
            let container_ids = vec![id];
            out.push(Action::Signal {
                container_ids: container_ids.clone(),
                signal: StopSignal::Kill,
            });
            out.push(Action::CheckExited { container_ids });
        }
        for container_id in gone {
            let exit = Exit {
                container_id,
                exit_code: 137,
                finished_at: None,
                signal: None,
                by: ExitSource::Containerd,
            };
            self.exited(exit, now, out);
        }
    }

    /// A container's preStop hook returned: SIGTERM follows, unless the grace period
    /// ran out meanwhile (SIGKILL went already).
    pub(super) fn pre_stop_done(
        &mut self,
        container_id: &str,
        result: Result<(), String>,
        out: &mut Vec<Action>,
    ) {
        let failed = |pod: &std::sync::Arc<Pod>, name: &str, out: &mut Vec<Action>| {
            if let Err(e) = &result {
                tracing::warn!(container = name, error = e, "preStop hook failed");
                out.push(failed_pre_stop(pod, name));
            }
        };
        if let Some(stopping) = &mut self.stopping {
            if !stopping.hooks.remove(container_id) {
                return;
            }
            let (pod, name) = match stopping.pod_and_container(self.current.as_ref(), container_id)
            {
                Some(found) => found,
                None => return,
            };
            failed(&pod, &name, out);
            if !stopping.killed && stopping.waiting.contains(container_id) {
                term(container_id, out);
            }
            return;
        }
        let Some(current) = &mut self.current else { return };
        let pod = current.pod.clone();
        let Some(slot) = current.slots.iter_mut().find(|s| s.running_id() == Some(container_id))
        else {
            return;
        };
        let Some(kill) = &mut slot.kill else { return };
        if !kill.pre_stop {
            return;
        }
        kill.pre_stop = false;
        let killed = kill.killed;
        failed(&pod, &slot.name, out);
        if !killed {
            term(container_id, out);
        }
    }
}
