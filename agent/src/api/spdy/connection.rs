//! The server side of one SPDY/3.1 connection, over any byte stream (an upgraded HTTP/1.1
//! connection, or a WebSocket's binary messages): the pump between the socket and
//! [`Session`], the protocol's state (`outpost_formats::spdy::session`: streams, flow
//! control, PING, GOAWAY, the idle timeout, the cap on streams), and the endpoint's
//! [`Stream`]s.
//!
//! One task (`pump`) owns the session and both halves of the socket, in one `select!`: it reads
//! frames (`Decoder`) and feeds them to the session, carries out the session's
//! `Action`s (frames out, streams handed to [`Connection::accept`], data to each
//! stream's [`Receiver`]), and takes the [`Sender`]s' commands from one bounded channel.
//! What it writes is queued and written in batches; a DATA payload is copied once, from
//! the sender's slice into the buffer that goes to the socket.
//!
//! Memory is bounded: a stream holds at most [`INBOUND_CHUNKS`] chunks for its reader
//! (past them the connection is read no further: TCP's backpressure), a sender hands the
//! pump at most [`STREAM_BUFFER`] bytes not yet queued for the socket (data held for the
//! client's windows counts), and the pump takes no more commands, and reads no more
//! frames, while over [`HIGH_WATER`] bytes wait to be written. So a client that never
//! reads pins a fixed amount.
//!
//! Closing (this side's GOAWAY, a protocol error, the idle timeout) writes what is
//! queued, closes the write side, and reads and drops what the client still sends for
//! [`DRAIN_TIMEOUT`], so that its last frames are not lost to a reset socket.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::body::Bytes;
use outpost_formats::spdy::frame::HEADER_LEN;
use outpost_formats::spdy::{Headers, Session};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span, debug};

/// Why a stream or the connection cannot carry data: the session's own reasons.
pub use outpost_formats::spdy::session::{Error, Limits, MAX_DATA_FRAME};

/// Chunks of a stream's data waiting for its reader; the connection is read no further
/// past this.
pub const INBOUND_CHUNKS: usize = 8;
/// Bytes of one stream's data its sender may have handed the pump and not yet queued
/// for the socket.
pub const STREAM_BUFFER: usize = 4 * MAX_DATA_FRAME;
/// Bytes queued for the socket past which the pump takes no more commands or frames.
pub const HIGH_WATER: usize = 256 * 1024;
/// How long a closed connection keeps reading what the client still sends (and writing
/// what is queued), so that its last frames are not lost to a reset socket.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Commands waiting for the pump.
const COMMANDS: usize = 64;
/// Streams not yet taken by [`Connection::accept`].
const PENDING_STREAMS: usize = 16;
/// Bytes read from the socket at once.
const READ_CHUNK: usize = 64 * 1024;
/// Frames shorter than this are copied into a shared write buffer; longer DATA frames
/// go to the socket from their own buffer.
const COALESCE: usize = 4 * 1024;
/// Buffers written in one call.
const MAX_SLICES: usize = 64;

/// Decides whether a stream the client opens is taken, from its headers: `Err` says why
/// not, in the endpoint's own error (the stream is refused with RST_STREAM
/// `REFUSED_STREAM`, the reason logged).
pub type Accept =
    Box<dyn Fn(&Headers) -> Result<(), Box<dyn std::error::Error + Send + Sync>> + Send + Sync>;

/// A stream the client opened: its headers, what it sends, and a [`Sender`] to answer.
#[derive(Debug)]
pub struct Stream {
    pub id: u32,
    pub headers: Headers,
    pub inbound: Receiver,
    pub sender: Sender,
}

/// What the client sends on a stream.
#[derive(Debug)]
pub struct Receiver {
    chunks: mpsc::Receiver<Bytes>,
}

impl Receiver {
    /// The next chunk, `None` once the client finished the stream (FIN), reset it, or
    /// the connection ended.
    pub async fn recv(&mut self) -> Option<Bytes> {
        self.chunks.recv().await
    }
}

/// This side's half of a stream. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Sender {
    id: u32,
    stream: Arc<StreamShared>,
    handles: Arc<Handles>,
}

/// What the handles of a connection share: the way to the pump.
#[derive(Debug)]
struct Handles {
    commands: mpsc::Sender<Command>,
    /// The connection ended: it closed, the client went, or a side failed.
    closed: CancellationToken,
}

/// A stream's state as its senders see it, kept by the pump and the senders.
#[derive(Debug)]
struct StreamShared {
    /// [`OPEN`], [`FINISHED`], [`RESET`], [`LOCAL_RESET`] or [`CLOSED`].
    state: AtomicU8,
    /// Bytes the senders may hand the pump ([`STREAM_BUFFER`]); the pump gives them back
    /// as it queues them for the socket. Closed when the stream ends.
    credit: Semaphore,
}

const OPEN: u8 = 0;
/// This side finished its half.
const FINISHED: u8 = 1;
/// The client reset the stream.
const RESET: u8 = 2;
/// This side reset the stream.
const LOCAL_RESET: u8 = 3;
/// The connection ended.
const CLOSED: u8 = 4;

impl StreamShared {
    fn new(state: u8) -> StreamShared {
        StreamShared { state: AtomicU8::new(state), credit: Semaphore::new(STREAM_BUFFER) }
    }

