//! The garbage collector's figures (G1): `outpost_image_gc_freed_bytes_total`,
//! `outpost_image_gc_removed_total{reason}` (kubelet's reasons: `age`, `space`) and
//! `outpost_container_gc_removed_total` (dead containers removed with their logs).

use std::sync::Arc;

use outpost_core::gc::images::Reason;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

type ReasonLabel = [(&'static str, &'static str); 1];

/// Counts what the garbage collector removes; clones share the counters.
#[derive(Debug, Clone, Default)]
pub struct GarbageCollection(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    freed_bytes: Counter,
    images_removed: Family<ReasonLabel, Counter>,
    containers_removed: Counter,
}

impl GarbageCollection {
    pub fn register(outpost: &mut Registry) -> GarbageCollection {
        let metrics = GarbageCollection::default();
        let images = outpost.sub_registry_with_prefix("image_gc");
        images.register(
            "freed_bytes",
            "Bytes of image content freed by image garbage collection",
            metrics.0.freed_bytes.clone(),
        );
        images.register(
            "removed",
            "Images removed by garbage collection, by reason (age: unused longer than \
             imageMaximumGCAge; space: the image filesystem over imageGCHighThresholdPercent)",
            metrics.0.images_removed.clone(),
        );
        outpost.sub_registry_with_prefix("container_gc").register(
            "removed",
            "Dead containers removed (with their logs) by garbage collection",
            metrics.0.containers_removed.clone(),
        );
        metrics
    }

    /// An image of `size` bytes was removed.
    pub fn image_removed(&self, reason: Reason, size: u64) {
        let reason = match reason {
            Reason::Age => "age",
            Reason::Space => "space",
        };
        self.0.images_removed.get_or_create(&[("reason", reason)]).inc();
        self.0.freed_bytes.inc_by(size);
    }

    pub fn container_removed(&self) {
        self.0.containers_removed.inc();
    }

    /// The count of dead containers removed (tests).
    pub fn containers_removed(&self) -> u64 {
        self.0.containers_removed.get()
    }
}
