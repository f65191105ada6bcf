//! SPDY/3.1 for kubelet's streaming endpoints (N3), as API servers 1.30-1.35 speak it to
//! kubelets and kubectl 1.27 to them, written here because no maintained Rust crate
//! serves SPDY/3.1 (the frames are `outpost_formats::spdy`'s).
//!
//! [`upgrade`] answers `101 Switching Protocols` (`Upgrade: SPDY/3.1`) with the
//! `X-Stream-Protocol-Version` negotiated as kubelet's `httpstream.Handshake` does, then
//! serves the endpoint on the upgraded connection:
//! - `remotecommand`: `/exec` and `/attach`, one SPDY stream per std stream
//!   (`channel.k8s.io` to `v4.channel.k8s.io`);
//! - `portforward`: `/portForward`, a data and an error stream per forwarded connection
//!   (`portforward.k8s.io`);
//! - `tunnel`: the same port-forward session inside a WebSocket's binary messages
//!   (KEP-4006's `SPDY/3.1+portforward.k8s.io`, kubectl 1.31+), which [`upgrade`] takes
//!   too ([`is_tunneled_spdy`]).
//!
//! - `connection`: the SPDY/3.1 connection's server side (streams, flow control, PING,
//!   GOAWAY).

pub mod connection;
mod logical;
mod portforward;
mod remotecommand;
#[cfg(test)]
mod test_client;
mod tunnel;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use tracing::{Instrument, Span, debug, warn};

use super::container_logs::status;
use super::streams::{Endpoint, Limits};

pub use remotecommand::Protocol;

/// The header a client lists its stream protocols in, and the server answers the one
/// it chose.
pub const PROTOCOL_VERSION: &str = "x-stream-protocol-version";
/// The header that lists the protocols the server takes, when none of the client's is.
pub const ACCEPTED_PROTOCOL_VERSIONS: &str = "x-accepted-stream-protocol-versions";
/// The upgrade token.
pub const SPDY_3_1: &str = "SPDY/3.1";
/// kubelet's port-forward protocol.
pub const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

/// Whether a request asks for a SPDY upgrade (`Upgrade: SPDY/3.1`).
pub fn is_spdy(request: &Request) -> bool {
    request
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("spdy/"))
}

/// Whether a request is a WebSocket that tunnels SPDY (KEP-4006: the subprotocol
/// `SPDY/3.1+portforward.k8s.io`, which kubectl 1.31+ asks for on `/portForward`).
pub fn is_tunneled_spdy(request: &Request) -> bool {
    tunnel::is_tunneled(request.headers())
}

/// Upgrades `request` to SPDY/3.1 (or to a WebSocket tunnelling SPDY, for
/// [`is_tunneled_spdy`] requests) and serves `endpoint` on the connection, within
/// `limits`. The session runs on its own task, in the caller's span.
pub fn upgrade(mut request: Request, endpoint: Endpoint, limits: Limits) -> Response {
    if is_tunneled_spdy(&request) {
        return tunnel::upgrade(request, endpoint, limits);
    }
    if !is_spdy(&request) {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "this endpoint upgrades to {SPDY_3_1}: send Connection: Upgrade and Upgrade: {SPDY_3_1}"
            ),
        );
    }
    let served = served(&endpoint);
    let protocol = match negotiate(&request, &served) {
        Ok(protocol) => protocol,
        Err(refusal) => return *refusal,
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    let span = Span::current();
    let chosen = protocol.clone();
    tokio::spawn(
        async move {
            match on_upgrade.await {
                Ok(upgraded) => serve(TokioIo::new(upgraded), &chosen, endpoint, limits).await,
                Err(e) => warn!(error = %e, "the SPDY upgrade did not complete"),
            }
        }
        .instrument(span),
    );
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static(SPDY_3_1));
    if let Ok(value) = HeaderValue::from_str(&protocol) {
        headers.insert(PROTOCOL_VERSION, value);
    }
    response
}

/// Serves `endpoint` over SPDY/3.1 on `io`, speaking `protocol`, within `limits`.
pub async fn serve<T>(io: T, protocol: &str, endpoint: Endpoint, limits: Limits)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    debug!(protocol, "SPDY session started");
    let limits = connection::Limits {
        max_streams: limits.streams_per_connection,
        idle_timeout: Some(limits.idle_timeout),
    };
    match endpoint {
        Endpoint::Command { options, command, start } => {
            let protocol = Protocol::from_name(protocol).unwrap_or(Protocol::V1);
            remotecommand::serve(io, protocol, options, command, start, limits).await;
        }
        Endpoint::PortForward { dialer, .. } => portforward::serve(io, dialer, limits).await,
    }
}

/// The stream protocols served for `endpoint`, the preferred first (kubelet's order).
pub fn served(endpoint: &Endpoint) -> Vec<&'static str> {
    match endpoint {
        Endpoint::Command { .. } => Protocol::ALL.iter().map(|p| p.name()).collect(),
        Endpoint::PortForward { .. } => vec![PORT_FORWARD_PROTOCOL],
    }
}

/// kubelet's `httpstream.Handshake`: the first of the client's protocols (in its order,
/// comma-separated values and repeated headers alike) that the server serves. None asked
/// for is a 400; none served a 403 listing the server's.
fn negotiate(request: &Request, served: &[&'static str]) -> Result<String, Box<Response>> {
    let asked = asked_protocols(request);
    if asked.is_empty() {
        return Err(Box::new(status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "unable to upgrade: X-Stream-Protocol-Version is required".to_owned(),
        )));
    }
    match choose(&asked, served) {
        Some(chosen) => Ok(chosen.to_owned()),
        None => {
            let mut response = status(
                StatusCode::FORBIDDEN,
                "Forbidden",
                format!(
                    "unable to upgrade: unable to negotiate protocol: client supports [{}], server accepts [{}]",
                    asked.join(" "),
                    served.join(" ")
                ),
            );
            for protocol in served {
                response
                    .headers_mut()
                    .append(ACCEPTED_PROTOCOL_VERSIONS, HeaderValue::from_static(protocol));
            }
            Err(Box::new(response))
        }
    }
}

/// The client's protocols, in its order.
fn asked_protocols(request: &Request) -> Vec<String> {
    request
        .headers()
        .get_all(PROTOCOL_VERSION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The first of `asked` that is `served`.
pub fn choose<'a>(asked: &'a [String], served: &[&str]) -> Option<&'a str> {
    asked.iter().map(String::as_str).find(|p| served.contains(p))
}

#[cfg(test)]
mod tests;
