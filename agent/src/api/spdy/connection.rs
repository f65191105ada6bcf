//! The server side of one SPDY/3.1 connection, over any byte stream (an upgraded HTTP/1.1
//! connection, or a WebSocket's binary messages): the client opens streams (SYN_STREAM
//! with headers), this side accepts or refuses each (SYN_REPLY, or RST_STREAM
//! `REFUSED_STREAM`) and hands it out; DATA flows both ways, each side ends its half with
//! FIN; RST_STREAM ends a stream at once; client PINGs are answered; GOAWAY ends the
//! connection.
//!
//! Flow control (SPDY/3.1's per-stream and connection windows, 64 KiB to start):
//! received DATA is acknowledged with WINDOW_UPDATE as it is handed on. Sending honours
//! the client's windows once the client shows that it keeps them (it sent a
//! WINDOW_UPDATE or a SETTINGS of `INITIAL_WINDOW_SIZE`): Kubernetes' clients (Go's
//! `moby/spdystream`) never send either and never stop for a window, so waiting on one
//! with them would stall every stream after 64 KiB. Backpressure then is TCP's: a stream
//! whose reader does not keep up stops this side reading the connection.
//!
//! Two tasks run a connection: the reader (frames in, [`Decoder`], [`Inflater`]) and the
//! writer (frames out, [`Deflater`]). [`Connection`] and the [`Stream`]s talk to them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use outpost_formats::spdy::frame::{self, Frame, goaway, rst, settings};
use outpost_formats::spdy::{Decoder, Deflater, Headers, Inflater, headers};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span, debug};

/// SPDY/3.1's window, for each stream and for the connection, before any change.
pub const INITIAL_WINDOW: i64 = 64 * 1024;
/// The most data this side puts in one frame.
pub const MAX_DATA_FRAME: usize = 32 * 1024;
/// Chunks of a stream's data waiting for its reader; the connection is read no further
/// past this.
const INBOUND_CHUNKS: usize = 8;
/// Frames waiting for the writer.
const OUTBOUND_FRAMES: usize = 64;
/// Streams not yet taken by [`Connection::accept`].
const PENDING_STREAMS: usize = 16;
/// How long a closed connection keeps reading what the client still sends, so that its
/// last frames are not lost to a reset socket.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The bounds of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_streams: usize,
    pub idle_timeout: Option<Duration>,
}

/// Why a stream or the connection cannot carry data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the client reset SPDY stream {0}")]
    Reset(u32),
    #[error("SPDY stream {0} is already finished on this side")]
    Finished(u32),
    #[error("the SPDY connection is closed")]
    Closed,
    /// A stream's SYN_STREAM header block cannot be read: the connection ends
    /// (GOAWAY `PROTOCOL_ERROR`).
    #[error("stream {stream}'s headers: {source}")]
    Headers {
        stream: u32,
        #[source]
        source: headers::Error,
    },
    /// A HEADERS frame's block cannot be read: the connection ends.
    #[error("stream {stream}'s HEADERS: {source}")]
    HeadersFrame {
        stream: u32,
        #[source]
        source: headers::Error,
    },
}

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
    shared: Arc<Shared>,
}

/// A connection's state shared by its tasks and handles.
#[derive(Debug)]
struct Shared {
    outbound: mpsc::Sender<Outbound>,
    state: Mutex<State>,
    /// A window grew, or a stream or the connection ended.
    changed: Notify,
    /// The connection ended: the client went, or a side failed.
    closed: CancellationToken,
}

#[derive(Debug)]
struct State {
    streams: HashMap<u32, StreamState>,
    /// The highest stream ID the client opened.
    last_stream: u32,
    /// Whether the client keeps windows (see the module's documentation).
    flow_control: bool,
    initial_window: i64,
    send_window: i64,
    /// DATA bytes handed on and not yet acknowledged with WINDOW_UPDATE.
    unacknowledged: i64,
    going_away: bool,
}

#[derive(Debug)]
struct StreamState {
    /// `None` once the client finished its half.
    inbound: Option<mpsc::Sender<Bytes>>,
    send_window: i64,
    unacknowledged: i64,
    finished: bool,
    reset: bool,
}

