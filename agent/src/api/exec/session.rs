//! One exec or attach session over an upgraded WebSocket: starts the command (or
//! attaches to the container), then streams the client's stdin to it and its stdout and
//! stderr back, applies the client's terminal
//! sizes, and ends with the command's status on the error channel and a normal close.
//!
//! The output pumps, the stdin pump and the socket writer are tasks of their own (in
//! `JoinSet`s, so they end with the session); the session's own loop reads the socket,
//! so a resize is applied before any stdin sent after it. Stdin is handed to its pump
//! without waiting: when the pump has no room (the command does not read), the socket is
//! read no further until it has, and the loop still sees the command end. While the
//! command's output streams are open, resizes apply; once they have ended the loop waits
//! for the exit. A client that goes away (its close, a broken connection, or silence
//! past [`CLIENT_SILENCE`] despite pings) ends the session early: the session is
//! dropped, which kills the command and removes it (as containerd's CRI does when an
//! exec stream ends; an attached container keeps running).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::response::Response;
use futures::future::BoxFuture;
use futures::stream::{SplitSink, SplitStream};
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{Instrument, Span, debug, info, warn};

use super::channel::{self, Inbound, Protocol, Status};
use super::upgrade;
use crate::api::streams::{
    Attached, Ended, Endpoint, Input, Output, Process, Start, StreamOptions,
};
use crate::error_chain::describe;

/// How often the agent pings a client.
pub(super) const PING_INTERVAL: Duration = Duration::from_secs(30);
/// A client heard nothing from (not even a pong) for this long is gone (its link dropped).
pub(super) const CLIENT_SILENCE: Duration = Duration::from_secs(90);
/// The most output read at once into one message.
pub(super) const OUTPUT_CHUNK: usize = 32 * 1024;
/// Messages queued for the client; output waits (and the command with it) past this.
pub(super) const FRAMES_IN_FLIGHT: usize = 16;
/// Chunks of stdin queued for the command; the socket is read no further past this.
const STDIN_CHUNKS: usize = 16;
/// How long the last messages (the status, the close) may take to go out.
pub(super) const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

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
    command: Vec<String>,
    span: Span,
) -> Response {
    let Endpoint::Command { options, start } = endpoint else {
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
    upgrade.on_upgrade(move |socket| serve(socket, target).instrument(span))
}

/// Serves one session on `socket` until the command ends or the client goes away.
pub async fn serve(socket: WebSocket, target: Target) {
    let (sink, mut stream) = socket.split();
    let (frames, frames_rx) = mpsc::channel::<Message>(FRAMES_IN_FLIGHT);
    let mut writer = JoinSet::new();
    writer.spawn(write_frames(sink, frames_rx).instrument(Span::current()));
    // kubelet's "connected" signal: an empty message on the lowest channel it writes.
    let options = target.options;
    let first = match (options.stdout, options.stderr) {
        (true, _) => channel::STDOUT,
        (false, true) => channel::STDERR,
        (false, false) => channel::ERROR,
    };
    let _ = frames.send(Message::Binary(Bytes::from(vec![first]))).await;
    let Target { start, command, protocol, .. } = target;
    let status = match start().await {
        Ok(attached) => {
            info!(tty = options.tty, stdin = options.stdin, "stream started");
            drive(attached, &mut stream, &frames, protocol)
                .await
                .map(|ended| status(&command, ended))
        }
        Err(e) => {
            let e = describe(&e);
            warn!(error = %e, "the stream cannot start");
            Some(Status::internal_error(&e))
        }
    };
    if let Some(status) = status {
        let _ = frames.send(Message::Binary(status.to_frame().into())).await;
    }
    drop(frames);
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, writer.join_next()).await;
    // The closing handshake: what the client still sends is read up to its close, so the
    // socket is not closed with input unread (the kernel would reset the connection, and
    // a proxy in between could lose the status on its way).
    let client_closed = async {
        while let Some(Ok(message)) = stream.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, client_closed).await;
}

