//! SPDY/3.1 for kubelet's streaming endpoints, as API servers 1.30-1.35 speak it to
//! kubelets (and kubectl 1.27 to them): not served yet, the upgrade is refused with a
//! 400 that says so.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;

use super::container_logs::status;
use super::streams::Endpoint;

/// Whether a request asks for a SPDY upgrade (`Upgrade: SPDY/3.1`).
pub fn is_spdy(request: &Request) -> bool {
    request
        .headers()
        .get(axum::http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("spdy/"))
}

/// Upgrades `request` to SPDY/3.1 and serves `endpoint` on the connection.
pub fn upgrade(_request: Request, endpoint: Endpoint) -> Response {
    drop(endpoint);
    status(
        StatusCode::BAD_REQUEST,
        "BadRequest",
        "this agent does not serve SPDY/3.1 yet: use a WebSocket client".to_owned(),
    )
}
