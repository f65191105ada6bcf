//! The task that owns the merge core (kubelet's PodConfig): it takes every source's
//! events, merges the updates, hands the deltas on in order, and publishes a lock-free
//! snapshot of the desired pods and of each source's health for readers (the local
//! API, metrics).

pub mod dry_run;
pub mod metrics;

use std::sync::Arc;

use arc_swap::ArcSwap;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use outpost_core::merge::{Conflict, Op, PodDelta, PodStore};
use outpost_core::pod::{FullName, Source};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use self::metrics::Merge;
use crate::error_chain::describe;
use crate::source::problems::ManifestProblem;
use crate::source::{EventStream, Freshness, SourceEvent};

/// Whether a source's pods are known, and from where (`/readyz` shows it per source).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SourceState {
    /// No SET yet: neither from the source nor from its checkpoint (M9 waits).
    NeverSeen,
    /// The pods come from the checkpoint; the source has not answered since start (O2).
    Checkpoint,
    /// The source delivered (or confirmed) its pods since start.
    Live,
}

/// One configured source's health.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceHealth {
    pub source: Source,
    pub state: SourceState,
    /// The latest failure, until the source next delivers or confirms its pods.
    pub last_error: Option<String>,
    pub errors_total: u64,
    /// When the source last delivered or confirmed its pods.
    pub last_success: Option<Timestamp>,
    /// The manifests the source rejects or warns about now (not failures: the source's
    /// other pods run).
    pub problems: Vec<ManifestProblem>,
}

impl SourceHealth {
    /// A source not seen yet.
    pub fn new(source: Source) -> SourceHealth {
        SourceHealth {
            source,
            state: SourceState::NeverSeen,
            last_error: None,
            errors_total: 0,
            last_success: None,
            problems: Vec::new(),
        }
    }

    fn seen(&self) -> bool {
        self.state != SourceState::NeverSeen
    }

    /// Records an event; returns the update to merge, if any.
    fn record(
        &mut self,
        event: SourceEvent,
        now: Timestamp,
    ) -> Option<outpost_core::merge::SourceUpdate> {
        match event {
            SourceEvent::Update(update, Freshness::Checkpoint) => {
                if update.op == Op::Set && self.state == SourceState::NeverSeen {
                    self.state = SourceState::Checkpoint;
                }
                Some(update)
            }
            SourceEvent::Update(update, Freshness::Live) => {
                if update.op == Op::Set || self.state == SourceState::Live {
                    self.succeeded(now);
                }
                Some(update)
            }
            SourceEvent::Confirmed => {
                if self.seen() {
                    self.succeeded(now);
                }
                None
            }
            SourceEvent::Failed(error) => {
                self.errors_total += 1;
                let message = describe(&*error);
                // Once per distinct failure: an unreachable source retries for hours.
                if self.last_error.as_deref() != Some(message.as_str()) {
                    warn!(source = %self.source, error = %message, "pod source failed; its pods stay as they are");
                } else {
                    debug!(source = %self.source, error = %message, "pod source still failing");
                }
                self.last_error = Some(message);
                None
            }
            SourceEvent::Problems(problems) => {
                self.problems = problems;
                None
            }
        }
    }

    fn succeeded(&mut self, now: Timestamp) {
        if self.last_error.take().is_some() {
            info!(source = %self.source, "pod source recovered");
        }
        self.state = SourceState::Live;
        self.last_success = Some(now);
    }
}

/// What readers see: the desired pods and the merge's bookkeeping, at one instant.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Desired pods with their source, sorted by namespace/name.
    pub pods: Vec<(Source, Arc<Pod>)>,
    pub conflicts: Vec<Conflict>,
    /// Per configured source, in the order they were configured.
    pub sources: Vec<SourceHealth>,
}

impl Snapshot {
    /// All sources seen (M9).
    pub fn synced(&self) -> bool {
        self.sources.iter().all(SourceHealth::seen)
    }

    fn of(store: &PodStore, health: &[SourceHealth]) -> Snapshot {
        let mut pods: Vec<(&FullName, Source, Arc<Pod>)> =
            store.pods().map(|(s, n, p)| (&**n, s, p.clone())).collect();
        pods.sort_unstable_by(|a, b| a.0.cmp(b.0));
        Snapshot {
            pods: pods.into_iter().map(|(_, s, p)| (s, p)).collect(),
            conflicts: store.conflicts(),
            sources: health.to_vec(),
        }
    }
}

/// A cheap, lock-free handle on the latest [`Snapshot`], and its change feed: a task
/// that must act when the desired pods change waits on [`SnapshotHandle::subscribe`]
/// instead of polling.
#[derive(Debug, Clone, Default)]
pub struct SnapshotHandle {
    current: Arc<ArcSwap<Snapshot>>,
    /// How many snapshots were published (the feed's value).
    published: Arc<watch::Sender<u64>>,
}

impl SnapshotHandle {
    /// The latest snapshot (lock-free).
    pub fn load(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// Makes `snapshot` the latest, and tells the subscribers.
    pub fn publish(&self, snapshot: Snapshot) {
        self.current.store(Arc::new(snapshot));
        self.published.send_modify(|count| *count = count.wrapping_add(1));
    }

    /// Changes with every snapshot published from now on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.published.subscribe()
    }
}

impl From<Snapshot> for SnapshotHandle {
    fn from(snapshot: Snapshot) -> SnapshotHandle {
        let current = Arc::new(ArcSwap::from_pointee(snapshot));
        SnapshotHandle { current, published: Arc::default() }
    }
}