/// What the writer task writes.
#[derive(Debug)]
enum Outbound {
    Frame(Frame),
    /// SYN_REPLY, its headers compressed in order by the writer.
    Reply {
        stream_id: u32,
        headers: Headers,
    },
    /// Write what is queued, then end the connection's write side.
    Shutdown,
}

/// The server side of a SPDY/3.1 connection.
#[derive(Debug)]
pub struct Connection {
    shared: Arc<Shared>,
    incoming: mpsc::Receiver<Stream>,
}

impl Connection {
    /// Serves SPDY/3.1 on `io`; `accept` decides which streams the client may open.
    pub fn new<T>(io: T, accept: Accept, _limits: Limits) -> Connection
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read, write) = tokio::io::split(io);
        let (outbound, outbound_rx) = mpsc::channel(OUTBOUND_FRAMES);
        let (incoming_tx, incoming) = mpsc::channel(PENDING_STREAMS);
        let shared = Arc::new(Shared {
            outbound,
            state: Mutex::new(State {
                streams: HashMap::new(),
                last_stream: 0,
                flow_control: false,
                initial_window: INITIAL_WINDOW,
                send_window: INITIAL_WINDOW,
                unacknowledged: 0,
                going_away: false,
            }),
            changed: Notify::new(),
            closed: CancellationToken::new(),
        });
        let span = Span::current();
        tokio::spawn(write_frames(write, outbound_rx, shared.clone()).instrument(span.clone()));
        let reader = Reader { shared: shared.clone(), accept, incoming: incoming_tx };
        tokio::spawn(reader.run(read).instrument(span));
        Connection { shared, incoming }
    }

    /// The next stream the client opened and this side took, `None` once the connection
    /// ended.
    pub async fn accept(&mut self) -> Option<Stream> {
        tokio::select! {
            stream = self.incoming.recv() => stream,
            () = self.shared.closed.cancelled() => None,
        }
    }

    /// A token cancelled when the connection ends.
    pub fn closed(&self) -> CancellationToken {
        self.shared.closed.clone()
    }

    /// Ends the connection: GOAWAY (`OK`, naming the last stream the client opened),
    /// the write side closed once what is queued is written, and what the client still
    /// sends read and dropped for a while, so that its socket is not reset under it.
    pub async fn close(self) {
        let last_good_stream_id = {
            let mut state = lock(&self.shared.state);
            state.going_away = true;
            state.last_stream
        };
        let goaway = Frame::GoAway { last_good_stream_id, status: goaway::OK };
        let _ = self.shared.outbound.send(Outbound::Frame(goaway)).await;
        let _ = self.shared.outbound.send(Outbound::Shutdown).await;
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, self.shared.closed.cancelled()).await;
        self.shared.closed.cancel();
    }
}

impl Sender {
    /// Sends `data` on the stream, in frames of [`MAX_DATA_FRAME`] bytes at most, each
    /// within the client's windows when it keeps them.
    pub async fn send(&self, mut data: &[u8]) -> Result<(), Error> {
        while !data.is_empty() {
            let allowed = self.reserve(data.len()).await?;
            let (now, rest) = data.split_at(allowed);
            let frame = Frame::Data { stream_id: self.id, fin: false, data: now.to_vec() };
            self.shared.send(Outbound::Frame(frame)).await?;
            data = rest;
        }
        Ok(())
    }

    /// Finishes this side of the stream (an empty DATA frame with FIN).
    pub async fn finish(&self) -> Result<(), Error> {
        {
            let mut state = lock(&self.shared.state);
            let stream = state.streams.get_mut(&self.id).ok_or(Error::Closed)?;
            check(self.id, stream)?;
            stream.finished = true;
        }
        let frame = Frame::Data { stream_id: self.id, fin: true, data: Vec::new() };
        self.shared.send(Outbound::Frame(frame)).await?;
        self.shared.forget_if_done(self.id);
        Ok(())
    }

