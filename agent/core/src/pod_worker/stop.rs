//! Stopping: a pod replaced or no longer desired, what an earlier run left for another
//! pod, and every pod at a node shutdown. SIGTERM, the grace period, then SIGKILL, then
//! [`KILL_WAIT`] at most for the exits.

use std::collections::{BTreeSet, HashSet};

use super::slot::{SlotKind, SlotState, Terminated, TerminatedReason};
use super::{
    Action, Current, DEFAULT_GRACE, Exit, Found, FoundTask, KILL_WAIT, MIN_SHUTDOWN_WINDOW, Now,
    PodWorker, Shutdown, StopSignal, StopTarget, Stopping, kill, reason,
};
use crate::event_aggregate::EventType;
use crate::lifecycle;
use crate::pod;

impl PodWorker {
    /// Containers an earlier run left that belong to no desired pod: stopped with the
    /// grace period they were started with, then removed with their pods' sandboxes.
    pub(super) fn begin_stop_stale(&mut self, stale: Vec<Found>, now: Now, out: &mut Vec<Action>) {
        let grace = stale.iter().filter_map(|f| f.grace).max().unwrap_or(DEFAULT_GRACE);
        let running: Vec<String> =
            stale.iter().filter(|f| f.task == FoundTask::Running).map(|f| f.id.clone()).collect();
        for id in &running {
            out.push(Action::Watch { container_id: id.clone() });
        }
        let (target, hooks) = (StopTarget::Stale(stale), BTreeSet::new());
        self.begin_stop(target, running, hooks, Vec::new(), now.at + grace, out);
    }

    /// The current pod, replaced or no longer desired: stopped gracefully (a deleting
    /// pod's grace period wins when shorter), then removed with its sandbox.
    pub(super) fn begin_stop_current(&mut self, now: Now, out: &mut Vec<Action>) {
        let Some(current) = self.current.take() else { return };
        // The pod's own grace period, or its deleting version's; not a replacement's.
        let deleting = self.desired.as_ref().map(|d| &d.pod).filter(|p| pod::uid(p) == current.uid);
        let grace = lifecycle::grace_period(deleting.unwrap_or(&current.pod));
        let running: Vec<String> =
            current.slots.iter().filter_map(|s| s.running_id().map(str::to_owned)).collect();
        tracing::info!(pod.uid = current.uid, containers = running.len(), ?grace, "stopping pod");
        for slot in current.slots.iter().filter(|s| s.is_running()) {
            out.push(Action::Event {
                pod: current.pod.clone(),
                container: Some(slot.name.clone()),
                kind: EventType::Normal,
                reason: reason::KILLING,
                message: format!("Stopping container {}", slot.name),
            });
        }
        let hooks = self.pre_stop_hooks(&current, grace, out);
        let later = sidecars_last_first(&current);
        let target = StopTarget::Current(Box::new(current));
        self.begin_stop(target, running, hooks, later, now.at + grace, out);
    }

    /// Runs the preStop hooks of the pod's running containers; the containers whose hook
    /// runs (including one a container's own kill started).
    fn pre_stop_hooks(
        &self,
        current: &Current,
        grace: std::time::Duration,
        out: &mut Vec<Action>,
    ) -> BTreeSet<String> {
        let target = current.target(self.settings.host_ip);
        let mut hooks = BTreeSet::new();
        // Sidecars stop later, one at a time (I3): their hooks run in their turn.
        for slot in current.slots.iter().filter(|s| s.kind != SlotKind::Sidecar) {
            let Some(id) = slot.running_id() else { continue };
            let runs = match &slot.kill {
                // Killed on its own already: its preStop hook may still run (SIGTERM
                // waits for it as before), or it has had its SIGTERM.
                Some(kill) => kill.pre_stop && !kill.killed,
                None => {
                    let container = current.container(&slot.name);
                    let hooks = kill::Hooks { pod: &current.pod, container, target };
                    hooks.pre_stop(id, grace, out)
                }
            };
            if runs {
                hooks.insert(id.to_owned());
            }
        }
        hooks
    }

