//! N3: the SPDY upgrade's checks and kubelet's protocol handshake, and the KEP-4006
//! tunnel carrying a port-forward session in WebSocket messages.

use std::sync::Arc;

use axum::body::Body;
use futures::{FutureExt, SinkExt, StreamExt};
use outpost_formats::spdy::frame::Frame;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{Bytes, Message};

use super::*;
use crate::api::streams::{PortDialer, StreamOptions};

fn request(headers: &[(&str, &str)]) -> Request {
    let mut builder =
        axum::http::Request::builder().uri("/exec/default/pod/c?command=true&output=1");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::empty()).unwrap()
}

fn command() -> Endpoint {
    let options = StreamOptions { stdout: true, ..StreamOptions::default() };
    Endpoint::Command {
        options,
        command: Vec::new(),
        start: Box::new(|| async { Err(crate::api::streams::Error::Gone("c".into())) }.boxed()),
    }
}

/// N3: the upgrade is told apart from a WebSocket and from a tunnelled one.
#[test]
fn n3_requests_are_told_apart() {
    let spdy = request(&[("connection", "Upgrade"), ("upgrade", "SPDY/3.1")]);
    assert!(is_spdy(&spdy) && !is_tunneled_spdy(&spdy));
    let websocket =
        request(&[("upgrade", "websocket"), ("sec-websocket-protocol", "v5.channel.k8s.io")]);
    assert!(!is_spdy(&websocket) && !is_tunneled_spdy(&websocket));
    let tunnel = request(&[
        ("upgrade", "websocket"),
        ("sec-websocket-protocol", "v4.channel.k8s.io, SPDY/3.1+portforward.k8s.io"),
    ]);
    assert!(is_tunneled_spdy(&tunnel) && !is_spdy(&tunnel));
}

/// N3: kubelet's handshake: the first of the client's protocols that is served; none
/// asked for is a 400, none served a 403 that lists the served ones.
#[test]
fn n3_protocol_handshake() {
    let served = served(&command());
    assert_eq!(
        served,
        ["v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"]
    );
    let asked = request(&[
        (PROTOCOL_VERSION, "v5.channel.k8s.io, v3.channel.k8s.io"),
        (PROTOCOL_VERSION, "v4.channel.k8s.io"),
    ]);
    assert_eq!(negotiate(&asked, &served).unwrap(), "v3.channel.k8s.io");
    let none = negotiate(&request(&[]), &served).unwrap_err();
    assert_eq!(none.status(), StatusCode::BAD_REQUEST);
    let other =
        negotiate(&request(&[(PROTOCOL_VERSION, "v5.channel.k8s.io")]), &served).unwrap_err();
    assert_eq!(other.status(), StatusCode::FORBIDDEN);
    let accepted: Vec<_> = other.headers().get_all(ACCEPTED_PROTOCOL_VERSIONS).iter().collect();
    assert_eq!(accepted.len(), 4);
    let forward = Endpoint::PortForward { dialer: Arc::new(Nowhere), ports: vec![] };
    assert_eq!(super::served(&forward), [PORT_FORWARD_PROTOCOL]);
}

/// N3: a request that is no upgrade is refused, saying what to send.
#[test]
fn n3_a_plain_request_is_refused() {
    let response = upgrade(request(&[]), command(), Limits::default());
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

struct Nowhere;

impl PortDialer for Nowhere {
    fn pod(&self) -> String {
        "web, uid 1234".to_owned()
    }

    fn dial(
        &self,
        port: u16,
    ) -> futures::future::BoxFuture<'static, std::io::Result<tokio::net::TcpStream>> {
        async move { Err(std::io::Error::other(format!("nothing on {port}"))) }.boxed()
    }
}

/// N3 (KEP-4006): a port-forward session's SPDY bytes in WebSocket binary messages, cut
/// anywhere, are served as over an upgraded connection.
#[tokio::test]
async fn n3_spdy_tunnelled_in_a_websocket() {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let (session, pipe) = tokio::io::duplex(1 << 16);
    let server = WebSocketStream::from_raw_socket(server_end, Role::Server, None).await;
    tokio::spawn(tunnel::bridge(server, pipe));
    let endpoint = Endpoint::PortForward { dialer: Arc::new(Nowhere), ports: vec![] };
    tokio::spawn(super::serve(session, PORT_FORWARD_PROTOCOL, endpoint, Limits::default()));
    let mut socket = WebSocketStream::from_raw_socket(client_end, Role::Client, None).await;

    // The client's frames, written by the codec, sent 5 bytes a message.
    let mut deflater = outpost_formats::spdy::Deflater::new();
    let mut bytes = Vec::new();
    for (id, kind) in [(1, "error"), (3, "data")] {
        let headers = outpost_formats::spdy::Headers::from([
            ("streamtype", kind),
            ("port", "9"),
            ("requestid", "0"),
        ]);
        Frame::syn_stream(id, deflater.deflate(&headers)).encode(&mut bytes);
    }
    for chunk in bytes.chunks(5) {
        socket.send(Message::Binary(Bytes::copy_from_slice(chunk))).await.unwrap();
    }
    let mut decoder = outpost_formats::spdy::Decoder::default();
    let mut error = Vec::new();
    'read: while let Some(Ok(message)) = socket.next().await {
        let Message::Binary(data) = message else { continue };
        decoder.extend(&data);
        while let Some(frame) = decoder.next_frame().unwrap() {
            if let Frame::Data { stream_id: 1, fin, data } = frame {
                error.extend_from_slice(&data);
                if fin {
                    break 'read;
                }
            }
        }
    }
    assert_eq!(
        String::from_utf8_lossy(&error),
        "error forwarding port 9 to pod web, uid 1234: nothing on 9"
    );
}
