//! One exec session over an upgraded WebSocket: starts the command, then streams the
//! client's stdin to it and its stdout and stderr back, applies the client's terminal
//! sizes, and ends with the command's status on the error channel and a normal close.
//!
//! The output pumps, the stdin pump and the socket writer are tasks of their own (in
//! `JoinSet`s, so they end with the session); the session's own loop reads the socket,
//! so a resize is applied before any stdin sent after it. While the command's output
//! streams are open, resizes apply; once they have ended the loop waits for the exit.
//! A client that goes away (its close, a broken connection, or silence past
//! [`CLIENT_SILENCE`] despite pings) ends the session early: its stdin is closed, its
//! output dropped, and the command waited for in the background.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{Instrument, Span, debug, info, warn};

use super::channel::{self, Inbound, Protocol, Status};
use crate::error_chain::describe;
use crate::runtime::exec::{Execs, Request, Session};

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
/// the client went away first.
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
    let mut ping = tokio::time::interval_at(Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut heard = Instant::now();
    let protocol = target.protocol;
    // While the command's output streams are open, resizes apply.
    loop {
        tokio::select! {
            ended = outputs.join_next() => if ended.is_none() { break },
            message = stream.next() => {
                heard = Instant::now();
                if on_message(message, protocol, &mut stdin, Some(&session)).await == Flow::Gone {
                    drop(stdin);
                    abandon(Box::pin(session.wait()));
                    return None;
                }
            }
            _ = ping.tick() => if !keep_alive(frames, heard) {
                drop(stdin);
                abandon(Box::pin(session.wait()));
                return None;
            },
        }
    }
    // The output has ended: wait for the exit, still taking stdin.
    let mut wait = Box::pin(session.wait());
    loop {
        tokio::select! {
            result = &mut wait => {
                return Some(match result {
                    Ok(code) => {
                        info!(exit_code = code, "exec ended");
                        Status::exited(&target.request.command, code)
                    }
                    Err(e) => {
                        warn!(error = %describe(&e), "exec cannot learn how the command ended");
                        Status::internal_error(&describe(&e))
                    }
                });
            }
            message = stream.next() => {
                heard = Instant::now();
                if on_message(message, protocol, &mut stdin, None).await == Flow::Gone {
                    drop(stdin);
                    abandon(wait);
                    return None;
                }
            }
            _ = ping.tick() => if !keep_alive(frames, heard) {
                drop(stdin);
                abandon(wait);
                return None;
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Gone,
}

/// Acts on one message from the client (`None`: the connection ended).
async fn on_message(
    message: Option<Result<Message, axum::Error>>,
    protocol: Protocol,
    stdin: &mut Option<mpsc::Sender<Bytes>>,
    session: Option<&Session>,
) -> Flow {
    let data = match message {
        None => return Flow::Gone,
        Some(Err(e)) => {
            debug!(error = %e, "the exec client's connection failed");
            return Flow::Gone;
        }
        Some(Ok(Message::Close(_))) => return Flow::Gone,
        Some(Ok(Message::Ping(_) | Message::Pong(_))) => return Flow::Continue,
        Some(Ok(Message::Binary(data))) => data,
        // The binary protocols take text messages as the same bytes (as kubelet does).
        Some(Ok(Message::Text(text))) => Bytes::copy_from_slice(text.as_str().as_bytes()),
    };
    match channel::parse(protocol, &data) {
        Ok(Inbound::Stdin(bytes)) => {
            if let Some(tx) = stdin
                && !bytes.is_empty()
                && tx.send(data.slice(1..)).await.is_err()
            {
                // The command closed its stdin (or ended): the rest goes nowhere.
                *stdin = None;
            }
        }
        Ok(Inbound::Close(channel::STDIN)) => {
            debug!("the exec client closed stdin");
            *stdin = None;
        }
        Ok(Inbound::Resize(sizes)) => {
            for size in sizes {
                match session {
                    Some(session) => {
                        if let Err(e) = session.resize(size.width, size.height).await {
                            debug!(error = %describe(&e), "exec cannot resize the terminal");
                        }
                    }
                    None => debug!("a resize after the command's output ended is ignored"),
                }
            }
        }
        Ok(Inbound::Close(_) | Inbound::Ignored) => {}
        Err(e) => warn!(error = %e, "a malformed message from the exec client is ignored"),
    }
    Flow::Continue
}

/// Pings the client; false when it has been silent too long.
fn keep_alive(frames: &mpsc::Sender<Message>, heard: Instant) -> bool {
    if heard.elapsed() > CLIENT_SILENCE {
        info!(silent = ?heard.elapsed(), "the exec client stopped answering; ending the session");
        return false;
    }
    // A full queue means output is flowing: the client is there if it reads it.
    let _ = frames.try_send(Message::Ping(Bytes::new()));
    true
}

/// The client is gone: the command's end is awaited in the background (which reaps it
/// and removes its FIFOs).
fn abandon<F>(wait: std::pin::Pin<Box<F>>)
where
    F: Future<Output = Result<i32, crate::runtime::exec::Error>> + Send + 'static,
{
    info!("the exec client went away; the command's stdin is closed and its output dropped");
    tokio::spawn(
        async move {
            match wait.await {
                Ok(code) => info!(exit_code = code, "exec ended after its client went away"),
                Err(e) => warn!(error = %describe(&e), "exec cannot learn how the command ended"),
            }
        }
        .instrument(Span::current()),
    );
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