    /// Ends the stream at once (RST_STREAM with `status`).
    pub async fn reset(&self, status: u32) {
        let known = lock(&self.shared.state).streams.remove(&self.id).is_some();
        self.shared.changed.notify_waiters();
        if known {
            let frame = Frame::RstStream { stream_id: self.id, status };
            let _ = self.shared.send(Outbound::Frame(frame)).await;
        }
    }

    /// How many of `wanted` bytes may go now, waiting for the windows when the client
    /// keeps them; the windows are charged.
    async fn reserve(&self, wanted: usize) -> Result<usize, Error> {
        loop {
            let changed = self.shared.changed.notified();
            {
                let mut guard = lock(&self.shared.state);
                let state = &mut *guard;
                if self.shared.closed.is_cancelled() {
                    return Err(Error::Closed);
                }
                let stream = state.streams.get_mut(&self.id).ok_or(Error::Closed)?;
                check(self.id, stream)?;
                let most = wanted.min(MAX_DATA_FRAME);
                if !state.flow_control {
                    return Ok(most);
                }
                let window = stream.send_window.min(state.send_window);
                if window > 0 {
                    let allowed = most.min(window as usize);
                    stream.send_window -= allowed as i64;
                    state.send_window -= allowed as i64;
                    return Ok(allowed);
                }
            }
            tokio::select! {
                () = changed => {}
                () = self.shared.closed.cancelled() => return Err(Error::Closed),
            }
        }
    }
}

