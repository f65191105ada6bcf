//! `grpc`: `grpc.health.v1.Health/Check` for the probe's service, in plaintext, on a
//! connection of its own; `SERVING` is a success. Messages as kubelet's (which are
//! `grpc_health_probe`'s).

use std::time::Duration;

use outpost_core::probe::Outcome;
use tokio::time::{Instant, timeout_at};
use tonic::Code;
use tonic::transport::Endpoint;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use super::{go_duration, join_host_port, os_error, user_agent};

pub(super) async fn check(
    host: &str,
    port: u16,
    service: &str,
    deadline: Instant,
    timeout: Duration,
) -> Outcome {
    let address = join_host_port(host, port);
    let within = go_duration(timeout);
    let endpoint = match Endpoint::from_shared(format!("http://{address}"))
        .and_then(|e| e.user_agent(user_agent()))
    {
        Ok(endpoint) => endpoint,
        Err(e) => {
            return Outcome::Failure(format!(
                "error: failed to connect service at {address:?}: {}",
                crate::error_chain::describe(&e)
            ));
        }
    };
    let channel = match timeout_at(deadline, endpoint.connect()).await {
        Err(_) => {
            return Outcome::Failure(format!(
                "timeout: failed to connect service {address:?} within {within}: context deadline exceeded"
            ));
        }
        Ok(Err(e)) => {
            return Outcome::Failure(format!(
                "error: failed to connect service at {address:?}: {}",
                connect_error(&e, &address)
            ));
        }
        Ok(Ok(channel)) => channel,
    };
    let mut request = tonic::Request::new(HealthCheckRequest { service: service.to_owned() });
    // The deadline, for the server too (`grpc-timeout`).
    request.set_timeout(deadline.saturating_duration_since(Instant::now()));
    let rpc_timeout = || format!("timeout: health rpc did not complete within {within}");
    match timeout_at(deadline, HealthClient::new(channel).check(request)).await {
        Err(_) => Outcome::Failure(rpc_timeout()),
        Ok(Ok(response)) => serving(response.get_ref()),
        Ok(Err(status)) => match status.code() {
            Code::Unimplemented => Outcome::Failure(format!(
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                status.message()
            )),
            Code::DeadlineExceeded => Outcome::Failure(rpc_timeout()),
            code => Outcome::Failure(format!(
                "error: health rpc probe failed: rpc error: code = {} desc = {}",
                code_name(code),
                status.message()
            )),
        },
    }
}

fn serving(response: &HealthCheckResponse) -> Outcome {
    match ServingStatus::try_from(response.status) {
        Ok(ServingStatus::Serving) => Outcome::Success,
        Ok(status) => Outcome::Failure(format!(
            "service unhealthy (responded with {:?})",
            status.as_str_name()
        )),
        Err(_) => {
            Outcome::Failure(format!("service unhealthy (responded with \"{}\")", response.status))
        }
    }
}

/// A failed connection: `dial tcp 127.0.0.1:9000: connect: connection refused` when the
/// system says why, else tonic's causes.
fn connect_error(error: &tonic::transport::Error, address: &str) -> String {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.raw_os_error().is_some()
        {
            return format!("dial tcp {address}: connect: {}", os_error(io));
        }
        next = e.source();
    }
    crate::error_chain::describe(error)
}

/// A status code as gRPC-Go prints it.
fn code_name(code: Code) -> String {
    match code {
        Code::Cancelled => "Canceled".to_owned(),
        code => format!("{code:?}"),
    }
}
