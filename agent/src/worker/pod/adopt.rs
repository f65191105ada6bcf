//! Adoption: what an earlier agent left running for a desired pod is taken over, not
//! restarted.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use outpost_core::backoff::Backoff;
use outpost_core::lifecycle::{CrashLoop, RestartPolicy};
use outpost_core::pod::{self, CONFIG_SEEN, Source};
use tokio::time::Instant;

use super::super::start::container_hash;
use super::super::state::{self, Slot, SlotState, Terminated};
use super::super::{Outbox, Runtime};
use super::Current;
use crate::error_chain::describe;
use crate::runtime::container::{
    self, LABEL_CONTAINER_NAME, LABEL_EXIT_CODE, LABEL_FINISHED_AT, LABEL_HASH, LABEL_REASON,
    LABEL_RESTART_COUNT, LABEL_STARTED_AT, Listed,
};
use crate::runtime::events::timestamp;

impl Current {
    /// The desired pod, with what an earlier run left of it adopted: per container, the
    /// newest of its containers (others removed); running ones are kept running.
    pub(super) async fn adopt(
        runtime: &Runtime,
        source: Source,
        pod: Arc<Pod>,
        mut found: Vec<Listed>,
        outbox: &Outbox,
    ) -> Current {
        let uid = pod::uid(&pod).to_owned();
        let crash_loop = CrashLoop::new(runtime.settings.crash_loop);
        let policy = RestartPolicy::of(&pod);
        let containers = pod.spec.iter().flat_map(|s| &s.containers);
        let mut slots: Vec<Slot> =
            containers.map(|c| Slot::new(&c.name, container_hash(c), crash_loop)).collect();
        found.sort_by_key(restart_count);
        let mut obsolete = Vec::new();
        for listed in found.into_iter().rev() {
            let name = listed.label(LABEL_CONTAINER_NAME).unwrap_or_default();
            match slots.iter_mut().find(|s| s.name == name && s.id.is_none()) {
                Some(slot) if listed.label(LABEL_HASH) == Some(slot.hash.as_str()) => {
                    adopt_container(runtime, policy, slot, &listed, outbox).await;
                }
                _ => obsolete.push(listed.id),
            }
        }
        for id in obsolete {
            if let Err(e) = container::remove(&runtime.containerd, &id).await {
                tracing::warn!(container_id = id, error = %describe(&e), "cannot remove an obsolete container");
            }
        }
        // Only a pod none of whose containers ran yet has a start latency to measure.
        let seen = slots
            .iter()
            .all(|s| !s.ran)
            .then(|| pod::annotation(&pod, CONFIG_SEEN)?.parse::<Timestamp>().ok())
            .flatten();
        Current {
            pod,
            source,
            uid,
            seen,
            started: Timestamp::now(),
            sandbox: None,
            problem: None,
            sandbox_retry: Instant::now(),
            sandbox_backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(60)),
            slots,
        }
    }
}

/// Takes over one container an earlier run left: kept if running, else treated as an exit
/// seen now.
async fn adopt_container(
    runtime: &Runtime,
    policy: RestartPolicy,
    slot: &mut Slot,
    listed: &Listed,
    outbox: &Outbox,
) {
    slot.id = Some(listed.id.clone());
    slot.restart_count = restart_count(listed);
    slot.ran = true;
    let started_at = listed
        .label(LABEL_STARTED_AT)
        .and_then(|t| t.parse().ok())
        .or_else(|| listed.created_at.as_ref().and_then(timestamp))
        .unwrap_or_else(Timestamp::now);
    match &listed.task {
        Some(task) if task.status() == containerd_client::types::v1::Status::Running => {
            runtime.routes.add(&listed.id, outbox);
            slot.state = SlotState::Running { started_at };
            slot.retry_at = None;
            tracing::info!(
                container = slot.name,
                container_id = listed.id,
                "adopted running container"
            );
        }
        task => {
            let exit_code = task
                .as_ref()
                .map(|t| i32::try_from(t.exit_status).unwrap_or(i32::MAX))
                .or_else(|| listed.label(LABEL_EXIT_CODE).and_then(|c| c.parse().ok()))
                .unwrap_or(-1);
            let finished_at = task
                .as_ref()
                .and_then(|t| t.exited_at.as_ref().and_then(timestamp))
                .or_else(|| listed.label(LABEL_FINISHED_AT).and_then(|t| t.parse().ok()));
            if task.is_some() {
                let _ = container::delete_task(&runtime.containerd, &listed.id).await;
            }
            let terminated = Terminated {
                container_id: listed.id.clone(),
                exit_code,
                reason: listed
                    .label(LABEL_REASON)
                    .unwrap_or(state::exit_reason(exit_code, false))
                    .to_owned(),
                started_at: Some(started_at),
                finished_at,
                signal: None,
                message: None,
            };
            tracing::info!(
                container = slot.name,
                container_id = listed.id,
                exit_code,
                "adopted exited container"
            );
            if policy.restarts(exit_code) {
                slot.last_termination = Some(terminated);
                slot.state =
                    SlotState::Waiting { reason: "ContainerCreating".to_owned(), message: None };
                slot.retry_at = Some(Instant::now());
            } else {
                slot.state = SlotState::Terminated(terminated);
                slot.retry_at = None;
            }
        }
    }
}

fn restart_count(listed: &Listed) -> u32 {
    listed.label(LABEL_RESTART_COUNT).and_then(|c| c.parse().ok()).unwrap_or(0)
}
