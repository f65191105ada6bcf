//! `/metrics`: Prometheus (OpenMetrics text) figures read from the merge's snapshot at
//! scrape time, so nothing on the merge's path updates a metric.
//!
//! - `outpost_source_state{source,state}`: 1 for the source's current state
//!   (`live`, `checkpoint`, `never_seen`), 0 for the others.
//! - `outpost_source_errors_total{source}`: failures to reach or read the source.
//! - `outpost_source_last_success_timestamp_seconds{source}`: when the source last
//!   delivered or confirmed its pods.
//! - `outpost_pods{source}`: desired pods by source; `outpost_pod_conflicts`: pods not
//!   run because another pod holds their name (M2, M11).
//! - With a kubeconfig: `outpost_apiserver_reachable` (1 or 0) and
//!   `outpost_pod_status_updates_queued` (waiting to be sent: offline, or backing off).
//! - `outpost_events_recorded_total`, `outpost_events_rate_limited_total`,
//!   `outpost_events_dropped_total`: Kubernetes Events recorded, refused by the spam
//!   filter, and lost unwritten (the offline backlog is bounded).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::podconfig::{SnapshotHandle, SourceState};
use crate::sync::{Health, Recorder};

/// The content type of [`render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the metrics read besides the merge's snapshot.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The sync to the API server, when a kubeconfig is given.
    pub sync: Option<Health>,
    pub events: Recorder,
}

/// A registry whose collectors read `snapshot` and `sources`.
pub fn registry(snapshot: SnapshotHandle, sources: Sources) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(PodSources(snapshot)));
    registry.register_collector(Box::new(Sync(sources)));
    registry
}

/// The registry's metrics in the OpenMetrics text format.
pub fn render(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}

#[derive(Debug)]
struct PodSources(SnapshotHandle);

impl Collector for PodSources {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = self.0.load();
        let states = [
            (SourceState::Live, "live"),
            (SourceState::Checkpoint, "checkpoint"),
            (SourceState::NeverSeen, "never_seen"),
        ];
        let mut family = encoder.encode_descriptor(
            "outpost_source_state",
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
            "outpost_source_errors",
            "Failures to reach or read a pod source since the agent started",
            None,
            MetricType::Counter,
        )?;
        for health in &snap.sources {
            ConstCounter::new(health.errors_total)
                .encode(family.encode_family(&[("source", health.source.as_str())])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "outpost_source_last_success_timestamp_seconds",
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
        let mut family = encoder.encode_descriptor(
            "outpost_pods",
            "Desired pods after the merge, by source",
            None,
            MetricType::Gauge,
        )?;
        for health in &snap.sources {
            let count = snap.pods.iter().filter(|(source, _)| *source == health.source).count();
            ConstGauge::new(i64::try_from(count).unwrap_or(i64::MAX))
                .encode(family.encode_family(&[("source", health.source.as_str())])?)?;
        }
        let conflicts = i64::try_from(snap.conflicts.len()).unwrap_or(i64::MAX);
        ConstGauge::new(conflicts).encode(encoder.encode_descriptor(
            "outpost_pod_conflicts",
            "Pods not run because another pod holds their namespace/name (M2, M11)",
            None,
            MetricType::Gauge,
        )?)
    }
}

/// The sync to the API server and the events.
#[derive(Debug)]
struct Sync(Sources);

impl Collector for Sync {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(health) = &self.0.sync {
            let reachable = i64::from(health.connectivity.is_reachable());
            ConstGauge::new(reachable).encode(encoder.encode_descriptor(
                "outpost_apiserver_reachable",
                "Whether the API server answered the agent's last request (1) or not (0)",
                None,
                MetricType::Gauge,
            )?)?;
            let queued = i64::try_from(health.status_backlog.borrow().queued).unwrap_or(i64::MAX);
            ConstGauge::new(queued).encode(encoder.encode_descriptor(
                "outpost_pod_status_updates_queued",
                "Pod status updates waiting to be sent to the API server",
                None,
                MetricType::Gauge,
            )?)?;
        }
        let stats = self.0.events.stats();
        for (name, help, value) in [
            ("outpost_events_recorded", "Kubernetes Events recorded", stats.emitted),
            (
                "outpost_events_rate_limited",
                "Kubernetes Events refused by the per-object spam filter",
                stats.rate_limited,
            ),
            (
                "outpost_events_dropped",
                "Kubernetes Events lost unwritten (the offline backlog is bounded)",
                stats.dropped,
            ),
        ] {
            ConstCounter::new(value).encode(encoder.encode_descriptor(
                name,
                help,
                None,
                MetricType::Counter,
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;
    use k8s_openapi::jiff::Timestamp;
    use outpost_core::pod::Source;

    use super::*;
    use crate::podconfig::{Snapshot, SourceHealth};

    #[test]
    fn source_health_is_exported() {
        let snapshot = Snapshot {
            sources: vec![
                SourceHealth {
                    source: Source::File,
                    state: SourceState::Live,
                    last_error: None,
                    errors_total: 0,
                    last_success: Some(Timestamp::from_second(1_700_000_000).unwrap()),
                },
                SourceHealth {
                    source: Source::Url,
                    state: SourceState::Checkpoint,
                    last_error: Some("connection refused".into()),
                    errors_total: 3,
                    last_success: None,
                },
            ],
            ..Snapshot::default()
        };
        let handle: SnapshotHandle = Arc::new(ArcSwap::from_pointee(snapshot));
        let text = render(&registry(handle, Sources::default())).unwrap();
        for line in [
            "outpost_source_state{source=\"url\",state=\"checkpoint\"} 1",
            "outpost_source_state{source=\"url\",state=\"live\"} 0",
            "outpost_source_errors_total{source=\"url\"} 3",
            "outpost_source_errors_total{source=\"file\"} 0",
            "outpost_source_last_success_timestamp_seconds{source=\"file\"} 1700000000.0",
            "outpost_pods{source=\"file\"} 0",
            "outpost_pod_conflicts 0",
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
        }
        assert!(!text.contains("last_success_timestamp_seconds{source=\"url\"}"), "{text}");
    }

    #[test]
    fn sync_and_events_are_exported() {
        let connectivity = crate::sync::Connectivity::default();
        connectivity.reachable();
        let backlog =
            tokio::sync::watch::Sender::new(crate::sync::StatusBacklog { version: 7, queued: 3 });
        let events = Recorder::default();
        let node = crate::sync::events::node_ref("edge-1");
        events.emit(&node, crate::sync::events::EventType::Warning, "FailedValidation", "bad");
        let sources = Sources {
            sync: Some(Health { connectivity, status_backlog: backlog.subscribe() }),
            events,
        };
        let handle: SnapshotHandle = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
        let text = render(&registry(handle, sources)).unwrap();
        for line in [
            "outpost_apiserver_reachable 1",
            "outpost_pod_status_updates_queued 3",
            "outpost_events_recorded_total 1",
            "outpost_events_rate_limited_total 0",
            "outpost_events_dropped_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
        }
        // Without a kubeconfig there is no API server to report on.
        let handle: SnapshotHandle = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
        let text = render(&registry(handle, Sources::default())).unwrap();
        assert!(!text.contains("outpost_apiserver_reachable"), "{text}");
    }
}