/// Streams between the client and the command until it ends: how it ended, or `None`
/// when the client went away first (the process is then dropped, which kills an exec's
/// command).
async fn drive(
    mut attached: Attached,
    stream: &mut SplitStream<WebSocket>,
    frames: &mpsc::Sender<Message>,
    protocol: Protocol,
) -> Option<Ended> {
    let mut pumps = JoinSet::new();
    let mut outputs = JoinSet::new();
    for (pipe, channel) in
        [(attached.stdout.take(), channel::STDOUT), (attached.stderr.take(), channel::STDERR)]
    {
        if let Some(pipe) = pipe {
            outputs.spawn(pump_output(pipe, channel, frames.clone()).instrument(Span::current()));
        }
    }
    let mut stdin = attached.stdin.take().map(|pipe| {
        let (tx, rx) = mpsc::channel(STDIN_CHUNKS);
        pumps.spawn(pump_stdin(pipe, rx).instrument(Span::current()));
        tx
    });
    // While the command's output is open, resizes apply; then its exit is awaited.
    let mut session = Some(attached.process);
    let mut exit = None;
    // Stdin the pump has no room for: the socket is read no further until it has.
    let mut pending: Option<Bytes> = None;
    let mut ping = tokio::time::interval_at(Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut heard = Instant::now();
    loop {
        tokio::select! {
            ended = outputs.join_next(), if session.is_some() => {
                if ended.is_none() && let Some(session) = session.take() {
                    exit = Some(session.wait());
                }
            }
            ended = wait(&mut exit), if exit.is_some() => return Some(ended),
            permit = reserve(&stdin), if pending.is_some() => match permit {
                Some(permit) => drop(permit.send(pending.take().unwrap_or_default())),
                None => (pending, stdin) = (None, None),
            },
            message = stream.next(), if pending.is_none() => {
                heard = Instant::now();
                match read(message, protocol) {
                    Read::Gone => break,
                    Read::Stdin(data) => match stdin.as_ref().map(|tx| tx.try_send(data)) {
                        Some(Err(TrySendError::Full(data))) => pending = Some(data),
                        // The command closed its stdin (or ended): the rest goes nowhere.
                        Some(Err(TrySendError::Closed(_))) => stdin = None,
                        Some(Ok(())) | None => {}
                    },
                    Read::CloseStdin => {
                        debug!("the exec client closed stdin");
                        stdin = None;
                    }
                    Read::Resize(sizes) => {
                        let resized = resize(session.as_deref(), sizes);
                        resized.await;
                    }
                    Read::Nothing => {}
                }
            }
            _ = ping.tick() => {
                // Not reading (stdin is backed up), the agent cannot hear the client.
                if pending.is_none() && heard.elapsed() > CLIENT_SILENCE {
                    info!(silent = ?heard.elapsed(), "the stream's client stopped answering");
                    break;
                }
                // A full queue means output is flowing: the client is there if it reads it.
                let _ = frames.try_send(Message::Ping(Bytes::new()));
            }
        }
    }
    info!("the exec client went away; the command is killed (an attached container keeps running)");
    None
}

/// How the command ended, for the error channel.
fn status(command: &[String], ended: Ended) -> Status {
    match ended {
        Ok(code) => {
            info!(exit_code = code, "stream ended");
            Status::exited(command, code)
        }
        Err(e) => {
            let e = describe(&e);
            warn!(error = %e, "the stream cannot learn how the command ended");
            Status::internal_error(&e)
        }
    }
}

/// The command's exit, once it is awaited.
async fn wait<F: Future + Unpin>(exit: &mut Option<F>) -> F::Output {
    match exit {
        Some(exit) => exit.await,
        None => std::future::pending().await,
    }
}

/// Room for one chunk of stdin; `None` when the command no longer takes any. (It holds
/// a sender of its own, so the loop may drop `stdin` meanwhile.)
fn reserve(
    stdin: &Option<mpsc::Sender<Bytes>>,
) -> impl Future<Output = Option<mpsc::OwnedPermit<Bytes>>> + use<> {
    let stdin = stdin.clone();
    async move { stdin?.reserve_owned().await.ok() }
}

/// Applies the client's terminal sizes. (Not an `async fn`: the session's future must
/// not hold a `&dyn Process` across an await, which is not `Send`; only the resizes'
/// futures are held.)
fn resize(process: Option<&dyn Process>, sizes: Vec<channel::TerminalSize>) -> BoxFuture<'_, ()> {
    let Some(process) = process else {
        debug!("a resize after the command's output ended is ignored");
        return async {}.boxed();
    };
    let resizes: Vec<_> = sizes.into_iter().map(|s| process.resize(s.width, s.height)).collect();
    async move {
        for resize in resizes {
            if let Err(e) = resize.await {
                debug!(error = %describe(&e), "the stream cannot resize the terminal");
            }
        }
    }
    .boxed()
}

