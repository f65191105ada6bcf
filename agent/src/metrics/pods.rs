//! Desired pods and source health from the merge's snapshot, and running pods and
//! containers from the pod workers' statuses, by source.

use outpost_core::pod;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::podconfig::{SnapshotHandle, SourceState};
use crate::status::StatusStore;

#[derive(Debug)]
pub(super) struct PodSources(pub SnapshotHandle);

impl Collector for PodSources {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = self.0.load();
        // A family without samples is left out (a bare descriptor reads, to some parsers,
        // as part of the next family): before the sources are registered, say.
        if snap.sources.is_empty() {
            return pod_conflicts(&snap, encoder);
        }
        let states = [
            (SourceState::Live, "live"),
            (SourceState::Checkpoint, "checkpoint"),
            (SourceState::NeverSeen, "never_seen"),
        ];
        let mut family = encoder.encode_descriptor(
            "source_state",
            "Where each pod source's pods come from: 1 for its current state",
            None,
            MetricType::Gauge,
        )?;
        for health in &snap.sources {
            for (state, name) in states {
                let labels = [("source", health.source.as_str()), ("state", name)];
                ConstGauge::new(i64::from(health.state == state))
                    .encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "source_errors",
            "Failures to reach or read a pod source since the agent started",
            None,
            MetricType::Counter,
        )?;
        for health in &snap.sources {
            ConstCounter::new(health.errors_total)
                .encode(family.encode_family(&[("source", health.source.as_str())])?)?;
        }
        if snap.sources.iter().any(|h| h.last_success.is_some()) {
            let mut family = encoder.encode_descriptor(
                "source_last_success_timestamp_seconds",
                "When a pod source last delivered or confirmed its pods (Unix time)",
                None,
                MetricType::Gauge,
            )?;
            for health in &snap.sources {
                if let Some(at) = health.last_success {
                    let seconds = at.as_millisecond() as f64 / 1e3;
                    ConstGauge::new(seconds)
                        .encode(family.encode_family(&[("source", health.source.as_str())])?)?;
                }
            }
        }
        let mut family = encoder.encode_descriptor(
            "pods",
            "Desired pods after the merge, by source",
            None,
            MetricType::Gauge,
        )?;
        for health in &snap.sources {
            let count = snap.pods.iter().filter(|(source, _)| *source == health.source).count();
            ConstGauge::new(i64::try_from(count).unwrap_or(i64::MAX))
                .encode(family.encode_family(&[("source", health.source.as_str())])?)?;
        }
        pod_conflicts(&snap, encoder)
    }
}

fn pod_conflicts(
    snap: &crate::podconfig::Snapshot,
    mut encoder: DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    let conflicts = i64::try_from(snap.conflicts.len()).unwrap_or(i64::MAX);
    ConstGauge::new(conflicts).encode(encoder.encode_descriptor(
        "pod_conflicts",
        "Pods not run because another pod holds their namespace/name (M2, M11)",
        None,
        MetricType::Gauge,
    )?)
}

/// The desired pods whose workers report them running, with their running containers.
#[derive(Debug)]
pub(super) struct Running {
    pub snapshot: SnapshotHandle,
    pub statuses: StatusStore,
}

impl Collector for Running {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = self.snapshot.load();
        // Per configured source: (running pods, running containers).
        let mut counts: Vec<(&'static str, i64, i64)> =
            snap.sources.iter().map(|h| (h.source.as_str(), 0, 0)).collect();
        for (source, desired) in &snap.pods {
            let Some(status) = self.statuses.get(pod::uid(desired)) else { continue };
            let Some(entry) = counts.iter_mut().find(|(s, ..)| *s == source.as_str()) else {
                continue;
            };
            let containers = status
                .container_statuses
                .iter()
                .flatten()
                .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
                .count();
            entry.1 += i64::from(status.phase.as_deref() == Some("Running"));
            entry.2 += i64::try_from(containers).unwrap_or(i64::MAX);
        }
        if counts.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "running_pods",
            "Desired pods in phase Running, by source",
            None,
            MetricType::Gauge,
        )?;
        for (source, pods, _) in &counts {
            ConstGauge::new(*pods).encode(family.encode_family(&[("source", *source)])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "running_containers",
            "Running containers of the desired pods, by source",
            None,
            MetricType::Gauge,
        )?;
        for (source, _, containers) in &counts {
            ConstGauge::new(*containers).encode(family.encode_family(&[("source", *source)])?)?;
        }
        Ok(())
    }
}
