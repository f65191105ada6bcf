//! Running a probe's or a hook's [`Handler`] (P5): `exec` in the container through the
//! runtime, `httpGet` (HTTP or HTTPS without a certificate check, kubelet's headers and
//! redirect rules), `tcpSocket`, `grpc` (`grpc.health.v1.Health/Check`), and a hook's
//! `sleep`. Each run is one future bounded by its timeout; the pod worker decides when
//! to run it and what its result means.

use std::time::Duration;

use outpost_core::probe::{Handler, Outcome};

use super::pod_runtime::PodRuntime;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot set up the probes' HTTP client")]
    Client(#[source] reqwest::Error),
}

/// What every probe run shares (the HTTP client: no connection pool, no certificate
/// check, kubelet's redirect rules).
#[derive(Debug, Clone)]
pub struct Prober {
    // helper: the HTTP client
}

impl Prober {
    pub fn new() -> Result<Prober, Error> {
        todo!("helper: probe handlers")
    }

    /// Runs `handler` against container `container_id` within `timeout`; a timeout or
    /// an error is a failure with kubelet's message.
    pub async fn run<R: PodRuntime>(
        &self,
        runtime: &R,
        container_id: &str,
        handler: &Handler,
        timeout: Duration,
    ) -> Outcome {
        let _ = (runtime, container_id, handler, timeout);
        todo!("helper: probe handlers")
    }
}