/// What a client's message asks for.
#[derive(Debug)]
enum Read {
    /// The connection ended (a close, an error, its end).
    Gone,
    Stdin(Bytes),
    CloseStdin,
    Resize(Vec<channel::TerminalSize>),
    Nothing,
}

/// Reads one message from the client (`None`: the connection ended).
fn read(message: Option<Result<Message, axum::Error>>, protocol: Protocol) -> Read {
    let data = match message {
        None | Some(Ok(Message::Close(_))) => return Read::Gone,
        Some(Err(e)) => {
            debug!(error = %e, "the exec client's connection failed");
            return Read::Gone;
        }
        Some(Ok(Message::Ping(_) | Message::Pong(_))) => return Read::Nothing,
        Some(Ok(Message::Binary(data))) => data,
        // The binary protocols take text messages as the same bytes (as kubelet does).
        Some(Ok(Message::Text(text))) => Bytes::copy_from_slice(text.as_str().as_bytes()),
    };
    match channel::parse(protocol, &data) {
        Ok(Inbound::Stdin([])) => Read::Nothing,
        Ok(Inbound::Stdin(_)) => Read::Stdin(data.slice(1..)),
        Ok(Inbound::Close(channel::STDIN)) => Read::CloseStdin,
        Ok(Inbound::Resize(sizes)) => Read::Resize(sizes),
        Ok(Inbound::Close(_) | Inbound::Ignored) => Read::Nothing,
        Err(e) => {
            warn!(error = %e, "a malformed message from the exec client is ignored");
            Read::Nothing
        }
    }
}

/// Copies one of the command's output streams to the client until it ends.
async fn pump_output(mut pipe: Output, channel: u8, frames: mpsc::Sender<Message>) {
    let mut buffer = vec![0; OUTPUT_CHUNK];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) => return,
            Ok(n) => {
                let message = Message::Binary(channel::frame(channel, &buffer[..n]).into());
                if frames.send(message).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                debug!(channel, error = %e, "exec cannot read the command's output");
                return;
            }
        }
    }
}

/// Copies the client's stdin to the command; the pipe closes when the client's side does.
async fn pump_stdin(mut pipe: Input, mut chunks: mpsc::Receiver<Bytes>) {
    while let Some(chunk) = chunks.recv().await {
        if let Err(e) = pipe.write_all(&chunk).await {
            debug!(error = %e, "the command no longer reads its stdin");
            return;
        }
    }
}

/// Sends queued messages to the client, then a normal close once the queue's senders
/// are gone.
pub(super) async fn write_frames(
    mut sink: SplitSink<WebSocket, Message>,
    mut frames: mpsc::Receiver<Message>,
) {
    while let Some(frame) = frames.recv().await {
        if let Err(e) = sink.send(frame).await {
            debug!(error = %e, "the exec client's connection failed");
            return;
        }
    }
    let close = CloseFrame { code: close_code::NORMAL, reason: "".into() };
    let _ = sink.send(Message::Close(Some(close))).await;
    let _ = sink.close().await;
}
