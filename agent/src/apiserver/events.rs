//! Kubernetes Events: what happened to a pod (pulled, created, started, killed, backing
//! off, failing) or to the node (a rejected manifest), where `kubectl describe` and
//! `kubectl get events` show it.
//!
//! This is the emit side, which sources, workers and the runtime use. [`Recorder::emit`]
//! never blocks and never waits for the network: it runs client-go's correlator
//! ([`outpost_core::event_aggregate`]: per-object spam filter, identical events folded
//! into one Event with a `count`) and queues the Event in a bounded backlog. The writer
//! (`crate::sync::events`) takes the backlog to the API server while it is reachable
//! (O3). While the server is unreachable the newest [`Limits::backlog`] Events wait;
//! older ones are dropped, counted ([`Recorder::stats`]) and reported once when the
//! server is back. Without a kubeconfig there is no writer: events are logged at debug
//! and the newest are kept in memory ([`Recorder::recent`]).
//!
//! Choices: `source.component` is `kubelet` (as kubelet's own events), so that
//! `kubectl describe` shows "From kubelet" and tooling that selects kubelet's events
//! (`--field-selector source=kubelet`) keeps working; `reportingComponent` is `outpost`
//! so that they can still be told apart, `reportingInstance` and `source.host` are the
//! node name. A container OOM-killed is a Warning `OOMKilled` on the container; kubelet's
//! node-wide `SystemOOM` (from the kernel log) is not recorded: the agent only learns of
//! OOM kills in its own pods' cgroups.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use outpost_core::event_aggregate::{Correlator, EventKey, Limits, ObjectKey, Observed, Series};
use tokio::sync::Notify;
use tracing::debug;

pub use outpost_core::event_aggregate::{EventType, Stats};

use super::lock;

/// `source.component` of every Event (see the module's doc).
pub const SOURCE_COMPONENT: &str = "kubelet";
/// `reportingComponent` of every Event.
pub const REPORTING_COMPONENT: &str = "outpost";

/// kubelet's event reasons, one list for the whole agent.
pub use outpost_core::event_aggregate::reason;
/// The reason of the node's Warning about a static pod manifest whose pods run, but
/// with fields not honoured as written (an unknown field, an admission warning). kubelet
/// has none: it drops such fields silently.
pub const MANIFEST_WARNING: &str = "ManifestWarning";

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
        // Clock: `now` (monotonic) aggregates and spaces the Events; `at` (the local wall clock) is
        // the time they record, as kubelet writes it.
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

    // The writer's side (`crate::sync::events`).

    /// Series waiting to be written.
    pub(crate) fn backlog_len(&self) -> usize {
        lock(&self.0.state).correlator.backlog_len()
    }

    /// The next Event to write, if any is queued.
    pub(crate) fn next(&self) -> Option<(EventKey, Series)> {
        lock(&self.0.state).correlator.take_next()
    }

    /// Resolves once something is queued (at once if it was queued since the last wait).
    pub(crate) async fn queued(&self) {
        self.0.queued.notified().await;
    }

    /// The server now has `count` of this Event.
    pub(crate) fn sent(&self, key: &EventKey, count: u32) {
        lock(&self.0.state).correlator.sent(key, count);
    }

    /// Writing failed: the Event waits to be written again.
    pub(crate) fn retry(&self, key: &EventKey) {
        lock(&self.0.state).correlator.retry(key);
    }

    /// The server is reachable again after an outage: one Event per object, type and
    /// reason of what happened while away; returns how many were left unwritten.
    pub(crate) fn reconnected(&self) -> u64 {
        lock(&self.0.state).correlator.reconnected()
    }

    /// The server refused the Event for load (429): it is dropped (the first refusal
    /// after a reconnect drops the `Normal` Events of what happened while away too; how
    /// many is returned).
    pub(crate) fn refused(&self, key: &EventKey) -> u64 {
        lock(&self.0.state).correlator.refused(key)
    }

    /// The server no longer has the Event: its series starts over.
    pub(crate) fn expired(&self, key: &EventKey) {
        lock(&self.0.state).correlator.expired(key);
    }
}

/// The reference to a pod (or, with `container`, to one of its containers, as kubelet's
/// `spec.containers{name}` or `spec.initContainers{name}` field path) that its events
/// are about.
pub fn pod_ref(pod: &Pod, container: Option<&str>) -> ObjectReference {
    let init = |name: &str| {
        let inits = pod.spec.iter().flat_map(|s| s.init_containers.iter().flatten());
        inits.into_iter().any(|c| c.name == name)
    };
    let field_path = container.map(|c| {
        let list = if init(c) { "initContainers" } else { "containers" };
        format!("spec.{list}{{{c}}}")
    });
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        field_path,
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

/// Events about cluster-scoped objects (the node) go to `default`, as kubelet's do.
pub fn namespace(key: &EventKey) -> &str {
    match key.object.namespace.as_str() {
        "" => "default",
        namespace => namespace,
    }
}

/// A series' `count` as the Event carries it.
pub fn count(series: &Series) -> i32 {
    i32::try_from(series.count).unwrap_or(i32::MAX)
}

/// The core/v1 Event of a series.
pub fn event(key: &EventKey, series: &Series, node_name: &str) -> Event {
    let object = &key.object;
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Event {
        metadata: ObjectMeta {
            name: Some(series.name.clone()),
            namespace: Some(namespace(key).to_owned()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: some(&object.kind),
            namespace: some(&object.namespace),
            name: some(&object.name),
            uid: some(&object.uid),
            field_path: some(&key.field_path),
            ..ObjectReference::default()
        },
        type_: Some(key.kind.as_str().to_owned()),
        reason: Some(key.reason.clone()),
        message: Some(key.message.clone()),
        count: Some(count(series)),
        first_timestamp: Some(Time(series.first)),
        last_timestamp: Some(Time(series.last)),
        source: Some(EventSource {
            component: Some(SOURCE_COMPONENT.to_owned()),
            host: Some(node_name.to_owned()),
        }),
        reporting_component: Some(REPORTING_COMPONENT.to_owned()),
        reporting_instance: Some(node_name.to_owned()),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests;
