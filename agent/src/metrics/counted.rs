//! The figures counted where things happen: atomic counters and histograms behind cheap
//! handles, one per component. Each handle's `register` puts its families on the agent's
//! [`Registry`] under the component's prefix (`outpost_checkpoint_…`, `outpost_manifest_…`);
//! clones share the same atomics. A default handle counts into metrics of its own (unit
//! tests, or a component not wired to the registry). Label values are `&'static str`, so
//! an increment never allocates (a label set's first use creates its entry, once); the
//! probes' are the exception, named by pod and container (kubelet's labels).
//!
//! The histograms carry their unit in their name but declare no `# UNIT` line, which some
//! consumers (the `openmetrics-parser` crate the tests use) accept on counters and gauges
//! only.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use outpost_core::merge::DeltaOp;
use outpost_core::pod::Source;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
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

/// Bounds of the probe duration histograms, in seconds: 0.5 ms to 10 s in 1-2-5 steps (a
/// probe on loopback takes a millisecond or two, an exec tens of milliseconds; a timeout
/// is a second or more).
fn probe_buckets() -> Histogram {
    Histogram::new([
        0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
    ])
}

fn label(source: Source) -> SourceLabel {
    [("source", source.as_str())]
}

/// The pod workers': `outpost_container_restarts_total{source}`,
/// `outpost_pod_start_duration_seconds{source}`, `outpost_image_pull_duration_seconds`, and
/// the probes' `outpost_prober_probe_total` and `outpost_prober_probe_duration_seconds`.
#[derive(Debug, Clone)]
pub struct Metrics(Arc<Workers>);

#[derive(Debug)]
struct Workers {
    container_restarts: Family<SourceLabel, Counter>,
    pod_start_duration: Histograms,
    image_pull_duration: Histogram,
    probes: Family<ProbeResultLabels, Counter>,
    probe_duration: Family<ProbeDurationLabels, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics(Arc::new(Workers {
            container_restarts: Family::default(),
            pod_start_duration: Family::new_with_constructor(duration_buckets),
            image_pull_duration: duration_buckets(),
            probes: Family::default(),
            probe_duration: Family::new_with_constructor(probe_buckets),
        }))
    }
}

impl Metrics {
    /// Registers the workers' families on `outpost` (no prefix of their own: they name
    /// containers, pods and images).
    pub fn register(outpost: &mut Registry) -> Metrics {
        let metrics = Metrics::default();
        let m = &metrics.0;
        outpost.register(
            "container_restarts",
            "Containers started again by the pod workers after they had run",
            m.container_restarts.clone(),
        );
        outpost.register(
            "pod_start_duration_seconds",
            "From a pod first seen by the merge to its first container running",
            m.pod_start_duration.clone(),
        );
        outpost.register(
            "image_pull_duration_seconds",
            "Successful image pulls from a registry",
            m.image_pull_duration.clone(),
        );
        outpost.register(
            "prober_probe",
            "Probes run, by probe type, result and container (kubelet's prober_probe_total)",
            m.probes.clone(),
        );
        outpost.register(
            "prober_probe_duration_seconds",
            "How long each probe run took, by probe type and container",
            m.probe_duration.clone(),
        );
        metrics
    }

    /// A pod worker started a container again after it had run.
    pub fn container_restarted(&self, source: Source) {
        self.0.container_restarts.get_or_create(&label(source)).inc();
    }

    /// A pod's first container is running, `latency` after the pod was first seen.
    pub fn pod_started(&self, source: Source, latency: Duration) {
        self.0.pod_start_duration.get_or_create(&label(source)).observe(latency.as_secs_f64());
    }

    /// An image was pulled from its registry.
    pub fn image_pulled(&self, took: Duration) {
        self.0.image_pull_duration.observe(took.as_secs_f64());
    }

    /// A probe ran: `outpost_prober_probe_total{probe_type,result,container,pod,namespace,pod_uid}`
    /// (kubelet's `prober_probe_total`) and `outpost_prober_probe_duration_seconds`
    /// (`probe_type,container,pod,namespace`).
    /// `result` is `successful`, `failed` or `unknown`.
    pub fn probed(&self, labels: &ProbeLabels<'_>, result: &'static str, took: Duration) {
        self.0.probes.get_or_create(&labels.with_result(result)).inc();
        self.0.probe_duration.get_or_create(&labels.duration()).observe(took.as_secs_f64());
    }

    /// A probe no longer runs (its container or pod is gone): its series go, as kubelet's
    /// prober workers delete theirs.
    pub fn probe_removed(&self, labels: &ProbeLabels<'_>) {
        for result in PROBE_RESULTS {
            self.0.probes.remove(&labels.with_result(result));
        }
        self.0.probe_duration.remove(&labels.duration());
    }
}

/// `prober_probe_total`'s results.
const PROBE_RESULTS: [&str; 3] = ["successful", "failed", "unknown"];

/// Which probe of which container ran.
#[derive(Debug, Clone, Copy)]
pub struct ProbeLabels<'a> {
    /// `Liveness`, `Readiness` or `Startup`.
    pub probe_type: &'static str,
    pub namespace: &'a str,
    pub pod: &'a str,
    pub pod_uid: &'a str,
    pub container: &'a str,
}

