//! Kubernetes Events: what happened to a pod (pulled, created, started, killed, backing
//! off, failing) or to the node (a rejected manifest), where `kubectl describe` and
//! `kubectl get events` show it.
//!
//! [`Recorder::emit`] never blocks and never waits for the network: it runs client-go's
//! correlator ([`outpost_core::event_aggregate`]: per-object spam filter, identical
//! events folded into one Event with a `count`) and queues the Event in a bounded
//! backlog. [`run`] writes the backlog to the API server while it is reachable (O3),
//! paced by the shared [`ApiClient`] bucket: a POST for a new Event, a PATCH of `count`
//! and `lastTimestamp` for a repeat, a POST again if the Event expired (404). While the
//! server is unreachable the newest [`Limits::backlog`] Events wait; older ones are
//! dropped, counted ([`Recorder::stats`]) and reported once when the server is back.
//! Without a kubeconfig there is no writer: events are logged at debug and the newest
//! are kept in memory ([`Recorder::recent`]).
//!
//! Choices: `source.component` is `kubelet` (as kubelet's own events), so that
//! `kubectl describe` shows "From kubelet" and tooling that selects kubelet's events
//! (`--field-selector source=kubelet`) keeps working; `reportingComponent` is `outpost`
//! so that they can still be told apart, `reportingInstance` and `source.host` are the
//! node name. A container OOM-killed is a Warning `OOMKilled` on the container; kubelet's
//! node-wide `SystemOOM` (from the kernel log) is not recorded: the agent only learns of
//! OOM kills in its own pods' cgroups.

mod write;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use outpost_core::backoff::Backoff;
use outpost_core::event_aggregate::{Correlator, EventKey, Limits, ObjectKey, Observed, Series};
use tokio::sync::Notify;
use tracing::{debug, warn};

pub use self::write::event;
pub use outpost_core::event_aggregate::{EventType, Stats};

use super::{Context, lock};

/// `source.component` of every Event (see the module's doc).
pub const SOURCE_COMPONENT: &str = "kubelet";
/// `reportingComponent` of every Event.
pub const REPORTING_COMPONENT: &str = "outpost";

/// kubelet's event reasons (`pkg/kubelet/events`).
pub mod reason {
    pub const PULLING: &str = "Pulling";
    pub const PULLED: &str = "Pulled";
    pub const CREATED: &str = "Created";
    pub const STARTED: &str = "Started";
    pub const FAILED: &str = "Failed";
    pub const KILLING: &str = "Killing";
    pub const BACK_OFF: &str = "BackOff";
    pub const OOM_KILLED: &str = "OOMKilled";
    pub const INSPECT_FAILED: &str = "InspectFailed";
    pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
    pub const FAILED_CREATE_POD_SANDBOX: &str = "FailedCreatePodSandBox";
    pub const FAILED_VALIDATION: &str = "FailedValidation";
}

/// Where events are recorded: cheap to clone, never blocks, works with no API server
/// configured (events are then only kept locally).
#[derive(Debug, Clone)]
pub struct Recorder(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the writer when something is queued.
    queued: Notify,
    /// The spam filter's monotonic clock.
    origin: Instant,
}

#[derive(Debug)]
struct State {
    correlator: Correlator,
    /// The last nanosecond value used in an Event name (names stay unique).
    last_name_nanos: i128,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder::new(Limits::default())
    }
}

impl Recorder {
    pub fn new(limits: Limits) -> Recorder {
        Recorder(Arc::new(Shared {
            state: Mutex::new(State { correlator: Correlator::new(limits), last_name_nanos: 0 }),
            queued: Notify::new(),
            origin: Instant::now(),
        }))
    }

    /// Records an event about `object`.
    pub fn emit(
        &self,
        object: &ObjectReference,
        kind: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let key = EventKey::new(
            ObjectKey {
                kind: object.kind.clone().unwrap_or_default(),
                namespace: object.namespace.clone().unwrap_or_default(),
                name: object.name.clone().unwrap_or_default(),
                uid: object.uid.clone().unwrap_or_default(),
            },
            object.field_path.clone().unwrap_or_default(),
            kind,
            reason,
            message.into(),
        );
        debug!(
            object.kind = key.object.kind,
            object.namespace = key.object.namespace,
            object.name = key.object.name,
            field_path = key.field_path,
            r#type = kind.as_str(),
            reason,
            message = key.message,
            "event"
        );
        let now = self.0.origin.elapsed();
        let at = Timestamp::now();
        let observed = {
            let mut state = lock(&self.0.state);
            let State { correlator, last_name_nanos } = &mut *state;
            let object_name = key.object.name.clone();
            correlator.observe(key, now, at, || {
                // client-go names an Event `<object>.<nanoseconds in hex>`.
                let nanos = at.as_nanosecond().max(*last_name_nanos + 1);
                *last_name_nanos = nanos;
                format!("{object_name}.{nanos:016x}")
            })
        };
        match observed {
            Observed::RateLimited => {
                debug!(reason, "event dropped: too many events about this object")
            }
            Observed::New | Observed::Repeat => self.0.queued.notify_one(),
        }
    }

    /// Counters since start (for metrics): emitted, rate limited, aggregated, dropped.
    pub fn stats(&self) -> Stats {
        lock(&self.0.state).correlator.stats()
    }

    /// Up to `limit` Events, most recently seen first, as they would be written.
    pub fn recent(&self, limit: usize) -> Vec<(EventKey, Series)> {
        lock(&self.0.state).correlator.recent(limit)
    }

    fn next(&self) -> Option<(EventKey, Series)> {
        lock(&self.0.state).correlator.take_next()
    }

    fn sent(&self, key: &EventKey, count: u32) {
        lock(&self.0.state).correlator.sent(key, count);
    }

    fn retry(&self, key: &EventKey) {
        lock(&self.0.state).correlator.retry(key);
    }

    fn expired(&self, key: &EventKey) {
        lock(&self.0.state).correlator.expired(key);
    }
}

/// The reference to a pod (or, with `container`, to one of its containers, as kubelet's
/// `spec.containers{name}` field path) that its events are about.
pub fn pod_ref(pod: &Pod, container: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        field_path: container.map(|c| format!("spec.containers{{{c}}}")),
        ..ObjectReference::default()
    }
}

/// The reference to this node that its events are about: as kubelet's, kind `Node`,
/// name and uid both the node name (the Node's real UID may not be known yet).
pub fn node_ref(node_name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".to_owned()),
        name: Some(node_name.to_owned()),
        uid: Some(node_name.to_owned()),
        ..ObjectReference::default()
    }
}

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
            recorder.0.queued.notified().await;
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
