//! One exec or attach session over an upgraded WebSocket (`v5.channel.k8s.io`,
//! `v4.channel.k8s.io`): the channels as the remote command's streams (stdin and resize
//! in, stdout and stderr out), kubelet's "connected" message first, the session
//! ([`remote_command`]), then how the command ended on the error channel as a JSON
//! `metav1.Status`, and a normal close. A client that goes away ends the session early,
//! without a status.

use axum::body::Bytes;
use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::response::Response;
use tracing::{Instrument, Span, info};

use super::channel::{self, Inbound, Protocol};
use super::upgrade;
use super::websocket::{self, Route};
use crate::api::streams::logical::Outbound;
use crate::api::streams::remote_command::{self, Streams};
use crate::api::streams::status::Encoding;
use crate::api::streams::{Endpoint, Limits, Start, StreamOptions};

/// The inbound streams, by their index in [`websocket::split`]'s.
const STDIN: usize = 0;
const RESIZE: usize = 1;

/// What the session runs.
pub struct Target {
    pub options: StreamOptions,
    pub start: Start,
    /// The command, for the status (empty for an attach).
    pub command: Vec<String>,
    pub protocol: Protocol,
}

/// Completes the WebSocket upgrade for an exec or attach `endpoint` and serves the
/// session on the upgraded connection's own task.
pub(super) fn upgrade(
    upgrade: WebSocketUpgrade,
    endpoint: Endpoint,
    limits: Limits,
    span: Span,
) -> Response {
    let Endpoint::Command { options, command, start } = endpoint else {
        return crate::api::container_logs::status(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            "a port-forward endpoint was given to an exec session".to_owned(),
        );
    };
    let upgrade = upgrade.protocols(channel::PROTOCOLS);
    let protocol = match upgrade::protocol(&upgrade, &channel::PROTOCOLS, false) {
        Ok(name) => name.as_deref().and_then(Protocol::from_name).unwrap_or(Protocol::V4),
        Err(refusal) => return axum::response::IntoResponse::into_response(refusal),
    };
    span.record("protocol", protocol.name());
    let target = Target { options, start, command, protocol };
    upgrade.on_upgrade(move |socket| serve(socket, target, limits).instrument(span))
}

/// Serves one session on `socket` until the command ends or the client goes away.
pub async fn serve(socket: WebSocket, target: Target, limits: Limits) {
    let Target { options, start, command, protocol } = target;
    let route = move |message: Bytes| route(protocol, message);
    let (client, inbound) = websocket::split(socket, 2, route, limits.idle_timeout);
    let mut inbound = inbound.into_iter();
    let (stdin, resize) = (inbound.next(), inbound.next());
    // kubelet's "connected" signal: an empty message on the lowest channel it writes.
    let first = match (options.stdout, options.stderr) {
        (true, _) => channel::STDOUT,
        (false, true) => channel::STDERR,
        (false, false) => channel::ERROR,
    };
    client.send(first, &[]).await;
    let outbound = |asked: bool, channel| {
        asked.then(|| Box::new(client.channel(channel)) as Box<dyn Outbound>)
    };
    let streams = Streams {
        stdin: stdin.filter(|_| options.stdin).map(|s| Box::new(s) as _),
        stdout: outbound(options.stdout, channel::STDOUT),
        stderr: outbound(options.stderr, channel::STDERR),
        resize: resize.filter(|_| options.tty).map(|s| Box::new(s) as _),
    };
    if let Some(ended) = remote_command::run(streams, start, client.gone.clone()).await {
        info!(?ended, "stream ended");
        if let Some(status) = Encoding::Json.status_bytes(&command, &ended) {
            client.send(channel::ERROR, &status).await;
        }
    }
    client.close().await;
}

/// Where a client's message goes: stdin and resize to their streams, `v5`'s close of
/// stdin to its end.
fn route(protocol: Protocol, message: Bytes) -> Route {
    match channel::parse(protocol, &message) {
        Ok(Inbound::Stdin(_)) => Route::To(STDIN, message.slice(1..)),
        Ok(Inbound::Resize(_)) => Route::To(RESIZE, message.slice(1..)),
        Ok(Inbound::Close(channel::STDIN)) => Route::End(STDIN),
        Ok(Inbound::Close(_) | Inbound::Ignored) => Route::Nowhere,
        Err(e) => {
            tracing::warn!(error = %e, "a malformed message from the stream's client is ignored");
            Route::Nowhere
        }
    }
}