impl ProbeLabels<'_> {
    fn with_result(&self, result: &'static str) -> ProbeResultLabels {
        ProbeResultLabels {
            probe_type: self.probe_type,
            result,
            container: self.container.to_owned(),
            pod: self.pod.to_owned(),
            namespace: self.namespace.to_owned(),
            pod_uid: self.pod_uid.to_owned(),
        }
    }

    fn duration(&self) -> ProbeDurationLabels {
        ProbeDurationLabels {
            probe_type: self.probe_type,
            container: self.container.to_owned(),
            pod: self.pod.to_owned(),
            namespace: self.namespace.to_owned(),
        }
    }
}

/// `outpost_prober_probe_total`'s labels, in kubelet's order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProbeResultLabels {
    probe_type: &'static str,
    result: &'static str,
    container: String,
    pod: String,
    namespace: String,
    pod_uid: String,
}

/// `outpost_prober_probe_duration_seconds`'s labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProbeDurationLabels {
    probe_type: &'static str,
    container: String,
    pod: String,
    namespace: String,
}

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

/// The pod sources': `outpost_manifest_errors_total{source}` and, once the file source
/// has said which kernel interface it watches with, `outpost_manifest_watcher_info{backend}`.
#[derive(Debug, Clone, Default)]
pub struct SourceMetrics {
    errors: Family<SourceLabel, Counter>,
    /// The manifest watcher's backend: 0 before the file source reported one.
    watcher: Arc<AtomicU8>,
}

const FANOTIFY: u8 = 1;
const INOTIFY: u8 = 2;

impl SourceMetrics {
    pub fn register(outpost: &mut Registry) -> SourceMetrics {
        let manifests = SourceMetrics::default();
        let registry = outpost.sub_registry_with_prefix("manifest");
        registry.register(
            "errors",
            "SourceMetrics (file), documents (URL) and bodies (push) rejected as invalid",
            manifests.errors.clone(),
        );
        registry.register_collector(Box::new(Watcher(manifests.watcher.clone())));
        manifests
    }

    /// A source rejected a manifest (file), a document (URL) or a body (push).
    pub fn manifest_rejected(&self, source: Source) {
        self.errors.get_or_create(&label(source)).inc();
    }

    /// The file source watches with `backend`.
    pub fn manifest_watcher(&self, backend: Backend) {
        let value = match backend {
            Backend::Fanotify => FANOTIFY,
            Backend::Inotify => INOTIFY,
        };
        self.watcher.store(value, Ordering::Relaxed);
    }
}

/// `…_watcher_info{backend}`, once the file source has said which.
#[derive(Debug)]
struct Watcher(Arc<AtomicU8>);

impl Collector for Watcher {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let backend = match self.0.load(Ordering::Relaxed) {
            FANOTIFY => "fanotify",
            INOTIFY => "inotify",
            _ => return Ok(()),
        };
        Info::new([("backend", backend)]).encode(encoder.encode_descriptor(
            "watcher",
            "The kernel interface the manifest directory is watched with",
            None,
            MetricType::Info,
        )?)
    }
}

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

/// The images dir's: `outpost_image_import_duration_seconds`.
#[derive(Debug, Clone)]
pub struct ImageImports {
    duration: Histogram,
}

impl Default for ImageImports {
    fn default() -> ImageImports {
        ImageImports { duration: duration_buckets() }
    }
}

impl ImageImports {
    pub fn register(outpost: &mut Registry) -> ImageImports {
        let metrics = ImageImports::default();
        outpost.sub_registry_with_prefix("image").register(
            "import_duration_seconds",
            "Image tarball imports into containerd (the images dir)",
            metrics.duration.clone(),
        );
        metrics
    }

    /// An image tarball was imported into containerd.
    pub fn image_imported(&self, took: Duration) {
        self.duration.observe(took.as_secs_f64());
    }
}

/// The eviction manager's: `outpost_evictions_total{signal}` (kubelet's
/// `kubelet_evictions{eviction_signal}`).
#[derive(Debug, Clone, Default)]
pub struct Evictions {
    evictions: Family<[(&'static str, &'static str); 1], Counter>,
}

impl Evictions {
    pub fn register(outpost: &mut Registry) -> Evictions {
        let metrics = Evictions::default();
        outpost.register(
            "evictions",
            "Pods evicted by the eviction manager, by the signal whose threshold was met",
            metrics.evictions.clone(),
        );
        metrics
    }

    /// A pod was evicted for `signal`.
    pub fn evicted(&self, signal: outpost_core::eviction::Signal) {
        self.evicted_for(signal.as_str());
    }

    /// A pod was evicted for a signal of kubelet's named `signal` (the ephemeral-storage
    /// limits': `ephemeralpodfs.limit`, `ephemeralcontainerfs.limit`, `emptydirfs.limit`).
    pub fn evicted_for(&self, signal: &'static str) {
        self.evictions.get_or_create(&[("signal", signal)]).inc();
    }

    /// How many pods were evicted for `signal` (tests).
    pub fn count(&self, signal: outpost_core::eviction::Signal) -> u64 {
        self.evictions.get_or_create(&[("signal", signal.as_str())]).get()
    }
}
