//! The local API's one accept loop, plain HTTP or TLS, and the limits that keep a slow
//! or malicious client from stalling the agent: a cap on connections (in all and per
//! client address; past it a new connection is closed at once), HTTP/1 header read
//! timeout and buffer limit, HTTP/2 stream cap and keep-alive pings, a TLS handshake
//! timeout, an idle timeout, and (in [`request_timeout`]) a whole-request timeout.
//! Each request carries its connection's [`Peer`] in its extensions, and the user its
//! verified client certificate names ([`CertificateUser`]).
//!
//! - `connections`: counting connections, the pure part of the caps.

mod connections;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tracing::{Instrument, debug, warn};

pub use self::connections::Limits;
use self::connections::{Connections, Slot};
use super::Problem;
use super::auth::{CertificateUser, Peer, User};

/// Connections served at once. Each costs a task and buffers (~16 KiB at most), so 256
/// stay well under a megabyte per kind of buffer, yet far above what the operators and
/// scrapers of one edge box open.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections from one client address at once: a client (or a flood from one address)
/// cannot take every slot; a browser or `kubectl` opens a handful, a scraper one.
pub const MAX_CONNECTIONS_PER_IP: usize = 32;
/// How long a client may take to send a request's head. Generous for a slow link (a
/// head is a few hundred bytes), short enough that dribbling clients free their slot.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest HTTP/1 read buffer, so the largest request head (a bigger one is
/// answered 431): every legitimate request here has a short head; hyper's minimum is 8 KiB.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// HTTP/2 streams at once on one connection: a client multiplexing more is asking for
/// more than any tool of ours needs.
pub const MAX_HTTP2_STREAMS: u32 = 32;
/// HTTP/2 keep-alive ping interval, and how long to wait for its answer: a peer that
/// vanished (a box's uplink dropped) is noticed within a minute, not at TCP's hours.
pub const HTTP2_PING_INTERVAL: Duration = Duration::from_secs(30);
pub const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a client may take to complete the TLS handshake (a few round trips).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection on which no request started for this long is closed (a request in
/// flight finishes first): idle keep-alive connections do not hold slots forever.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a request may take, reading its body included (a 10 MiB manifest on a slow
/// uplink fits); streaming requests (`/containerLogs?follow=true`) are exempt.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after a failed accept (e.g. out of file descriptors), as `axum::serve` does.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
/// At most one log line per this interval about refused connections (a flood must not
/// flood the log).
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Accepts connections until the task is dropped; each is served on its own task.
pub async fn serve(listener: TcpListener, tls: Option<TlsAcceptor>, app: Router) {
    let connections = Arc::new(Mutex::new(Connections::new(Limits {
        total: MAX_CONNECTIONS,
        per_ip: MAX_CONNECTIONS_PER_IP,
    })));
    let mut refusals = Refusals::default();
    loop {
        let (tcp, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                warn!(error = %e, "local API cannot accept a connection");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        // Small frames (a stream's reply, a status, an echoed keystroke) go out at once,
        // as from kubelet (Go sets TCP_NODELAY on every connection): with Nagle's
        // algorithm each waited for the ACK of the one before, which the client delays.
        let _ = tcp.set_nodelay(true);
        let Some(slot) = Slot::take(&connections, remote.ip()) else {
            // Closed at once (dropped), not queued.
            let open = connections.lock().map(|c| c.total()).unwrap_or_default();
            refusals.note(remote, open);
            continue;
        };
        let tls = tls.clone();
        let app = app.clone();
        let span = tracing::debug_span!("local API connection", %remote);
        tokio::spawn(
            async move {
                let _slot = slot;
                match tls {
                    None => {
                        connection(tcp, Peer { remote, client_cert: false }, None, app).await;
                    }
                    Some(acceptor) => {
                        let stream =
                            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
                                .await
                            {
                                Ok(Ok(stream)) => stream,
                                Ok(Err(e)) => {
                                    debug!(error = %e, "local API TLS handshake failed");
                                    return;
                                }
                                Err(_) => {
                                    debug!("local API TLS handshake timed out");
                                    return;
                                }
                            };
                        let leaf = stream.get_ref().1.peer_certificates().and_then(|c| c.first());
                        let client_cert = leaf.is_some();
                        // Who the verified certificate names (N1): read once per connection.
                        let certificate = leaf
                            .map(|der| User::from_certificate(der).unwrap_or_default())
                            .map(|user| CertificateUser(Arc::new(user)));
                        connection(stream, Peer { remote, client_cert }, certificate, app).await;
                    }
                }
            }
            .instrument(span),
        );
    }
}

/// Serves one connection (HTTP/1 or HTTP/2) until it ends, or until it is idle for
/// [`IDLE_TIMEOUT`].
async fn connection<I>(io: I, peer: Peer, certificate: Option<CertificateUser>, app: Router)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let last_request = Arc::new(Mutex::new(Instant::now()));
    let touched = last_request.clone();
    let app = TowerToHyperService::new(app);
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(peer);
        if let Some(certificate) = &certificate {
            request.extensions_mut().insert(certificate.clone());
        }
        if let Ok(mut last) = touched.lock() {
            *last = Instant::now();
        }
        hyper::service::Service::call(&app, request)
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_HTTP2_STREAMS)
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .keep_alive_interval(HTTP2_PING_INTERVAL)
        .keep_alive_timeout(HTTP2_PING_TIMEOUT);
    // With upgrades: `/exec`'s WebSocket takes the connection over (the connection's
    // future then ends, and the session lives on in its own task).
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut deadline = Instant::now() + IDLE_TIMEOUT;
    let result = loop {
        tokio::select! {
            result = conn.as_mut() => break result,
            () = tokio::time::sleep_until(deadline) => {
                let idle_until =
                    last_request.lock().map(|last| *last + IDLE_TIMEOUT).unwrap_or(deadline);
                if idle_until <= Instant::now() {
                    debug!("closing an idle local API connection");
                    conn.as_mut().graceful_shutdown();
                    break conn.as_mut().await;
                }
                deadline = idle_until;
            }
        }
    };
    if let Err(e) = result {
        debug!(error = %e, "local API connection ended with an error");
    }
}

/// Logs refused connections at debug, at most once per [`REFUSAL_LOG_INTERVAL`].
#[derive(Debug, Default)]
struct Refusals {
    last_log: Option<Instant>,
    unlogged: u64,
}

impl Refusals {
    fn note(&mut self, remote: SocketAddr, open: usize) {
        self.unlogged += 1;
        let now = Instant::now();
        if self.last_log.is_none_or(|last| now.duration_since(last) >= REFUSAL_LOG_INTERVAL) {
            debug!(
                %remote, refused = self.unlogged, open, max = MAX_CONNECTIONS,
                max_per_ip = MAX_CONNECTIONS_PER_IP,
                "local API connection refused: too many connections"
            );
            self.last_log = Some(now);
            self.unlogged = 0;
        }
    }
}

/// The whole-request timeout ([`REQUEST_TIMEOUT`]), for every request but those that
/// stream (`follow`); a request over it gets 503 and its handler is dropped.
pub async fn request_timeout(request: Request, next: Next) -> Response {
    if super::container_logs::streams(request.uri()) {
        return next.run(request).await;
    }
    let path = request.uri().path().to_owned();
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            debug!(%path, "local API request timed out");
            Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "{path}: the request did not complete within {} s; retry, and send a large body over a faster link",
                    REQUEST_TIMEOUT.as_secs()
                ),
            )
            .into_response()
        }
    }
}
