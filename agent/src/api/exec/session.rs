//! One exec session over an upgraded WebSocket: starts the command, then streams the
//! client's stdin to it and its stdout and stderr back, applies the client's terminal
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
//! exec stream ends).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{Instrument, Span, debug, info, warn};

use super::channel::{self, Inbound, Protocol, Status};
use crate::error_chain::describe;
use crate::runtime::exec::{self, Execs, Request, Session};

/// How often the agent pings a client.
const PING_INTERVAL: Duration = Duration::from_secs(30);
/// A client heard nothing from (not even a pong) for this long is gone (its link dropped).
const CLIENT_SILENCE: Duration = Duration::from_secs(90);
/// The most output read at once into one message.
const OUTPUT_CHUNK: usize = 32 * 1024;
/// Messages queued for the client; output waits (and the command with it) past this.
const FRAMES_IN_FLIGHT: usize = 16;
/// Chunks of stdin queued for the command; the socket is read no further past this.
const STDIN_CHUNKS: usize = 16;
/// How long the last messages (the status, the close) may take to go out.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the session runs, and where.
#[derive(Debug)]
pub struct Target {
    pub execs: Execs,
    /// The containerd container ID.
    pub container_id: String,
    pub request: Request,
    pub protocol: Protocol,
}

/// Serves one session on `socket` until the command ends or the client goes away.
pub async fn serve(socket: WebSocket, target: Target) {
    let (sink, mut stream) = socket.split();
    let (frames, frames_rx) = mpsc::channel::<Message>(FRAMES_IN_FLIGHT);
    let mut writer = JoinSet::new();
    writer.spawn(write_frames(sink, frames_rx).instrument(Span::current()));
    // kubelet's "connected" signal: an empty message on the lowest channel it writes.
    let request = &target.request;
    let first = match (request.stdout, request.stderr) {
        (true, _) => channel::STDOUT,
        (false, true) => channel::STDERR,
        (false, false) => channel::ERROR,
    };
    let _ = frames.send(Message::Binary(Bytes::from(vec![first]))).await;
    let status = match target.execs.start(&target.container_id, request).await {
        Ok(session) => {
            info!(tty = request.tty, stdin = request.stdin, "exec started");
            drive(session, &mut stream, &frames, &target).await
        }
        Err(e) => {
            warn!(error = %describe(&e), "exec cannot start the command");
            Some(Status::internal_error(&describe(&e)))
        }
    };
    if let Some(status) = status {
        let _ = frames.send(Message::Binary(status.to_frame().into())).await;
    }
    drop(frames);
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, writer.join_next()).await;
}

/// Streams between the client and the command until it ends: its status, or `None` when
/// the client went away first (the session is then dropped, which kills the command).
async fn drive(
    mut session: Session,
    stream: &mut SplitStream<WebSocket>,
    frames: &mpsc::Sender<Message>,
    target: &Target,
) -> Option<Status> {
    let mut pumps = JoinSet::new();
    let mut outputs = JoinSet::new();
    for (pipe, channel) in
        [(session.stdout.take(), channel::STDOUT), (session.stderr.take(), channel::STDERR)]
    {
        if let Some(pipe) = pipe {
            outputs.spawn(pump_output(pipe, channel, frames.clone()).instrument(Span::current()));
        }
    }
    let mut stdin = session.stdin.take().map(|pipe| {
        let (tx, rx) = mpsc::channel(STDIN_CHUNKS);
        pumps.spawn(pump_stdin(pipe, rx).instrument(Span::current()));
        tx
    });
    // While the command's output is open, resizes apply; then its exit is awaited.
    let mut session = Some(session);
    let mut exit = None;
    // Stdin the pump has no room for: the socket is read no further until it has.
    let mut pending: Option<Bytes> = None;
    let mut ping = tokio::time::interval_at(Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut heard = Instant::now();
    loop {
        tokio::select! {
            ended = outputs.join_next(), if session.is_some() => {
                if ended.is_none() && let Some(session) = session.take() {
                    exit = Some(Box::pin(session.wait()));
                }
            }
            result = wait(&mut exit), if exit.is_some() => return Some(status(target, result)),
            permit = reserve(&stdin), if pending.is_some() => match permit {
                Some(permit) => drop(permit.send(pending.take().unwrap_or_default())),
                None => (pending, stdin) = (None, None),
            },
            message = stream.next(), if pending.is_none() => {
                heard = Instant::now();
                match read(message, target.protocol) {
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
                    Read::Resize(sizes) => resize(session.as_ref(), sizes).await,
                    Read::Nothing => {}
                }
            }
            _ = ping.tick() => {
                // Not reading (stdin is backed up), the agent cannot hear the client.
                if pending.is_none() && heard.elapsed() > CLIENT_SILENCE {
                    info!(silent = ?heard.elapsed(), "the exec client stopped answering");
                    break;
                }
                // A full queue means output is flowing: the client is there if it reads it.
                let _ = frames.try_send(Message::Ping(Bytes::new()));
            }
        }
    }
    info!("the exec client went away; the command is killed");
    None
}

/// How the command ended, for the error channel.
fn status(target: &Target, result: Result<i32, exec::Error>) -> Status {
    match result {
        Ok(code) => {
            info!(exit_code = code, "exec ended");
            Status::exited(&target.request.command, code)
        }
        Err(e) => {
            warn!(error = %describe(&e), "exec cannot learn how the command ended");
            Status::internal_error(&describe(&e))
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

async fn resize(session: Option<&Session>, sizes: Vec<channel::TerminalSize>) {
    let Some(session) = session else {
        debug!("a resize after the command's output ended is ignored");
        return;
    };
    for size in sizes {
        if let Err(e) = session.resize(size.width, size.height).await {
            debug!(error = %describe(&e), "exec cannot resize the terminal");
        }
    }
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
async fn pump_output(mut pipe: pipe::Receiver, channel: u8, frames: mpsc::Sender<Message>) {
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
async fn pump_stdin(mut pipe: pipe::Sender, mut chunks: mpsc::Receiver<Bytes>) {
    while let Some(chunk) = chunks.recv().await {
        if let Err(e) = pipe.write_all(&chunk).await {
            debug!(error = %e, "the command no longer reads its stdin");
            return;
        }
    }
}

/// Sends queued messages to the client, then a normal close once the queue's senders
/// are gone.
async fn write_frames(
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
