//! The sync to the API server (reachability, queued status updates) and the Kubernetes
//! Events recorder, read at scrape time.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::apiserver::{Health, Recorder};

/// The sync to the API server and the events.
#[derive(Debug)]
pub struct Sync {
    pub health: Option<Health>,
    pub events: Recorder,
}

impl Collector for Sync {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(health) = &self.health {
            let reachable = i64::from(health.connectivity.is_reachable());
            ConstGauge::new(reachable).encode(encoder.encode_descriptor(
                "apiserver_reachable",
                "Whether the API server answered the agent's last request (1) or not (0)",
                None,
                MetricType::Gauge,
            )?)?;
            let queued = i64::try_from(health.status_backlog.borrow().queued).unwrap_or(i64::MAX);
            ConstGauge::new(queued).encode(encoder.encode_descriptor(
                "pod_status_updates_queued",
                "Pod status updates waiting to be sent to the API server",
                None,
                MetricType::Gauge,
            )?)?;
        }
        let stats = self.events.stats();
        for (name, help, value) in [
            ("events_recorded", "Kubernetes Events recorded", stats.emitted),
            (
                "events_rate_limited",
                "Kubernetes Events refused by the per-object spam filter",
                stats.rate_limited,
            ),
            (
                "events_dropped",
                "Kubernetes Events lost unwritten: past the bounded offline backlog, older ones \
                 of a pod's reason after a reconnect, or refused by the API server for load \
                 (the first refusal after a reconnect with the Normal ones still queued)",
                stats.lost(),
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
