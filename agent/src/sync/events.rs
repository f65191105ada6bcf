//! The Events writer: takes what the [`Recorder`](crate::apiserver::Recorder) queued to
//! the API server while it is reachable (O3), paced by the shared
//! [`ApiClient`](crate::apiserver::ApiClient) bucket: a POST for a new Event, a PATCH of
//! `count` and `lastTimestamp` for a repeat, a POST again if the Event expired (404).
//! What an Event is and how it is recorded: [`crate::apiserver::events`].
//!
//! Events come last (B13): they never take a token while a pod status is due (they
//! wait for the status writer's pass, at most [`STATUSES_FIRST`]); after a reconnect,
//! what happened while away is written after the statuses, one Event per pod and
//! reason; and an Event the server refuses for load (429) is dropped, not retried,
//! after waiting out its `Retry-After`.

mod write;

use std::sync::Arc;
use std::time::Duration;

use outpost_core::backoff::Backoff;
use tokio::sync::watch;
use tracing::{debug, warn};

use super::Context;
use crate::apiserver::{Connectivity, StatusBacklog};

/// The longest an Event waits for the pod statuses due before it.
pub const STATUSES_FIRST: Duration = Duration::from_secs(30);

/// Writes the recorded events to the API server while it is reachable.
pub async fn run(context: Arc<Context>) {
    let recorder = &context.events;
    let connectivity = context.client.connectivity().clone();
    let mut statuses = context.status_backlog.subscribe();
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    let mut reported = recorder.stats().dropped;
    loop {
        if !connectivity.is_reachable() {
            connectivity.wait_reachable().await;
            // Once per offline period: how many Events did not fit in the backlog.
            let dropped = recorder.stats().dropped;
            if dropped > reported {
                warn!(
                    dropped = dropped - reported,
                    "events were dropped while the API server was unreachable (the newest were kept)"
                );
                reported = dropped;
            }
            after_statuses(&mut statuses, &connectivity).await;
            let collapsed = recorder.reconnected();
            if collapsed > 0 {
                debug!(
                    collapsed,
                    "of what happened while away, one event per pod and reason is written"
                );
            }
        }
        if statuses.borrow().due > 0 {
            after_statuses(&mut statuses, &connectivity).await;
        }
        let Some((key, series)) = recorder.next() else {
            recorder.queued().await;
            continue;
        };
        match write::write(&context, &key, &series).await {
            Ok(count) => {
                recorder.sent(&key, count);
                backoff.reset();
            }
            Err(e) if e.is_unreachable() => recorder.retry(&key),
            Err(e) if e.code() == Some(429) => {
                let delay = e.retry_delay(&mut backoff);
                debug!(object = key.object.name, reason = key.reason, retry_after = ?delay, "the API server refused an event for load; it is dropped");
                recorder.refused(&key);
                tokio::time::sleep(delay).await;
            }
            // The Event expired (events live an hour by default): the series starts over.
            Err(e) if e.is_not_found() && series.sent.is_some() => recorder.expired(&key),
            Err(e) if write::retriable(&e) => {
                let delay = e.retry_delay(&mut backoff);
                debug!(object = key.object.name, reason = key.reason, error = %e, retry_in = ?delay, "cannot write an event; retrying");
                recorder.retry(&key);
                tokio::time::sleep(delay).await;
            }
            Err(e) => {
                warn!(
                    object.kind = key.object.kind,
                    object.namespace = key.object.namespace,
                    object.name = key.object.name,
                    reason = key.reason,
                    error = %e,
                    "the API server refused an event; it is dropped (check the node's RBAC for events)"
                );
            }
        }
    }
}

/// Waits until no pod status is due (the status writer's pass is over), for at most
/// [`STATUSES_FIRST`], or until the server is unreachable again.
async fn after_statuses(
    statuses: &mut watch::Receiver<StatusBacklog>,
    connectivity: &Connectivity,
) {
    let drained = async {
        tokio::select! {
            // The sender lives in the context, as long as this task.
            _ = statuses.wait_for(|b| b.due == 0) => {}
            () = connectivity.wait_unreachable() => {}
        }
    };
    if tokio::time::timeout(STATUSES_FIRST, drained).await.is_err() {
        debug!(limit = ?STATUSES_FIRST, "pod statuses still due; events are written meanwhile");
    }
}

#[cfg(test)]
mod tests;