fn check(id: u32, stream: &StreamState) -> Result<(), Error> {
    if stream.reset {
        Err(Error::Reset(id))
    } else if stream.finished {
        Err(Error::Finished(id))
    } else {
        Ok(())
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock leaves counters only: go on with them.
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    async fn send(&self, outbound: Outbound) -> Result<(), Error> {
        tokio::select! {
            sent = self.outbound.send(outbound) => sent.map_err(|_| Error::Closed),
            () = self.closed.cancelled() => Err(Error::Closed),
        }
    }

    /// Forgets a stream both sides have finished.
    fn forget_if_done(&self, id: u32) {
        let mut state = lock(&self.state);
        if state.streams.get(&id).is_some_and(|s| s.finished && s.inbound.is_none()) {
            state.streams.remove(&id);
        }
    }
}

/// The reader task's state.
struct Reader {
    shared: Arc<Shared>,
    accept: Accept,
    incoming: mpsc::Sender<Stream>,
}

impl Reader {
    async fn run<R: AsyncRead>(mut self, read: R) {
        let mut read = std::pin::pin!(read);
        let mut decoder = Decoder::default();
        let mut inflater = Inflater::default();
        let mut buffer = vec![0u8; 16 * 1024];
        let ended = loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    if let Err(ended) = self.handle(frame, &mut inflater).await {
                        break ended.to_string();
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    self.go_away(goaway::PROTOCOL_ERROR).await;
                    break format!("the client's frames cannot be read: {e}");
                }
            }
            let read = tokio::select! {
                read = read.read(&mut buffer) => read,
                () = self.shared.closed.cancelled() => break "closed by this side".into(),
            };
            match read {
                Ok(0) => break "the client closed the connection".into(),
                Ok(n) => decoder.extend(&buffer[..n]),
                Err(e) => break format!("reading the connection failed: {e}"),
            }
        };
        debug!(why = %ended, "SPDY connection ended");
        self.shared.closed.cancel();
        self.shared.changed.notify_waiters();
        // Every stream's reader sees the end.
        lock(&self.shared.state).streams.clear();
    }

    /// Acts on one frame; `Err` ends the connection, saying why.
    async fn handle(&mut self, frame: Frame, inflater: &mut Inflater) -> Result<(), Error> {
        match frame {
            Frame::SynStream { stream_id, fin, unidirectional, header_block, .. } => {
                let headers = match inflater.inflate(&header_block) {
                    Ok(headers) => headers,
                    Err(e) => {
                        self.go_away(goaway::PROTOCOL_ERROR).await;
                        return Err(Error::Headers { stream: stream_id, source: e });
                    }
                };
                self.open(stream_id, headers, fin, unidirectional).await;
            }
            Frame::Data { stream_id, fin, data } => self.data(stream_id, fin, data).await,
            Frame::RstStream { stream_id, .. } => {
                if let Some(stream) = lock(&self.shared.state).streams.get_mut(&stream_id) {
                    stream.reset = true;
                    stream.inbound = None;
                }
                self.shared.changed.notify_waiters();
            }
            Frame::Settings { entries, .. } => {
                let mut state = lock(&self.shared.state);
                for entry in entries.iter().filter(|e| e.id == settings::INITIAL_WINDOW_SIZE) {
                    let new = i64::from(entry.value.min(frame::MAX_STREAM_ID));
                    let grown = new - state.initial_window;
                    state.initial_window = new;
                    state.flow_control = true;
                    state.streams.values_mut().for_each(|s| s.send_window += grown);
                }
                drop(state);
                self.shared.changed.notify_waiters();
            }
            Frame::Ping { id } => {
                // Odd IDs are the client's own: echo them. Even ones answer this side's.
                if id % 2 == 1 {
                    let _ = self.shared.send(Outbound::Frame(Frame::Ping { id })).await;
                }
            }
            Frame::GoAway { .. } => {
                lock(&self.shared.state).going_away = true;
            }
            Frame::Headers { stream_id, fin, header_block } => {
                // Read to keep the compression state; Kubernetes' streams carry no more.
                if let Err(source) = inflater.inflate(&header_block) {
                    self.go_away(goaway::PROTOCOL_ERROR).await;
                    return Err(Error::HeadersFrame { stream: stream_id, source });
                }
                if fin {
                    self.remote_fin(stream_id);
                }
            }
            Frame::WindowUpdate { stream_id, delta } => {
                let mut state = lock(&self.shared.state);
                state.flow_control = true;
                if stream_id == 0 {
                    state.send_window += i64::from(delta);
                } else if let Some(stream) = state.streams.get_mut(&stream_id) {
                    stream.send_window += i64::from(delta);
                }
                drop(state);
                self.shared.changed.notify_waiters();
            }
            // SYN_REPLY goes to streams this side opened: it opens none. Unknown frames
            // are ignored, as the draft says.
            Frame::SynReply { .. } | Frame::Unknown { .. } => {}
        }
        Ok(())
    }

    /// A stream the client opens: taken (SYN_REPLY) and handed out, or refused.
    async fn open(&mut self, id: u32, headers: Headers, fin: bool, unidirectional: bool) {
        let refusal = {
            let mut state = lock(&self.shared.state);
            if id.is_multiple_of(2) || id <= state.last_stream {
                Some(rst::PROTOCOL_ERROR)
            } else {
                state.last_stream = id;
                state.going_away.then_some(rst::REFUSED_STREAM)
            }
        };
        let refusal = refusal.or_else(|| match (self.accept)(&headers) {
            Ok(()) => None,
            Err(why) => {
                debug!(stream = id, %why, "SPDY stream refused");
                Some(rst::REFUSED_STREAM)
            }
        });
        if let Some(status) = refusal {
            let _ =
                self.shared.send(Outbound::Frame(Frame::RstStream { stream_id: id, status })).await;
            return;
        }
        let (tx, chunks) = mpsc::channel(INBOUND_CHUNKS);
        {
            let mut state = lock(&self.shared.state);
            let send_window = state.initial_window;
            state.streams.insert(
                id,
                StreamState {
                    inbound: (!fin).then_some(tx),
                    send_window,
                    unacknowledged: 0,
                    finished: unidirectional,
                    reset: false,
                },
            );
        }
        let reply = Outbound::Reply { stream_id: id, headers: Headers::default() };
        let _ = self.shared.send(reply).await;
        let sender = Sender { id, shared: self.shared.clone() };
        let stream = Stream { id, headers, inbound: Receiver { chunks }, sender };
        // Streams nobody takes (the session has all it waits for) are refused.
        if let Err(refused) = self.incoming.try_send(stream) {
            let stream = match refused {
                mpsc::error::TrySendError::Full(s) | mpsc::error::TrySendError::Closed(s) => s,
            };
            stream.sender.reset(rst::REFUSED_STREAM).await;
        }
    }

    /// DATA from the client: handed to the stream's reader, then acknowledged.
    async fn data(&mut self, id: u32, fin: bool, data: Vec<u8>) {
        let len = data.len() as i64;
        let inbound = lock(&self.shared.state).streams.get(&id).map(|s| s.inbound.clone());
        match inbound {
            None => {
                let frame = Frame::RstStream { stream_id: id, status: rst::INVALID_STREAM };
                let _ = self.shared.send(Outbound::Frame(frame)).await;
            }
            Some(None) => {
                let frame = Frame::RstStream { stream_id: id, status: rst::STREAM_ALREADY_CLOSED };
                let _ = self.shared.send(Outbound::Frame(frame)).await;
            }
            Some(Some(tx)) => {
                if !data.is_empty() {
                    // A reader that went away drops what it is sent.
                    let _ = tx.send(Bytes::from(data)).await;
                }
                if fin {
                    self.remote_fin(id);
                }
            }
        }
        self.acknowledge(id, len).await;
    }

    /// Sends WINDOW_UPDATEs once half a window of data has been handed on.
    async fn acknowledge(&mut self, id: u32, len: i64) {
        let mut updates = Vec::new();
        {
            let mut state = lock(&self.shared.state);
            state.unacknowledged += len;
            if state.unacknowledged >= INITIAL_WINDOW / 2 {
                let delta = std::mem::take(&mut state.unacknowledged) as u32;
                updates.push(Frame::WindowUpdate { stream_id: 0, delta });
            }
            let initial = state.initial_window;
            if let Some(stream) = state.streams.get_mut(&id)
                && stream.inbound.is_some()
            {
                stream.unacknowledged += len;
                if stream.unacknowledged >= initial / 2 {
                    let delta = std::mem::take(&mut stream.unacknowledged) as u32;
                    updates.push(Frame::WindowUpdate { stream_id: id, delta });
                }
            }
        }
        for update in updates {
            let _ = self.shared.send(Outbound::Frame(update)).await;
        }
    }

    /// The client finished its half of stream `id`.
    fn remote_fin(&self, id: u32) {
        if let Some(stream) = lock(&self.shared.state).streams.get_mut(&id) {
            stream.inbound = None;
        }
        self.shared.forget_if_done(id);
    }

    async fn go_away(&self, status: u32) {
        let last_good_stream_id = lock(&self.shared.state).last_stream;
        let _ =
            self.shared.send(Outbound::Frame(Frame::GoAway { last_good_stream_id, status })).await;
        let _ = self.shared.send(Outbound::Shutdown).await;
    }
}

