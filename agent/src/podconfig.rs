//! The task that owns the merge core (kubelet's PodConfig): it takes every source's
//! updates, merges them, hands the deltas on in order, and publishes a lock-free
//! snapshot of the desired pods for readers (the local API, metrics).

use std::sync::Arc;

use arc_swap::ArcSwap;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use outpost_core::merge::{Conflict, PodDelta, PodStore, SourceUpdate};
use outpost_core::pod::{FullName, Source};
use tokio::sync::mpsc;
use tracing::{info, warn};

/// What readers see: the desired pods and the merge's bookkeeping, at one instant.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Desired pods with their source, sorted by namespace/name.
    pub pods: Vec<(Source, Arc<Pod>)>,
    pub conflicts: Vec<Conflict>,
    /// Per configured source: whether it has delivered a SET yet (M9).
    pub sources: Vec<(Source, bool)>,
}

impl Snapshot {
    /// All sources seen (M9).
    pub fn synced(&self) -> bool {
        self.sources.iter().all(|(_, seen)| *seen)
    }

    fn of(store: &PodStore) -> Snapshot {
        let mut pods: Vec<(&FullName, Source, Arc<Pod>)> =
            store.pods().map(|(s, n, p)| (&**n, s, p.clone())).collect();
        pods.sort_unstable_by(|a, b| a.0.cmp(b.0));
        Snapshot {
            pods: pods.into_iter().map(|(_, s, p)| (s, p)).collect(),
            conflicts: store.conflicts(),
            sources: store.sources().map(|s| (s, store.source_seen(s))).collect(),
        }
    }
}

/// A cheap, lock-free handle on the latest [`Snapshot`].
pub type SnapshotHandle = Arc<ArcSwap<Snapshot>>;

/// Runs the merge until every source stream ends (or the delta receiver is dropped).
/// Each source stream yields updates; an `Err` item is logged and the source goes on.
pub async fn run<S, E>(
    sources: Vec<(Source, S)>,
    deltas: mpsc::Sender<Vec<PodDelta>>,
    snapshot: SnapshotHandle,
) where
    S: Stream<Item = Result<SourceUpdate, E>> + Unpin + Send,
    E: std::fmt::Display,
{
    let mut store = PodStore::new(sources.iter().map(|(s, _)| *s));
    snapshot.store(Arc::new(Snapshot::of(&store)));
    let mut merged = futures::stream::select_all(
        sources.into_iter().map(|(source, stream)| stream.map(move |item| (source, item))),
    );
    let mut was_synced = false;
    while let Some((source, item)) = merged.next().await {
        let update = match item {
            Ok(update) => update,
            Err(e) => {
                warn!(%source, error = %e, "pod source failed");
                continue;
            }
        };
        let result = store.apply(update, Timestamp::now());
        for dup in &result.duplicates {
            warn!(
                %source, pod = %dup.full_name, uid = %dup.uid, winner = %dup.winner_uid,
                "two pods with one name in a single update; the later one is ignored (M2)"
            );
        }
        // Published before the deltas go out, so whoever has seen a delta finds it in
        // the snapshot too. Rebuilt on every update: conflicts and source readiness can
        // change without any delta.
        snapshot.store(Arc::new(Snapshot::of(&store)));
        if store.synced() && !was_synced {
            was_synced = true;
            info!(pods = store.len(), "all pod sources seen");
        }
        if !result.deltas.is_empty() && deltas.send(result.deltas).await.is_err() {
            return;
        }
    }
}
