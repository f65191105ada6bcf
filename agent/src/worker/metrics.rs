//! The pod workers' figures, registered on the agent's registry without a prefix of
//! their own (they name containers, pods and images, as kubelet's do):
//! `outpost_container_restarts_total{source}`, `outpost_pod_start_duration_seconds{source}`
//! (from the pod's `config.seen` to its first container running),
//! `outpost_image_pull_duration_seconds`, and the probes' `outpost_prober_probe_total`
//! and `outpost_prober_probe_duration_seconds` (kubelet's prober metrics). Clones share
//! the same atomics; a default handle counts into metrics of its own (tests).

use std::sync::Arc;
use std::time::Duration;

use outpost_core::pod::Source;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// One label, `source`.
type SourceLabel = [(&'static str, &'static str); 1];
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

    /// Registers the probe figures, unprefixed, as kubelet's `/metrics/probes` names
    /// them (`prober_probe_total`, `prober_probe_duration_seconds`), on `registry` (that
    /// path's own): the same counters as `outpost_prober_probe_*`.
    pub fn register_probes(&self, registry: &mut Registry) {
        registry.register(
            "prober_probe",
            "Cumulative number of a liveness, readiness or startup probe for a container by result.",
            self.0.probes.clone(),
        );
        registry.register(
            "prober_probe_duration_seconds",
            "Duration in seconds for a probe response.",
            self.0.probe_duration.clone(),
        );
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