/// What the merge hands the pod workers: deltas in order, and whether every source has
/// been seen by then (M9: only then may what no source wants be removed).
#[derive(Debug)]
pub struct Batch {
    pub deltas: Vec<PodDelta>,
    pub synced: bool,
}

/// Runs the merge until every source stream ends (or the delta receiver is dropped).
/// A batch goes out for every update with deltas, and once when all sources are seen.
/// Each delta is counted in `metrics` as it goes out.
pub async fn run(
    sources: Vec<(Source, EventStream)>,
    deltas: mpsc::Sender<Batch>,
    snapshot: SnapshotHandle,
    metrics: Merge,
) {
    let mut store = PodStore::new(sources.iter().map(|(s, _)| *s));
    let mut health: Vec<SourceHealth> =
        sources.iter().map(|(s, _)| SourceHealth::new(*s)).collect();
    snapshot.publish(Snapshot::of(&store, &health));
    let mut merged = futures::stream::select_all(
        sources.into_iter().enumerate().map(|(i, (_, stream))| stream.map(move |event| (i, event))),
    );
    let mut was_synced = false;
    while let Some((i, event)) = merged.next().await {
        // Clock: the local wall clock: the merge stamps what it records (`config.seen`) with it.
        let now = Timestamp::now();
        let Some(update) = health[i].record(event, now) else {
            snapshot.publish(Snapshot::of(&store, &health));
            continue;
        };
        let source = update.source;
        let result = store.apply(update, now);
        for dup in &result.duplicates {
            warn!(
                %source, pod.namespace = %dup.full_name.namespace, pod.name = %dup.full_name.name, pod.uid = %dup.uid, winner = %dup.winner_uid,
                "two pods with one name in a single update; the later one is ignored (M2)"
            );
        }
        // Published before the deltas go out, so whoever has seen a delta finds it in
        // the snapshot too. Rebuilt on every update: conflicts and source readiness can
        // change without any delta.
        snapshot.publish(Snapshot::of(&store, &health));
        let newly_synced = store.synced() && !was_synced;
        if newly_synced {
            was_synced = true;
            info!(pods = store.len(), "all pod sources seen");
        }
        for delta in &result.deltas {
            metrics.pod_delta(delta.op, delta.source);
        }
        if (newly_synced || !result.deltas.is_empty())
            && deltas.send(Batch { deltas: result.deltas, synced: was_synced }).await.is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(freshness: Freshness) -> SourceEvent {
        SourceEvent::Update(
            outpost_core::merge::SourceUpdate { source: Source::Api, op: Op::Set, pods: vec![] },
            freshness,
        )
    }

    fn failed(message: &str) -> SourceEvent {
        SourceEvent::Failed(message.into())
    }

    #[test]
    fn source_health_follows_its_events() {
        let now = Timestamp::UNIX_EPOCH;
        let mut h = SourceHealth::new(Source::Api);
        assert!(h.record(SourceEvent::Confirmed, now).is_none());
        assert_eq!(h.state, SourceState::NeverSeen, "a confirmation of nothing is not a SET (M9)");
        h.record(failed("down"), now);
        assert_eq!(
            (h.state, h.errors_total, h.last_error.as_deref()),
            (SourceState::NeverSeen, 1, Some("down"))
        );

        assert!(h.record(set(Freshness::Checkpoint), now).is_some());
        assert_eq!(h.state, SourceState::Checkpoint, "O2: seen, from the checkpoint");
        assert_eq!(h.last_error.as_deref(), Some("down"), "still unreachable");
        assert!(h.last_success.is_none());

        h.record(SourceEvent::Confirmed, now);
        assert_eq!((h.state, h.last_error.as_deref()), (SourceState::Live, None));
        assert_eq!(h.last_success, Some(now));

        h.record(failed("cut"), now);
        h.record(failed("cut"), now);
        assert_eq!(
            (h.state, h.errors_total),
            (SourceState::Live, 3),
            "live pods stay live when the source fails"
        );
        h.record(set(Freshness::Live), now);
        assert_eq!((h.state, h.last_error.as_deref()), (SourceState::Live, None));
    }

    #[test]
    fn manifest_problems_replace_the_last_list_and_fail_nothing() {
        let now = Timestamp::UNIX_EPOCH;
        let mut h = SourceHealth::new(Source::File);
        h.record(set(Freshness::Live), now);
        let bad = ManifestProblem::rejected("/m/bad.yaml", &["/m/bad.yaml: x".to_owned()]);
        assert!(h.record(SourceEvent::Problems(bad.into_iter().collect()), now).is_none());
        assert_eq!(
            (h.state, h.last_error.as_deref(), h.problems.len()),
            (SourceState::Live, None, 1)
        );
        assert_eq!(h.errors_total, 0, "a rejected manifest is not a failing source");
        h.record(SourceEvent::Problems(Vec::new()), now);
        assert!(h.problems.is_empty(), "fixed");
    }

    #[test]
    fn an_upsert_before_any_set_does_not_make_a_source_live() {
        let mut h = SourceHealth::new(Source::Api);
        let upsert =
            outpost_core::merge::SourceUpdate { source: Source::Api, op: Op::Update, pods: vec![] };
        h.record(SourceEvent::Update(upsert, Freshness::Live), Timestamp::UNIX_EPOCH);
        assert_eq!(h.state, SourceState::NeverSeen);
    }
}
