//! The Events writer: takes what the [`Recorder`](crate::apiserver::Recorder) queued to
//! the API server while it is reachable (O3), paced by the shared
//! [`ApiClient`](crate::apiserver::ApiClient) bucket: a POST for a new Event, a PATCH of
//! `count` and `lastTimestamp` for a repeat, a POST again if the Event expired (404).
//! What an Event is and how it is recorded: [`crate::apiserver::events`].
//!
//! Events come last (B13): they never take a token while a pod status is due (they
//! wait for the status writer's pass, at most [`STATUSES_FIRST`]); after a reconnect,
//! what happened while away is written after the statuses, one Event per pod and
//! reason, and after a long outage spread over the same window as the statuses
//! ([`outpost_core::pace::spread_window`]); and an Event the server refuses for load
//! (429) is dropped, not retried, after waiting out its `Retry-After` (the first one
//! after a reconnect drops the `Normal` Events of what happened while away with it).

mod write;

use std::sync::Arc;
use std::time::Duration;

use outpost_core::backoff::Backoff;
use tokio::sync::watch;
use tracing::{debug, warn};

use super::Context;
use crate::apiserver::{Connectivity, Reconnects, StatusBacklog};

/// The longest an Event waits for the pod statuses due before it.
pub const STATUSES_FIRST: Duration = Duration::from_secs(30);

/// Writes the recorded events to the API server while it is reachable.
pub async fn run(context: Arc<Context>) {
    let recorder = &context.events;
    let connectivity = context.client.connectivity().clone();
    let mut statuses = context.status_backlog.subscribe();
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    let mut reported = recorder.stats().dropped;
    let mut reconnects = Reconnects::default();
    // After a long outage: the pause between Events, and how many are still spread.
    let mut spread = (Duration::ZERO, 0usize);
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
        }
        if let Some(window) = reconnects.next_window(&context.client) {
            // The statuses first: the ones due, or after a long outage all of them
            // (they are spread over the window).
            let spreading = !window.is_zero();
            let limit = window + STATUSES_FIRST;
            after_statuses(&mut statuses, &connectivity, limit, |b| match spreading {
                true => b.queued == 0,
                false => b.due == 0,
            })
            .await;
            let collapsed = recorder.reconnected();
            if collapsed > 0 {
                debug!(
                    collapsed,
                    "of what happened while away, one event per pod and reason is written"
                );
            }
            let waiting = recorder.backlog_len();
            spread = match spreading && waiting > 0 {
                true => (window / u32::try_from(waiting).unwrap_or(u32::MAX), waiting),
                false => (Duration::ZERO, 0),
            };
        }
        if statuses.borrow().due > 0 {
            after_statuses(&mut statuses, &connectivity, STATUSES_FIRST, |b| b.due == 0).await;
        }
        if spread.1 > 0 {
            spread.1 -= 1;
            tokio::time::sleep(spread.0.mul_f64(2.0 * fastrand::f64())).await;
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
                let shed = recorder.refused(&key);
                if shed > 0 {
                    debug!(
                        shed,
                        "the Normal events of what happened while away are dropped: the server is loaded"
                    );
                    spread.1 = spread.1.min(recorder.backlog_len());
                }
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

/// Waits until the pod status writer's backlog is `done` (no status due, or none
/// queued), for at most `limit`, or until the server is unreachable again.
async fn after_statuses(
    statuses: &mut watch::Receiver<StatusBacklog>,
    connectivity: &Connectivity,
    limit: Duration,
    done: impl Fn(&StatusBacklog) -> bool,
) {
    let drained = async {
        tokio::select! {
            // The sender lives in the context, as long as this task.
            _ = statuses.wait_for(done) => {}
            () = connectivity.wait_unreachable() => {}
        }
    };
    if tokio::time::timeout(limit, drained).await.is_err() {
        debug!(?limit, "pod statuses still waiting; events are written meanwhile");
    }
}

#[cfg(test)]
mod tests;
