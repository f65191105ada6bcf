//! The merge's figure: `outpost_pod_deltas_total{op,source}`.

use outpost_core::merge::DeltaOp;
use outpost_core::pod::Source;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Two labels, `op` and `source`.
type DeltaLabels = [(&'static str, &'static str); 2];

/// The merge's: `outpost_pod_deltas_total{op,source}`.
#[derive(Debug, Clone, Default)]
pub struct Merge {
    pod_deltas: Family<DeltaLabels, Counter>,
}

impl Merge {
    pub fn register(outpost: &mut Registry) -> Merge {
        let merge = Merge::default();
        outpost.sub_registry_with_prefix("pod").register(
            "deltas",
            "Pod changes the merge handed to the pod workers, by operation and source",
            merge.pod_deltas.clone(),
        );
        merge
    }

    /// The merge handed a delta to the pod workers.
    pub fn pod_delta(&self, op: DeltaOp, source: Source) {
        let op = match op {
            DeltaOp::Remove => "remove",
            DeltaOp::Add => "add",
            DeltaOp::Update => "update",
            DeltaOp::Delete => "delete",
            DeltaOp::Reconcile => "reconcile",
        };
        self.pod_deltas.get_or_create(&[("op", op), ("source", source.as_str())]).inc();
    }
}
