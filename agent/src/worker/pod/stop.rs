//! Stopping: a pod replaced or no longer desired, what an earlier run left for another
//! pod, and every pod at a node shutdown. SIGTERM, the grace period, then SIGKILL.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use outpost_core::lifecycle;
use tokio::time::Instant;

use super::super::sandbox;
use super::super::state::{self, SlotState, Terminated};
use super::super::{Inbox, Message};
use super::{KILL_WAIT, PodWorker};
use crate::error_chain::describe;
use crate::runtime::container::{self, LABEL_GRACE_PERIOD, LABEL_POD_UID, Listed};
use crate::runtime::events::{TaskEvent, timestamp};
use crate::sync::events::{EventType, pod_ref, reason};

impl PodWorker {
    /// Node shutdown: the pod's containers are stopped gracefully and left in place (the
    /// next agent finds them exited and restarts them by their restart policy); the
    /// pod is reported as kubelet's graceful node shutdown reports it.
    pub(super) async fn shut_down(&mut self, inbox: &mut Inbox) {
        let Some(current) = &self.current else { return };
        let grace = lifecycle::grace_period(&current.pod);
        let running: HashSet<String> =
            current.slots.iter().filter(|s| s.is_running()).filter_map(|s| s.id.clone()).collect();
        tracing::info!(
            pod.uid = current.uid,
            containers = running.len(),
            ?grace,
            "node shutdown: stopping pod"
        );
        self.stop_containers(inbox, running, grace).await;
        let containerd = self.runtime.containerd.clone();
        let Some(current) = &mut self.current else { return };
        for slot in &mut current.slots {
            let (Some(id), SlotState::Running { started_at }) = (&slot.id, &slot.state) else {
                continue;
            };
            let process = container::task(&containerd, id).await.ok().flatten();
            let exit_code =
                process.as_ref().map_or(137, |p| i32::try_from(p.exit_status).unwrap_or(i32::MAX));
            let finished_at =
                process.as_ref().and_then(|p| p.exited_at.as_ref()).and_then(timestamp);
            slot.state = SlotState::Terminated(Terminated {
                container_id: id.clone(),
                exit_code,
                reason: state::exit_reason(exit_code, false).to_owned(),
                started_at: Some(*started_at),
                finished_at: Some(finished_at.unwrap_or_else(Timestamp::now)),
                signal: None,
                message: None,
            });
            slot.retry_at = None;
        }
        let mut status = current.status(self.runtime.settings.host_ip);
        state::shut_down(&mut status);
        self.runtime.statuses.set(&current.uid, status);
    }

    /// Stops containers adopted from an earlier run that belong to no desired pod, and
    /// removes them and their pods' sandboxes.
    pub(super) async fn stop_stale(&mut self, inbox: &mut Inbox, stale: Vec<Listed>) {
        // The grace period the containers were started with (their pod is gone).
        let labelled = stale
            .iter()
            .filter_map(|c| c.label(LABEL_GRACE_PERIOD).and_then(|g| g.parse().ok()))
            .max();
        let grace = Duration::from_secs(labelled.unwrap_or(30));
        let running: HashSet<String> = stale
            .iter()
            .filter(|c| c.task_status() == Some(containerd_client::types::v1::Status::Running))
            .map(|c| c.id.clone())
            .collect();
        for id in &running {
            self.runtime.routes.add(id, &self.outbox);
        }
        self.stop_containers(inbox, running, grace).await;
        let uids: HashSet<String> =
            stale.iter().filter_map(|c| c.label(LABEL_POD_UID).map(str::to_owned)).collect();
        for c in &stale {
            self.remove_container(&c.id).await;
        }
        for uid in uids {
            sandbox::tear_down(&self.runtime, &uid).await;
            tracing::info!(pod.uid = uid, "removed a pod left by an earlier run");
        }
    }

    /// Stops the current pod gracefully and removes its containers and sandbox.
    pub(super) async fn stop_current(&mut self, inbox: &mut Inbox) {
        let Some(current) = self.current.take() else { return };
        let grace = lifecycle::grace_period(self.desired.as_ref().map_or(&current.pod, |(_, p)| p));
        let running: HashSet<String> =
            current.slots.iter().filter(|s| s.is_running()).filter_map(|s| s.id.clone()).collect();
        tracing::info!(pod.uid = current.uid, containers = running.len(), ?grace, "stopping pod");
        for slot in current.slots.iter().filter(|s| s.is_running()) {
            self.runtime.events.emit(
                &pod_ref(&current.pod, Some(&slot.name)),
                EventType::Normal,
                reason::KILLING,
                format!("Stopping container {}", slot.name),
            );
        }
        self.stop_containers(inbox, running, grace).await;
        for id in current.slots.iter().filter_map(|s| s.id.as_deref()) {
            self.remove_container(id).await;
        }
        sandbox::tear_down(&self.runtime, &current.uid).await;
        self.runtime.statuses.remove(&current.uid);
        self.runtime.ebpf.forget_pod(&current.uid);
        tracing::info!(pod.uid = current.uid, "pod stopped and removed");
    }

    /// SIGTERM, up to `grace` for the exits, then SIGKILL. Desired-pod updates that
    /// arrive meanwhile are kept for the next sync.
    async fn stop_containers(
        &mut self,
        inbox: &mut Inbox,
        mut running: HashSet<String>,
        grace: Duration,
    ) {
        let containerd = self.runtime.containerd.clone();
        for id in &running {
            if let Err(e) = container::kill(&containerd, id, libc::SIGTERM, false).await {
                tracing::warn!(container_id = id, error = %describe(&e), "cannot send SIGTERM");
            }
        }
        self.wait_for_exits(inbox, &mut running, Instant::now() + grace).await;
        if running.is_empty() {
            return;
        }
        tracing::info!(containers = running.len(), "grace period over; sending SIGKILL");
        for id in &running {
            if let Err(e) = container::kill(&containerd, id, libc::SIGKILL, true).await {
                tracing::warn!(container_id = id, error = %describe(&e), "cannot send SIGKILL");
            }
        }
        self.wait_for_exits(inbox, &mut running, Instant::now() + KILL_WAIT).await;
    }

    async fn wait_for_exits(
        &mut self,
        inbox: &mut Inbox,
        running: &mut HashSet<String>,
        until: Instant,
    ) {
        // A task that is already stopped sends no further event.
        let mut stopped = Vec::new();
        for id in running.iter() {
            match container::task(&self.runtime.containerd, id).await {
                Ok(Some(p)) if p.status() != containerd_client::types::v1::Status::Stopped => {}
                _ => stopped.push(id.clone()),
            }
        }
        for id in stopped {
            running.remove(&id);
        }
        while !running.is_empty() {
            let message = tokio::select! {
                m = inbox.recv() => m,
                () = tokio::time::sleep_until(until) => return,
            };
            match message {
                None => return,
                Some(Message::Desired(pod)) => self.desired = pod,
                Some(Message::Task(TaskEvent::Exit { container_id, .. })) => {
                    running.remove(&container_id);
                }
                Some(Message::Task(_)) => {}
                // Stopping waits for containerd's exits (the task must be stopped to be
                // removed); the kernel's go to the exec audit only.
                Some(Message::Kernel(observed)) => self.audit(&observed),
                Some(Message::Shutdown) => self.shutdown = true,
            }
        }
    }

    async fn remove_container(&self, id: &str) {
        self.runtime.routes.remove(id);
        if let Err(e) = container::remove(&self.runtime.containerd, id).await {
            tracing::warn!(container_id = id, error = %describe(&e), "cannot remove container");
        }
    }
}
