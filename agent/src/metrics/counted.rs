//! The figures counted where things happen: atomic counters and histograms that the
//! sources, the merge task, the checkpoints and the pod workers update through a cheap
//! [`Metrics`] handle. Label values are `&'static str`, so an increment never allocates
//! (a label set's first use creates its entry in the family, once).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use outpost_core::merge::DeltaOp;
use outpost_core::pod::Source;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::source::file::watch::Backend;

/// One label, `source`.
type SourceLabel = [(&'static str, &'static str); 1];
/// Two labels, `op` and `source`.
type DeltaLabels = [(&'static str, &'static str); 2];
type Histograms = Family<SourceLabel, Histogram, fn() -> Histogram>;

/// Bounds of the duration histograms, in seconds: 5 ms doubling up to about 2.7 minutes
/// (an image already present starts a container in tens of milliseconds; a pull over a
/// slow link, or a large import, takes minutes).
fn duration_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

/// What [`Metrics`] updates. Cheap to clone (one `Arc`); registered once by
/// [`super::registry`]. A default handle counts into metrics of its own (unit tests, or a
/// component not wired to the registry).
#[derive(Debug, Clone, Default)]
pub struct Metrics(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    pod_deltas: Family<DeltaLabels, Counter>,
    manifest_errors: Family<SourceLabel, Counter>,
    container_restarts: Family<SourceLabel, Counter>,
    pod_start_duration: Histograms,
    image_import_duration: Histogram,
    image_pull_duration: Histogram,
    checkpoint_writes: Family<SourceLabel, Counter>,
    checkpoint_write_failures: Family<SourceLabel, Counter>,
    /// The manifest watcher's backend: 0 before the file source reported one.
    watcher: AtomicU8,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            pod_deltas: Family::default(),
            manifest_errors: Family::default(),
            container_restarts: Family::default(),
            pod_start_duration: Family::new_with_constructor(duration_buckets),
            image_import_duration: duration_buckets(),
            image_pull_duration: duration_buckets(),
            checkpoint_writes: Family::default(),
            checkpoint_write_failures: Family::default(),
            watcher: AtomicU8::new(0),
        }
    }
}

const FANOTIFY: u8 = 1;
const INOTIFY: u8 = 2;

impl Metrics {
    /// The merge handed a delta to the pod workers.
    pub fn pod_delta(&self, op: DeltaOp, source: Source) {
        let op = match op {
            DeltaOp::Remove => "remove",
            DeltaOp::Add => "add",
            DeltaOp::Update => "update",
            DeltaOp::Delete => "delete",
            DeltaOp::Reconcile => "reconcile",
        };
        self.0.pod_deltas.get_or_create(&[("op", op), ("source", source.as_str())]).inc();
    }

    /// A source rejected a manifest (file), a document (URL) or a body (push).
    pub fn manifest_rejected(&self, source: Source) {
        self.0.manifest_errors.get_or_create(&label(source)).inc();
    }

    /// A pod worker started a container again after it had run.
    pub fn container_restarted(&self, source: Source) {
        self.0.container_restarts.get_or_create(&label(source)).inc();
    }

    /// A pod's first container is running, `latency` after the pod was first seen.
    pub fn pod_started(&self, source: Source, latency: Duration) {
        self.0.pod_start_duration.get_or_create(&label(source)).observe(latency.as_secs_f64());
    }

    /// An image tarball was imported into containerd.
    pub fn image_imported(&self, took: Duration) {
        self.0.image_import_duration.observe(took.as_secs_f64());
    }

    /// An image was pulled from its registry.
    pub fn image_pulled(&self, took: Duration) {
        self.0.image_pull_duration.observe(took.as_secs_f64());
    }

    /// A checkpoint write ended; `checkpoint` is its name (the source's: `url`, `push`,
    /// `api`).
    pub fn checkpoint_written(&self, checkpoint: &'static str, ok: bool) {
        let label = [("source", checkpoint)];
        self.0.checkpoint_writes.get_or_create(&label).inc();
        if !ok {
            self.0.checkpoint_write_failures.get_or_create(&label).inc();
        }
    }

    /// The file source watches with `backend`.
    pub fn manifest_watcher(&self, backend: Backend) {
        let value = match backend {
            Backend::Fanotify => FANOTIFY,
            Backend::Inotify => INOTIFY,
        };
        self.0.watcher.store(value, Ordering::Relaxed);
    }

    /// The backend the file source reported, if it did.
    fn watcher_backend(&self) -> Option<&'static str> {
        match self.0.watcher.load(Ordering::Relaxed) {
            FANOTIFY => Some("fanotify"),
            INOTIFY => Some("inotify"),
            _ => None,
        }
    }

    /// Registers every family (clones share the same atomics). The histograms carry
    /// their unit in their name but declare no `# UNIT` line, which some consumers (the
    /// `openmetrics-parser` crate the tests use) accept on counters and gauges only.
    pub(super) fn register(&self, registry: &mut Registry) {
        let m = &self.0;
        registry.register(
            "outpost_pod_deltas",
            "Pod changes the merge handed to the pod workers, by operation and source",
            m.pod_deltas.clone(),
        );
        registry.register(
            "outpost_manifest_errors",
            "Manifests (file), documents (URL) and bodies (push) rejected as invalid",
            m.manifest_errors.clone(),
        );
        registry.register(
            "outpost_container_restarts",
            "Containers started again by the pod workers after they had run",
            m.container_restarts.clone(),
        );
        registry.register(
            "outpost_pod_start_duration_seconds",
            "From a pod first seen by the merge to its first container running",
            m.pod_start_duration.clone(),
        );
        registry.register(
            "outpost_image_import_duration_seconds",
            "Image tarball imports into containerd (the images dir)",
            m.image_import_duration.clone(),
        );
        registry.register(
            "outpost_image_pull_duration_seconds",
            "Successful image pulls from a registry",
            m.image_pull_duration.clone(),
        );
        registry.register(
            "outpost_checkpoint_writes",
            "Checkpoint writes attempted, by source",
            m.checkpoint_writes.clone(),
        );
        registry.register(
            "outpost_checkpoint_write_failures",
            "Checkpoint writes that failed, by source",
            m.checkpoint_write_failures.clone(),
        );
    }
}

fn label(source: Source) -> SourceLabel {
    [("source", source.as_str())]
}

/// `outpost_manifest_watcher_info{backend}`, once the file source has said which.
#[derive(Debug)]
pub(super) struct Watcher(pub Metrics);

impl Collector for Watcher {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(backend) = self.0.watcher_backend() else { return Ok(()) };
        Info::new([("backend", backend)]).encode(encoder.encode_descriptor(
            "outpost_manifest_watcher",
            "The kernel interface the manifest directory is watched with",
            None,
            MetricType::Info,
        )?)
    }
}
