//! The Events writer: takes what the [`Recorder`](crate::apiserver::Recorder) queued to
//! the API server while it is reachable (O3), paced by the shared
//! [`ApiClient`](crate::apiserver::ApiClient) bucket: a POST for a new Event, a PATCH of
//! `count` and `lastTimestamp` for a repeat, a POST again if the Event expired (404).
//! What an Event is and how it is recorded: [`crate::apiserver::events`].

mod write;

use std::sync::Arc;
use std::time::Duration;

use outpost_core::backoff::Backoff;
use tracing::{debug, warn};

use super::Context;

/// Writes the recorded events to the API server while it is reachable.
pub async fn run(context: Arc<Context>) {
    let recorder = &context.events;
    let connectivity = context.client.connectivity().clone();
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

#[cfg(test)]
mod tests;