    /// Ends the stream for its senders, in `state`; those waiting for credit wake up.
    fn end(&self, state: u8) {
        self.state.store(state, Ordering::Release);
        self.credit.close();
    }

    fn error(&self, id: u32) -> Option<Error> {
        match self.state.load(Ordering::Acquire) {
            OPEN => None,
            FINISHED => Some(Error::Finished(id)),
            RESET => Some(Error::Reset(id)),
            _ => Some(Error::Closed),
        }
    }
}

/// What the handles ask of the pump.
#[derive(Debug)]
enum Command {
    /// A DATA frame's bytes: [`HEADER_LEN`] bytes for its header, then the payload.
    Data {
        stream_id: u32,
        frame: Vec<u8>,
    },
    Finish {
        stream_id: u32,
    },
    Reset {
        stream_id: u32,
        status: u32,
    },
    GoAway,
}

/// The server side of a SPDY/3.1 connection.
#[derive(Debug)]
pub struct Connection {
    handles: Arc<Handles>,
    incoming: mpsc::Receiver<Stream>,
    pump: JoinHandle<()>,
}

impl Connection {
    /// Serves SPDY/3.1 on `io`; `accept` decides which streams the client may open,
    /// within `limits`.
    pub fn new<T>(io: T, accept: Accept, limits: Limits) -> Connection
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (commands, commands_rx) = mpsc::channel(COMMANDS);
        let (incoming_tx, incoming) = mpsc::channel(PENDING_STREAMS);
        let closed = CancellationToken::new();
        let handles = Arc::new(Handles { commands, closed: closed.clone() });
        let pump = pump::spawn(io, accept, limits, &handles, incoming_tx, commands_rx);
        Connection { handles, incoming, pump }
    }

    /// The next stream the client opened and this side took, `None` once the connection
    /// ended.
    pub async fn accept(&mut self) -> Option<Stream> {
        tokio::select! {
            stream = self.incoming.recv() => stream,
            () = self.handles.closed.cancelled() => None,
        }
    }

    /// A token cancelled when the connection ends.
    pub fn closed(&self) -> CancellationToken {
        self.handles.closed.clone()
    }

    /// Ends the connection: GOAWAY (`OK`, naming the last stream the client opened),
    /// the write side closed once what is queued is written, and what the client still
    /// sends read and dropped for a while ([`DRAIN_TIMEOUT`]), so that its socket is not
    /// reset under it.
    pub async fn close(self) {
        tokio::select! {
            _ = self.handles.commands.send(Command::GoAway) => {}
            () = self.handles.closed.cancelled() => {}
        }
        let _ = self.pump.await;
    }
}

impl Sender {
    /// Sends `data` on the stream, in frames of [`MAX_DATA_FRAME`] bytes at most, each
    /// within the client's windows when it keeps them. Returns once the data is handed
    /// to the connection.
    pub async fn send(&self, mut data: &[u8]) -> Result<(), Error> {
        while !data.is_empty() {
            self.check()?;
            let (now, rest) = data.split_at(data.len().min(MAX_DATA_FRAME));
            let credit = tokio::select! {
                credit = self.stream.credit.acquire_many(now.len() as u32) => credit,
                () = self.handles.closed.cancelled() => return Err(Error::Closed),
            };
            match credit {
                Ok(credit) => credit.forget(),
                Err(_) => return Err(self.stream.error(self.id).unwrap_or(Error::Closed)),
            }
            let mut frame = Vec::with_capacity(HEADER_LEN + now.len());
            frame.extend_from_slice(&[0; HEADER_LEN]);
            frame.extend_from_slice(now);
            self.command(Command::Data { stream_id: self.id, frame }).await?;
            data = rest;
        }
        Ok(())
    }

    /// Finishes this side of the stream (an empty DATA frame with FIN, after the data
    /// sent before).
    pub async fn finish(&self) -> Result<(), Error> {
        if self.handles.closed.is_cancelled() {
            return Err(Error::Closed);
        }
        if let Err(state) =
            self.stream.state.compare_exchange(OPEN, FINISHED, Ordering::AcqRel, Ordering::Acquire)
        {
            return Err(StreamShared::new(state).error(self.id).unwrap_or(Error::Closed));
        }
        self.command(Command::Finish { stream_id: self.id }).await
    }

    /// Ends the stream at once (RST_STREAM with `status`).
    pub async fn reset(&self, status: u32) {
        let before = self.stream.state.swap(LOCAL_RESET, Ordering::AcqRel);
        self.stream.credit.close();
        if before == OPEN || before == FINISHED {
            let _ = self.command(Command::Reset { stream_id: self.id, status }).await;
        }
    }

    fn check(&self) -> Result<(), Error> {
        if self.handles.closed.is_cancelled() {
            return Err(Error::Closed);
        }
        self.stream.error(self.id).map_or(Ok(()), Err)
    }

    async fn command(&self, command: Command) -> Result<(), Error> {
        tokio::select! {
            sent = self.handles.commands.send(command) => sent.map_err(|_| Error::Closed),
            () = self.handles.closed.cancelled() => Err(Error::Closed),
        }
    }
}

mod pump;

#[cfg(test)]
mod tests;
