//! KEP-4006's tunnel: kubectl 1.31+ forwards ports over a WebSocket whose subprotocol is
//! `SPDY/3.1+portforward.k8s.io`, carrying the bytes of a SPDY/3.1 session in binary
//! messages (a message is any run of the byte stream, not a frame). A byte-copying
//! proxy hands that WebSocket to the node as it is; this module accepts it (the
//! WebSocket handshake by hand, since the endpoint answers in one function) and runs
//! the port-forward session of `portforward` over the messages' bytes.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{Bytes, Message};
use tracing::{Instrument, Span, debug, warn};

use super::PORT_FORWARD_PROTOCOL;
use crate::api::container_logs::status;
use crate::api::streams::{Endpoint, Limits};

/// The WebSocket subprotocol of a tunnelled SPDY port-forward session.
pub const PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// Bytes in flight between the WebSocket and the SPDY session.
const PIPE: usize = 64 * 1024;

/// Whether the request is a WebSocket upgrade asking for [`PROTOCOL`].
pub fn is_tunneled(headers: &HeaderMap) -> bool {
    let websocket = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    websocket && asks_for(headers, PROTOCOL)
}

fn asks_for(headers: &HeaderMap, protocol: &str) -> bool {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == protocol)
}

/// Accepts the WebSocket and serves the port-forward session in it.
pub fn upgrade(mut request: Request, endpoint: Endpoint, limits: Limits) -> Response {
    if !matches!(endpoint, Endpoint::PortForward { .. }) {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "{PROTOCOL} tunnels port-forward only: /exec and /attach take v5.channel.k8s.io or v4.channel.k8s.io"
            ),
        );
    }
    let headers = request.headers();
    let version_13 = headers.get(header::SEC_WEBSOCKET_VERSION).is_some_and(|v| v == "13");
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY).filter(|_| version_13) else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "a WebSocket upgrade needs Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key"
                .to_owned(),
        );
    };
    let accept = derive_accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(&mut request);
    let span = Span::current();
    tokio::spawn(
        async move {
            match on_upgrade.await {
                Ok(upgraded) => {
                    let socket = WebSocketStream::from_raw_socket(
                        TokioIo::new(upgraded),
                        Role::Server,
                        None,
                    )
                    .await;
                    let (session, pipe) = tokio::io::duplex(PIPE);
                    let bridge = tokio::spawn(bridge(socket, pipe).instrument(Span::current()));
                    super::serve(session, PORT_FORWARD_PROTOCOL, endpoint, limits).await;
                    // The session closed its end: the bridge ends with it.
                    let _ = bridge.await;
                }
                Err(e) => warn!(error = %e, "the WebSocket upgrade did not complete"),
            }
        }
        .instrument(span),
    );
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let out = response.headers_mut();
    out.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    out.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    out.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(PROTOCOL));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        out.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// Copies the WebSocket's binary messages into `pipe` and what comes out of `pipe` into
/// binary messages, until either side ends.
pub async fn bridge<S>(socket: WebSocketStream<S>, pipe: tokio::io::DuplexStream)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut messages) = socket.split();
    let (mut from_session, mut to_session) = tokio::io::split(pipe);
    let inbound = async {
        while let Some(message) = messages.next().await {
            match message {
                Ok(Message::Binary(bytes)) => {
                    if to_session.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                Ok(Message::Close(_)) | Err(_) => break,
                // Pings are answered by the socket; text is not SPDY's.
                Ok(_) => {}
            }
        }
        let _ = to_session.shutdown().await;
    };
    let outbound = async {
        let mut buffer = vec![0u8; PIPE];
        loop {
            match from_session.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let message = Message::Binary(Bytes::copy_from_slice(&buffer[..n]));
                    if sink.send(message).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = sink.close().await;
    };
    tokio::join!(inbound, outbound);
    debug!("SPDY tunnel closed");
}
