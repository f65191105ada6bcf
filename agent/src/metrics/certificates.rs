//! J2: the client and serving certificates' expiry, read at scrape time, under kubelet's
//! names (`certificate_manager_client_ttl_seconds`, `…_server_ttl_seconds`,
//! `…_expiration_seconds`, `…_expiration_renew_errors`), plus the rotations done. An alert on a ttl below
//! 7 days (604800) matches `outpost status`'s warning.

use std::time::{SystemTime, UNIX_EPOCH};

use outpost_core::certificates::seconds_left;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::certificates::Status;

/// A certificate's manager: `kind` is `client` or `server` (the serving certificate).
#[derive(Debug)]
pub(super) struct Certificate {
    pub kind: &'static str,
    pub status: Status,
}

impl Collector for Certificate {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let status = self.status.borrow().clone();
        let kind = self.kind;
        let name = |suffix: &str| format!("certificate_manager_{kind}_{suffix}");
        if let Some(not_after) = status.not_after {
            let ttl = seconds_left(SystemTime::now(), not_after);
            ConstGauge::new(ttl).encode(encoder.encode_descriptor(
                &name("ttl_seconds"),
                "Seconds until the certificate expires (negative once expired)",
                None,
                MetricType::Gauge,
            )?)?;
            let at = not_after.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
            ConstGauge::new(at).encode(encoder.encode_descriptor(
                &name("expiration_seconds"),
                "When the certificate expires (Unix time)",
                None,
                MetricType::Gauge,
            )?)?;
        }
        ConstCounter::new(status.renew_errors).encode(encoder.encode_descriptor(
            &name("expiration_renew_errors"),
            "Failed attempts to get or renew the certificate",
            None,
            MetricType::Counter,
        )?)?;
        ConstCounter::new(status.rotations).encode(encoder.encode_descriptor(
            &name("rotations"),
            "Certificates renewed since the agent started",
            None,
            MetricType::Counter,
        )?)?;
        let valid = i64::from(
            status.problem.is_none() && status.not_after.is_some_and(|t| t > SystemTime::now()),
        );
        ConstGauge::new(valid).encode(encoder.encode_descriptor(
            &name("valid"),
            "Whether the node has a valid client certificate and nothing keeps it from renewal (1) or not (0)",
            None,
            MetricType::Gauge,
        )?)?;
        Ok(())
    }
}
