//! kubelet's healthz port (`healthzPort`, 10248 on 127.0.0.1 by default): plain HTTP,
//! `/healthz` alone, open to anyone, as kubelet serves it for local liveness checks
//! (N2). A port that is taken does not stop the agent: it says so and serves the rest.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;

use super::{health, serve};

/// Binds `addr` (`None`: turned off) and returns the server to run; `None` when off or
/// when the address cannot be bound (logged).
pub async fn healthz_port(addr: Option<SocketAddr>) -> Option<impl Future<Output = ()> + use<>> {
    let addr = addr?;
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            tracing::warn!(
                %addr, %error,
                "cannot serve /healthz on the healthz port; the agent runs without it \
                 (set healthzPort to a free port, or 0 to turn it off)"
            );
            return None;
        }
    };
    tracing::info!(%addr, "healthz port listening");
    let app = Router::new()
        .route("/healthz", get(health::healthz))
        .layer(axum::middleware::from_fn(serve::request_timeout));
    Some(serve::serve(listener, None, app))
}
