//! The WebSocket side of the streaming sessions: one upgraded socket split into the
//! `channel.k8s.io` channels as logical streams. A reader task demultiplexes the client's
//! messages (by a [`Route`] the session gives) into one bounded queue per inbound
//! stream, so that a stream whose reader does not keep up stops the socket being read
//! (backpressure is TCP's); a writer task sends what the outbound [`Channel`]s queue.
//!
//! The reader also keeps the client honest: it pings every [`PING_INTERVAL`], and a
//! client heard nothing from (not even a pong) for [`CLIENT_SILENCE`] is gone (its link
//! dropped); one that sends nothing but pongs for the streaming idle timeout (kubelet's
//! `streamingConnectionIdleTimeout`, which kubelet applies as the socket's read
//! deadline) is closed too. Either, or the client's close, cancels [`Client::gone`].

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures::future::BoxFuture;
use futures::stream::{SplitSink, SplitStream};
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span, debug, info};

use super::channel;
use crate::api::streams::logical::{Closed, Outbound};

/// How often the agent pings a client.
const PING_INTERVAL: Duration = Duration::from_secs(30);
/// A client heard nothing from (not even a pong) for this long is gone.
const CLIENT_SILENCE: Duration = Duration::from_secs(90);
/// Messages queued for the client; output waits (and the process with it) past this.
const FRAMES_IN_FLIGHT: usize = 16;
/// Chunks queued for one inbound stream; the socket is read no further past this.
const CHUNKS_IN_FLIGHT: usize = 16;
/// How long the last messages (the status, the close) and the client's close may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a client's message goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// To inbound stream `index`, these bytes (the message without its channel byte).
    To(usize, Bytes),
    /// Inbound stream `index` ended (`v5`'s close message).
    End(usize),
    /// Nowhere (an empty message, a channel the client does not write).
    Nowhere,
}

/// One upgraded socket's client.
pub struct Client {
    /// Cancelled when the client goes away (its close, a broken connection, silence).
    pub gone: CancellationToken,
    /// Cancelled when the session is over: the reader stops pinging and routing.
    done: CancellationToken,
    frames: mpsc::Sender<Message>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

/// Splits `socket` into `inbound` streams routed by `route`, and the client's outbound
/// side. `idle` is the streaming idle timeout.
pub fn split(
    socket: WebSocket,
    inbound: usize,
    route: impl Fn(Bytes) -> Route + Send + 'static,
    idle: Duration,
) -> (Client, Vec<mpsc::Receiver<Bytes>>) {
    let (sink, stream) = socket.split();
    let (frames, frames_rx) = mpsc::channel(FRAMES_IN_FLIGHT);
    let (senders, receivers) = (0..inbound)
        .map(|_| mpsc::channel(CHUNKS_IN_FLIGHT))
        .map(|(tx, rx)| (Some(tx), rx))
        .unzip();
    let (gone, done) = (CancellationToken::new(), CancellationToken::new());
    let span = Span::current();
    let writer = tokio::spawn(write_frames(sink, frames_rx).instrument(span.clone()));
    let reader = Reader { route: Box::new(route), senders, gone: gone.clone(), idle };
    let reader = tokio::spawn(reader.run(stream, frames.clone(), done.clone()).instrument(span));
    (Client { gone, done, frames, reader, writer }, receivers)
}

impl Client {
    /// The outbound stream of `channel`.
    pub fn channel(&self, channel: u8) -> Channel {
        Channel { channel, frames: self.frames.clone() }
    }

    /// Sends one message on `channel` (the first one of a session, the status).
    pub async fn send(&self, channel: u8, data: &[u8]) {
        let _ = self.frames.send(Message::Binary(channel::frame(channel, data).into())).await;
    }