    /// Node shutdown: the pod's containers are stopped gracefully and left in place (the
    /// next agent finds them exited and restarts them by their restart policy).
    /// With `group_grace` (J3: the pod's priority group's), the pod's own grace period is
    /// cut to it.
    pub(super) fn begin_shutdown(
        &mut self,
        group_grace: Option<std::time::Duration>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let Some(current) = &self.current else {
            self.shutdown = Shutdown::Done;
            return;
        };
        let own = lifecycle::grace_period(&current.pod);
        let grace = group_grace.map_or(own, |group| crate::node_shutdown::pod_grace(own, group));
        let running: Vec<String> =
            current.slots.iter().filter_map(|s| s.running_id().map(str::to_owned)).collect();
        tracing::info!(
            pod.uid = current.uid,
            containers = running.len(),
            ?grace,
            "node shutdown: stopping pod"
        );
        let hooks = self.pre_stop_hooks(current, grace, out);
        let later = sidecars_last_first(current);
        self.begin_stop(StopTarget::Shutdown, running, hooks, later, now.at + grace, out);
    }

    /// Signals the running containers (those whose preStop hook runs, once it returns;
    /// the sidecars in `later` once the others are gone, in that order) and waits for
    /// their exits until `deadline`, the end of the grace period.
    fn begin_stop(
        &mut self,
        target: StopTarget,
        running: Vec<String>,
        hooks: BTreeSet<String>,
        later: Vec<String>,
        deadline: std::time::Instant,
        out: &mut Vec<Action>,
    ) {
        let signal_now: Vec<String> = running
            .iter()
            .filter(|id| !hooks.contains(*id) && !later.contains(*id))
            .cloned()
            .collect();
        if !signal_now.is_empty() {
            out.push(Action::Signal {
                container_ids: signal_now.clone(),
                signal: StopSignal::Term,
            });
            // A task that is already stopped sends no further event.
            out.push(Action::CheckExited { container_ids: signal_now });
        }
        self.stopping = Some(Stopping {
            target,
            waiting: running.into_iter().collect::<BTreeSet<_>>(),
            hooks,
            later,
            deadline,
            killed: false,
        });
    }

    /// When every container but the sidecars still to stop has exited, the next sidecar
    /// (the last declared first) gets its preStop hook or SIGTERM (I3).
    fn stop_next_sidecar(&mut self, now: Now, out: &mut Vec<Action>) {
        let host_ip = self.settings.host_ip;
        let Some(stopping) = &mut self.stopping else { return };
        while !stopping.killed
            && now.at < stopping.deadline
            && stopping.waiting.iter().all(|id| stopping.later.contains(id))
            && !stopping.later.is_empty()
        {
            let id = stopping.later.remove(0);
            if !stopping.waiting.contains(&id) {
                continue;
            }
            let current = match &stopping.target {
                StopTarget::Current(current) => Some(current.as_ref()),
                StopTarget::Shutdown => self.current.as_ref(),
                StopTarget::Stale(_) => None,
            };
            let hooked = current.is_some_and(|current| {
                let Some(slot) = current.slots.iter().find(|s| s.id.as_deref() == Some(&id)) else {
                    return false;
                };
                let container = current.container(&slot.name);
                let target = current.target(host_ip);
                let hooks = kill::Hooks { pod: &current.pod, container, target };
                hooks.pre_stop(&id, stopping.deadline - now.at, out)
            });
            if hooked {
                stopping.hooks.insert(id);
            } else {
                kill::term(&id, out);
            }
        }
    }