/// The writer task: frames out, in order, header blocks compressed in that order.
async fn write_frames<W: AsyncWrite>(
    write: W,
    mut outbound: mpsc::Receiver<Outbound>,
    shared: Arc<Shared>,
) {
    let mut write = std::pin::pin!(write);
    let mut deflater = Deflater::new();
    let mut buffer = Vec::new();
    'frames: while let Some(first) = outbound.recv().await {
        let mut next = Some(first);
        let mut shutdown = false;
        // Write what is queued in one go.
        while let Some(item) = next.take() {
            match item {
                Outbound::Frame(frame) => frame.encode(&mut buffer),
                Outbound::Reply { stream_id, headers } => {
                    let header_block = deflater.deflate(&headers);
                    Frame::SynReply { stream_id, fin: false, header_block }.encode(&mut buffer);
                }
                Outbound::Shutdown => {
                    shutdown = true;
                    break;
                }
            }
            if buffer.len() < 64 * 1024 {
                next = outbound.try_recv().ok();
            }
        }
        if write.write_all(&buffer).await.is_err() || write.flush().await.is_err() {
            break 'frames;
        }
        buffer.clear();
        if shutdown {
            let _ = write.shutdown().await;
            return;
        }
    }
    // The connection cannot be written: it is over.
    shared.closed.cancel();
    shared.changed.notify_waiters();
}

#[cfg(test)]
mod tests;
