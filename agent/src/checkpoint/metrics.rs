//! The checkpoints' figures: `outpost_checkpoint_writes_total{source}` and
//! `outpost_checkpoint_write_failures_total{source}`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// One label, `source`.
type SourceLabel = [(&'static str, &'static str); 1];

/// The checkpoints': `outpost_checkpoint_writes_total{source}` and
/// `outpost_checkpoint_write_failures_total{source}`.
#[derive(Debug, Clone, Default)]
pub struct CheckpointWrites {
    writes: Family<SourceLabel, Counter>,
    failures: Family<SourceLabel, Counter>,
}

impl CheckpointWrites {
    pub fn register(outpost: &mut Registry) -> CheckpointWrites {
        let metrics = CheckpointWrites::default();
        let registry = outpost.sub_registry_with_prefix("checkpoint");
        registry.register(
            "writes",
            "Checkpoint writes attempted, by source",
            metrics.writes.clone(),
        );
        registry.register(
            "write_failures",
            "Checkpoint writes that failed, by source",
            metrics.failures.clone(),
        );
        metrics
    }

    /// A checkpoint write ended; `checkpoint` is its name (the source's: `url`, `push`,
    /// `api`).
    pub fn checkpoint_written(&self, checkpoint: &'static str, ok: bool) {
        let label = [("source", checkpoint)];
        self.writes.get_or_create(&label).inc();
        if !ok {
            self.failures.get_or_create(&label).inc();
        }
    }
}