    /// Moves the stop under way on: true once it is finished (the worker goes on with
    /// the next thing), false while it waits for exits.
    pub(super) fn continue_stop(&mut self, now: Now, out: &mut Vec<Action>) -> bool {
        self.stop_next_sidecar(now, out);
        let Some(stopping) = &mut self.stopping else { return true };
        if !stopping.waiting.is_empty() && now.at < stopping.deadline {
            return false;
        }
        let cut: Vec<String> = stopping.hooks.intersection(&stopping.waiting).cloned().collect();
        if !cut.is_empty() && !stopping.killed {
            // The grace period cut these containers' preStop hooks short: SIGTERM now and
            // kubelet's minimum shutdown window, SIGKILL for the others.
            tracing::info!(
                containers = cut.len(),
                "grace period over with preStop hooks running; sending SIGTERM"
            );
            let others: Vec<String> =
                stopping.waiting.iter().filter(|id| !cut.contains(*id)).cloned().collect();
            if !others.is_empty() {
                out.push(Action::Signal { container_ids: others, signal: StopSignal::Kill });
            }
            out.push(Action::Signal { container_ids: cut.clone(), signal: StopSignal::Term });
            out.push(Action::CheckExited { container_ids: cut });
            stopping.hooks.clear();
            stopping.deadline = now.at + MIN_SHUTDOWN_WINDOW;
            return false;
        }
        if !stopping.waiting.is_empty() && !stopping.killed {
            tracing::info!(
                containers = stopping.waiting.len(),
                "grace period over; sending SIGKILL"
            );
            out.push(Action::Signal {
                container_ids: stopping.waiting.iter().cloned().collect(),
                signal: StopSignal::Kill,
            });
            stopping.killed = true;
            stopping.hooks.clear();
            stopping.deadline = now.at + KILL_WAIT;
            return false;
        }
        if !stopping.waiting.is_empty() {
            tracing::warn!(containers = ?stopping.waiting, "containers did not stop after SIGKILL; removing them anyway");
        }
        let Some(stopping) = self.stopping.take() else { return true };
        match stopping.target {
            StopTarget::Stale(stale) => {
                let uids: HashSet<String> =
                    stale.iter().filter_map(|f| f.pod_uid.clone()).collect();
                for found in stale {
                    out.push(Action::RemoveContainer { container_id: found.id, background: false });
                }
                for uid in uids {
                    out.push(Action::TearDownSandbox { uid: uid.clone() });
                    tracing::info!(pod.uid = uid, "removed a pod left by an earlier run");
                }
            }
            StopTarget::Current(current) => {
                for id in current.slots.iter().filter_map(|s| s.id.clone()) {
                    out.push(Action::RemoveContainer { container_id: id, background: false });
                }
                let uid = current.uid;
                tracing::info!(pod.uid = uid, "pod stopped; removing it");
                out.push(Action::TearDownSandbox { uid: uid.clone() });
                out.push(Action::RemoveStatus { uid: uid.clone() });
                out.push(Action::ForgetPod { uid });
            }
            StopTarget::Shutdown => {
                // Whatever did not report its exit counts as killed.
                for id in &stopping.waiting {
                    let exit = Exit {
                        container_id: id.clone(),
                        exit_code: 137,
                        finished_at: None,
                        signal: None,
                        by: super::ExitSource::Containerd,
                    };
                    self.stopped_by_shutdown(&exit, now);
                }
                if let Some(current) = &mut self.current {
                    current.shut_down = true;
                }
                self.shutdown = Shutdown::Done;
            }
        }
        true
    }

    /// A container stopped by a node shutdown: terminated, not restarted.
    pub(super) fn stopped_by_shutdown(&mut self, exit: &Exit, now: Now) {
        let Some(current) = &mut self.current else { return };
        let Some(slot) =
            current.slots.iter_mut().find(|s| s.running_id() == Some(&exit.container_id))
        else {
            return;
        };
        let SlotState::Running { started_at } = slot.state else { return };
        slot.stopped_running();
        slot.state = SlotState::Terminated(Terminated {
            container_id: exit.container_id.clone(),
            exit_code: exit.exit_code,
            reason: TerminatedReason::of(exit.exit_code, false),
            started_at: Some(started_at),
            finished_at: Some(exit.finished_at.unwrap_or(now.wall)),
            signal: None,
            message: None,
        });
    }
}

/// The pod's running sidecars, the last declared first: the order they stop in (I3).
fn sidecars_last_first(current: &Current) -> Vec<String> {
    let sidecars = current.slots.iter().filter(|s| s.kind == SlotKind::Sidecar);
    sidecars.rev().filter_map(|s| s.running_id().map(str::to_owned)).collect()
}

impl Stopping {
    /// The pod and name of a container this stop waits for (the stopped pod's, or at a
    /// node shutdown the current one's).
    pub(super) fn pod_and_container(
        &self,
        current: Option<&Current>,
        container_id: &str,
    ) -> Option<(std::sync::Arc<k8s_openapi::api::core::v1::Pod>, String)> {
        let current = match &self.target {
            StopTarget::Current(stopped) => stopped,
            StopTarget::Shutdown => current?,
            StopTarget::Stale(_) => return None,
        };
        let slot = current.slots.iter().find(|s| s.id.as_deref() == Some(container_id))?;
        Some((current.pod.clone(), slot.name.clone()))
    }
}