    /// Ends the session: what is queued is written, then a normal close; what the client
    /// still sends is read up to its own close, so the socket is not closed with input
    /// unread (the kernel would reset the connection, and a proxy in between could lose
    /// the last messages on their way).
    pub async fn close(self) {
        let Client { done, frames, mut reader, mut writer, .. } = self;
        done.cancel();
        drop(frames);
        if tokio::time::timeout(CLOSE_TIMEOUT, &mut writer).await.is_err() {
            writer.abort();
        }
        if tokio::time::timeout(CLOSE_TIMEOUT, &mut reader).await.is_err() {
            reader.abort();
        }
    }
}

/// An outbound stream: each chunk one binary message on its channel. (A channel has no
/// end of its own: the session's close ends them all.)
#[derive(Debug, Clone)]
pub struct Channel {
    channel: u8,
    frames: mpsc::Sender<Message>,
}

impl Outbound for Channel {
    fn send<'a>(&'a self, data: &'a [u8]) -> BoxFuture<'a, Result<(), Closed>> {
        let message = Message::Binary(channel::frame(self.channel, data).into());
        async move { self.frames.send(message).await.map_err(|_| Closed) }.boxed()
    }

    fn finish(&self) -> BoxFuture<'_, ()> {
        async {}.boxed()
    }
}

/// The reader task's state.
struct Reader {
    route: Box<dyn Fn(Bytes) -> Route + Send>,
    /// `None` once that stream ended.
    senders: Vec<Option<mpsc::Sender<Bytes>>>,
    gone: CancellationToken,
    idle: Duration,
}

impl Reader {
    async fn run(
        mut self,
        mut stream: SplitStream<WebSocket>,
        frames: mpsc::Sender<Message>,
        done: CancellationToken,
    ) {
        let mut frames = Some(frames);
        let mut ping = tokio::time::interval_at(Instant::now() + PING_INTERVAL, PING_INTERVAL);
        let (mut heard, mut data) = (Instant::now(), Instant::now());
        loop {
            tokio::select! {
                message = stream.next() => {
                    heard = Instant::now();
                    let bytes = match message {
                        None | Some(Ok(Message::Close(_))) => break,
                        Some(Err(e)) => {
                            debug!(error = %e, "the stream client's connection failed");
                            break;
                        }
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                        Some(Ok(Message::Binary(bytes))) => bytes,
                        // The binary protocols take text messages as the same bytes (as
                        // kubelet does).
                        Some(Ok(Message::Text(text))) => Bytes::copy_from_slice(text.as_str().as_bytes()),
                    };
                    data = Instant::now();
                    if frames.is_some() {
                        self.deliver(bytes).await;
                    }
                }
                _ = ping.tick(), if frames.is_some() => {
                    if heard.elapsed() > CLIENT_SILENCE {
                        info!(silent = ?heard.elapsed(), "the stream's client stopped answering");
                        break;
                    }
                    if data.elapsed() >= self.idle {
                        info!(idle = ?data.elapsed(), "the stream's client sent nothing for the streaming idle timeout: closed");
                        break;
                    }
                    // A full queue means output is flowing: the client is there if it reads it.
                    let _ = frames.as_ref().map(|frames| frames.try_send(Message::Ping(Bytes::new())));
                }
                // The session is over: its close is written once nothing else holds the
                // queue, and the client's close is read.
                () = done.cancelled(), if frames.is_some() => {
                    frames = None;
                    self.senders.clear();
                }
            }
        }
        self.gone.cancel();
    }

    /// Hands a message to its stream, waiting while that stream's queue is full.
    async fn deliver(&mut self, message: Bytes) {
        match (self.route)(message) {
            Route::To(index, bytes) => {
                let Some(Some(sender)) = self.senders.get(index) else { return };
                if !bytes.is_empty() && sender.send(bytes).await.is_err() {
                    // Its reader is gone: what follows goes nowhere.
                    self.senders[index] = None;
                }
            }
            Route::End(index) => {
                if let Some(sender) = self.senders.get_mut(index) {
                    *sender = None;
                }
            }
            Route::Nowhere => {}
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
            debug!(error = %e, "the stream client's connection failed");
            return;
        }
    }
    let close = CloseFrame { code: close_code::NORMAL, reason: "".into() };
    let _ = sink.send(Message::Close(Some(close))).await;
    let _ = sink.close().await;
}
