//! J2: the client and serving certificates' expiry, read at scrape time, under kubelet's
//! names (`certificate_manager_client_ttl_seconds`, `…_server_ttl_seconds`,
//! `…_expiration_seconds`, `…_expiration_renew_errors`), plus the rotations done. An alert on a ttl below
//! 7 days (604800) matches `outpost status`'s warning.

use std::time::UNIX_EPOCH;

use outpost_core::certificates::seconds_left;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::Status;

/// A certificate's manager: `kind` is `client` or `server` (the serving certificate).
#[derive(Debug)]
pub struct Certificate {
    pub kind: &'static str,
    pub status: Status,
}

/// A certificate's families: name and help, in the order `encode` writes them.
struct Families([(&'static str, &'static str); 5]);

const CLIENT: Families = Families([
    (
        "certificate_manager_client_ttl_seconds",
        "Seconds until the node's client certificate expires (negative once expired)",
    ),
    (
        "certificate_manager_client_expiration_seconds",
        "When the node's client certificate expires (Unix time)",
    ),
    (
        "certificate_manager_client_expiration_renew_errors",
        "Failed attempts to get or renew the node's client certificate",
    ),
    ("certificate_manager_client_rotations", "Client certificates renewed since the agent started"),
    (
        "certificate_manager_client_valid",
        "Whether the node has a valid client certificate and nothing keeps it from renewal (1) or not (0)",
    ),
]);

const SERVER: Families = Families([
    (
        "certificate_manager_server_ttl_seconds",
        "Seconds until the local API's serving certificate expires (negative once expired)",
    ),
    (
        "certificate_manager_server_expiration_seconds",
        "When the local API's serving certificate expires (Unix time)",
    ),
    (
        "certificate_manager_server_expiration_renew_errors",
        "Failed attempts to get or renew the local API's serving certificate",
    ),
    (
        "certificate_manager_server_rotations",
        "Serving certificates renewed since the agent started",
    ),
    (
        "certificate_manager_server_valid",
        "Whether the local API has a valid serving certificate and nothing keeps it from renewal (1) or not (0)",
    ),
]);

impl Collector for Certificate {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let status = self.status.borrow().clone();
        let Families([ttl, expiration, errors, rotations, valid]) =
            if self.kind == "client" { CLIENT } else { SERVER };
        if let Some(not_after) = status.not_after {
            let seconds = seconds_left(crate::apiserver::server_time::trusted_now(), not_after);
            ConstGauge::new(seconds).encode(encoder.encode_descriptor(
                ttl.0,
                ttl.1,
                None,
                MetricType::Gauge,
            )?)?;
            let at = not_after.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
            ConstGauge::new(at).encode(encoder.encode_descriptor(
                expiration.0,
                expiration.1,
                None,
                MetricType::Gauge,
            )?)?;
        }
        ConstCounter::new(status.renew_errors).encode(encoder.encode_descriptor(
            errors.0,
            errors.1,
            None,
            MetricType::Counter,
        )?)?;
        ConstCounter::new(status.rotations).encode(encoder.encode_descriptor(
            rotations.0,
            rotations.1,
            None,
            MetricType::Counter,
        )?)?;
        let ok = status.problem.is_none()
            && status.not_after.is_some_and(|t| t > crate::apiserver::server_time::trusted_now());
        ConstGauge::new(i64::from(ok)).encode(encoder.encode_descriptor(
            valid.0,
            valid.1,
            None,
            MetricType::Gauge,
        )?)?;
        Ok(())
    }
}
