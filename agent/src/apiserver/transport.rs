//! The API client's transport: kube's layers (the server's URL, the credentials, the
//! kubeconfig's extra headers) over one hyper client that offers HTTP/2 by ALPN, as
//! client-go's transport does. kube's own stack offers HTTP/1.1 only, so a node held a
//! connection (and a TLS session) for each watch and each concurrent write: about eight
//! against a busy API server, where kubelet holds one. Here every request and every watch
//! of the node is a stream of one connection when the server speaks HTTP/2; one that
//! answers HTTP/1.1 (or a plain `http://` server) gets kube's behaviour.
//!
//! One connection carries everything, so a dead one must be found fast: the client pings
//! it when nothing was read for [`READ_IDLE`] and drops it when no answer comes within
//! [`PING_TIMEOUT`] (client-go's `ReadIdleTimeout` and `PingTimeout`, the fix for watches
//! hung on a connection that a NAT silently forgot). The next request opens a new one.
//!
//! Each answer's `Date` header is the server's time ([`super::server_time`]).

use std::time::Duration;

use hyper_rustls::{FixedServerNameResolver, HttpsConnectorBuilder};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Builder;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

/// No frame read for this long: the connection is pinged (client-go's 30 s).
pub const READ_IDLE: Duration = Duration::from_secs(30);
/// A ping unanswered for this long: the connection is dropped (client-go's 15 s).
pub const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// A kube client for `config` on the HTTP/2-capable transport. A proxy in the
/// kubeconfig takes kube's own stack (which refuses proxies this build has no
/// support for, saying so).
pub fn client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    if config.proxy_url.is_some() {
        return kube::Client::try_from(config);
    }
    let default_namespace = config.default_namespace.clone();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut https = HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = name.clone().try_into().map_err(|e| kube::Error::Service(Box::new(e)))?;
        https = https.with_server_name_resolver(FixedServerNameResolver::new(name));
    }
    let mut connector =
        TimeoutConnector::new(https.enable_http1().enable_http2().wrap_connector(http));
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let hyper = Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(READ_IDLE)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .map_response(observe_date)
        .service(hyper);
    Ok(kube::Client::new(service, default_namespace))
}

/// Every answer's `Date` tells the server's time ([`super::server_time`]).
fn observe_date<B>(response: http::Response<B>) -> http::Response<B> {
    if let Some(date) = response.headers().get(http::header::DATE).and_then(|d| d.to_str().ok()) {
        super::server_time::global().observe_header(date);
    }
    response
}
