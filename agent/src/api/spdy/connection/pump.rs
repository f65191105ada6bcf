//! The connection's pump: the one task that owns the [`Session`] and the socket (see
//! the parent module), its state, and the output queue it writes in batches.

use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;

use outpost_formats::spdy::Decoder;
use outpost_formats::spdy::frame::{self, Frame};
use outpost_formats::spdy::session::{Action, Refusal};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::warn;

use super::*;

/// Starts the pump of a connection on `io` on its own task, in the caller's span.
pub(super) fn spawn<T>(
    io: T,
    accept: Accept,
    limits: Limits,
    handles: &Arc<Handles>,
    incoming: mpsc::Sender<Stream>,
    commands: mpsc::Receiver<Command>,
) -> JoinHandle<()>
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let pump = Pump {
        session: Session::new(limits, now()),
        accept,
        decoder: Decoder::default(),
        streams: HashMap::new(),
        incoming: Some(incoming),
        handles: Arc::downgrade(handles),
        closed: handles.closed.clone(),
        out: Output::default(),
        blocked: VecDeque::new(),
        closing: None,
    };
    tokio::spawn(run(io, pump, commands).instrument(Span::current()))
}

/// The clock the session is given: tokio's, which tests pause.
fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// A stream as the pump keeps it.
#[derive(Debug)]
struct Local {
    /// `None` once the client finished its half (or its reader is gone).
    inbound: Option<mpsc::Sender<Bytes>>,
    shared: Arc<StreamShared>,
    /// DATA frames waiting for the client's windows, with the payload bytes of each
    /// already sent.
    parked: VecDeque<(Vec<u8>, usize)>,
    /// A FIN waiting behind `parked`.
    parked_fin: bool,
    /// This side's FIN is sent (or it may send nothing).
    finished: bool,
}

/// The pump's state: everything but the socket and the command channel.
struct Pump {
    session: Session,
    accept: Accept,
    decoder: Decoder,
    streams: HashMap<u32, Local>,
    incoming: Option<mpsc::Sender<Stream>>,
    /// For the senders of new streams; gone once every handle is.
    handles: Weak<Handles>,
    closed: CancellationToken,
    out: Output,
    /// The session's actions on the client's frames not carried out yet, because the
    /// first is data for a stream whose reader is full: frames are read no further.
    blocked: VecDeque<Action>,
    /// Once closing: when the pump gives up writing and draining.
    closing: Option<Instant>,
}

/// What one turn of the pump's `select!` brought.
enum Event {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
    Flushed(std::io::Result<()>),
    Shutdown,
    ReaderReady,
    Command(Option<Command>),
    Timer,
}

/// Runs the connection until it is closed and drained, or the socket fails.
async fn run<T>(io: T, mut pump: Pump, mut commands: mpsc::Receiver<Command>)
where
    T: AsyncRead + AsyncWrite,
{
    let (mut read, mut write) = tokio::io::split(io);
    let mut buffer = vec![0u8; READ_CHUNK];
    let (mut read_done, mut write_done, mut commands_done) = (false, false, false);
    // Bytes written since the last flush: a TLS stream may hold them until flushed.
    let mut unflushed = false;
    loop {
        pump.decode();
        let closing = pump.closing.is_some();
        if closing && (write_done && read_done) {
            break;
        }
        let can_read = !read_done && pump.blocked.is_empty() && pump.out.len < HIGH_WATER;
        let can_write = !write_done && pump.out.len > 0;
        let can_flush = !write_done && pump.out.len == 0 && unflushed;
        let can_shutdown = closing && !write_done && pump.out.len == 0 && !unflushed;
        let can_command = !closing && !commands_done && pump.out.len < HIGH_WATER;
        let reader = pump.blocked_reader();
        let timer = pump.closing.or_else(|| pump.session.deadline().map(Instant::from_std));
        let event = {
            let slices = pump.out.slices();
            // Writing; once all is written, flushing; then when closing, closing the
            // write side.
            let output = async {
                if can_write {
                    Event::Wrote(write.write_vectored(&slices.slices[..slices.count]).await)
                } else if can_flush {
                    Event::Flushed(write.flush().await)
                } else {
                    let _ = write.shutdown().await;
                    Event::Shutdown
                }
            };
            tokio::select! {
                read = read.read(&mut buffer), if can_read => Event::Read(read),
                event = output, if can_write || can_flush || can_shutdown => event,
                _ = reserve(reader.clone()), if reader.is_some() => Event::ReaderReady,
                command = commands.recv(), if can_command => Event::Command(command),
                () = sleep_until(timer), if timer.is_some() => Event::Timer,
            }
        };
        match event {
            Event::Read(Ok(0)) => {
                read_done = true;
                pump.close("the client closed the connection");
            }
            Event::Read(Ok(n)) => {
                if !closing {
                    pump.decoder.extend(&buffer[..n]);
                }
            }
            Event::Read(Err(e)) => {
                read_done = true;
                pump.close(&format!("reading the connection failed: {e}"));
            }
            Event::Wrote(Ok(n)) if n > 0 => {
                pump.out.advance(n);
                unflushed = true;
            }
            Event::Flushed(Ok(())) => unflushed = false,
            Event::Flushed(Err(e)) => {
                pump.close(&format!("writing the connection failed: {e}"));
                break;
            }
            Event::Wrote(Ok(_)) => {
                pump.close("writing the connection failed: it takes no more bytes");
                break;
            }
            Event::Wrote(Err(e)) => {
                pump.close(&format!("writing the connection failed: {e}"));
                break;
            }
            Event::Shutdown => write_done = true,
            // The next turn delivers it.
            Event::ReaderReady => {}
            Event::Command(Some(command)) => pump.command(command),
            Event::Command(None) => {
                // Every handle is gone: nobody can use the connection.
                commands_done = true;
                let actions = pump.session.go_away();
                pump.apply_all(actions);
            }
            Event::Timer if closing => break,
            Event::Timer => {
                let actions = pump.session.on_timer(now());
                pump.apply_all(actions);
            }
        }
    }
    pump.close("the connection ended");
}

/// Waits until `reader` (a stream's inbound channel) has room.
async fn reserve(reader: Option<mpsc::Sender<Bytes>>) {
    match reader {
        Some(reader) => drop(reader.reserve_owned().await),
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Pump {
    /// Carries out what waits for a stream's reader, then the frames read, until one
    /// stream's reader is full or no whole frame is left.
    fn decode(&mut self) {
        self.deliver();
        while self.blocked.is_empty() && self.closing.is_none() {
            match self.decoder.next_frame() {
                Ok(Some(frame)) => {
                    let actions = self.session.on_frame(frame, now());
                    self.blocked.extend(actions);
                    self.deliver();
                }
                Ok(None) => break,
                Err(e) => {
                    let actions = self.session.on_decode_error(&e);
                    self.apply_all(actions);
                }
            }
        }
    }

    /// Carries out the actions of the client's frames in order, up to data for a
    /// stream whose reader is full.
    fn deliver(&mut self) {
        while let Some(action) = self.blocked.pop_front() {
            let Action::Data { stream_id, data } = action else {
                self.apply(action);
                continue;
            };
            let len = data.len();
            let inbound = self.streams.get(&stream_id).and_then(|s| s.inbound.as_ref());
            if let Some(inbound) = inbound
                && let Err(mpsc::error::TrySendError::Full(data)) =
                    inbound.try_send(Bytes::from(data))
            {
                self.blocked.push_front(Action::Data { stream_id, data: data.into() });
                return;
            }
            // Handed on, or nobody reads it: either way it is consumed.
            let actions = self.session.consumed(stream_id, len);
            self.apply_all(actions);
        }
    }

    /// The inbound channel of the stream whose reader holds the pump up.
    fn blocked_reader(&self) -> Option<mpsc::Sender<Bytes>> {
        let Some(Action::Data { stream_id, .. }) = self.blocked.front() else { return None };
        self.streams.get(stream_id)?.inbound.clone()
    }

    fn apply_all(&mut self, actions: Vec<Action>) {
        for action in actions {
            self.apply(action);
        }
    }

    /// Carries out one of the session's actions.
    fn apply(&mut self, action: Action) {
        match action {
            Action::Send(frame) => self.out.frame(&frame),
            Action::Opened { stream_id, headers, fin, unidirectional } => {
                self.opened(stream_id, headers, fin, unidirectional);
            }
            Action::Refused { stream_id, reason } => match reason {
                Refusal::StreamLimit { .. } => {
                    warn!(stream = stream_id, %reason, "SPDY stream refused");
                }
                _ => debug!(stream = stream_id, %reason, "SPDY stream refused"),
            },
            // Data the local side produced (none does) would go the client's frames' way.
            Action::Data { .. } => {
                self.blocked.push_back(action);
                self.deliver();
            }
            Action::RemoteFinished { stream_id } => {
                if let Some(local) = self.streams.get_mut(&stream_id) {
                    local.inbound = None;
                }
                self.forget_if_done(stream_id);
            }
            Action::Reset { stream_id } => {
                if let Some(local) = self.streams.remove(&stream_id) {
                    local.shared.end(RESET);
                }
            }
            Action::Writable => self.retry_parked(),
            Action::Close { reason } => self.close(&reason),
        }
    }

    /// A stream the client opened: the endpoint's `accept` decides, then it is handed
    /// out.
    fn opened(&mut self, id: u32, headers: Headers, fin: bool, unidirectional: bool) {
        if let Err(why) = (self.accept)(&headers) {
            debug!(stream = id, %why, "SPDY stream refused");
            let actions = self.session.refuse(id);
            return self.apply_all(actions);
        }
        // Streams nobody takes (the endpoint has all it waits for) are refused.
        let permit = self.incoming.clone().and_then(|incoming| incoming.try_reserve_owned().ok());
        let (Some(permit), Some(handles)) = (permit, self.handles.upgrade()) else {
            debug!(stream = id, "SPDY stream refused: nobody takes it");
            let actions = self.session.refuse(id);
            return self.apply_all(actions);
        };
        let actions = self.session.accept(id);
        self.apply_all(actions);
        let (tx, chunks) = mpsc::channel(INBOUND_CHUNKS);
        let shared = Arc::new(StreamShared::new(if unidirectional { FINISHED } else { OPEN }));
        let local = Local {
            inbound: (!fin).then_some(tx),
            shared: shared.clone(),
            parked: VecDeque::new(),
            parked_fin: false,
            finished: unidirectional,
        };
        self.streams.insert(id, local);
        self.forget_if_done(id);
        let sender = Sender { id, stream: shared, handles };
        permit.send(Stream { id, headers, inbound: Receiver { chunks }, sender });
    }

    /// A sender's command.
    fn command(&mut self, command: Command) {
        match command {
            Command::Data { stream_id, frame } => {
                let Some(local) = self.streams.get_mut(&stream_id) else { return };
                if local.parked.is_empty() {
                    // What the windows hold back is parked.
                    send_data(&mut self.session, &mut self.out, stream_id, local, frame, 0);
                } else {
                    local.parked.push_back((frame, 0));
                }
            }
            Command::Finish { stream_id } => {
                let Some(local) = self.streams.get_mut(&stream_id) else { return };
                if local.parked.is_empty() {
                    self.finish(stream_id);
                } else {
                    local.parked_fin = true;
                }
            }
            Command::Reset { stream_id, status } => {
                if let Some(local) = self.streams.remove(&stream_id) {
                    local.shared.end(LOCAL_RESET);
                }
                let actions = self.session.reset(stream_id, status);
                self.apply_all(actions);
            }
            Command::GoAway => {
                let actions = self.session.go_away();
                self.apply_all(actions);
            }
        }
    }

    /// Sends this side's FIN on `stream_id`.
    fn finish(&mut self, stream_id: u32) {
        if let Ok(actions) = self.session.finish(stream_id) {
            self.apply_all(actions);
        }
        if let Some(local) = self.streams.get_mut(&stream_id) {
            local.finished = true;
            local.parked_fin = false;
        }
        self.forget_if_done(stream_id);
    }

    /// The client's windows grew: data held for them goes, as far as they allow.
    fn retry_parked(&mut self) {
        let waiting: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, l)| !l.parked.is_empty() || l.parked_fin)
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            let Some(local) = self.streams.get_mut(&id) else { continue };
            while let Some((frame, sent)) = local.parked.pop_front() {
                if !send_data(&mut self.session, &mut self.out, id, local, frame, sent) {
                    break;
                }
            }
            if local.parked.is_empty() && local.parked_fin {
                self.finish(id);
            }
        }
    }

    /// Forgets a stream both sides have finished.
    fn forget_if_done(&mut self, stream_id: u32) {
        if self.streams.get(&stream_id).is_some_and(|l| l.inbound.is_none() && l.finished) {
            self.streams.remove(&stream_id);
        }
    }

    /// The connection ends: every stream with it; what is queued is still written, and
    /// the client's bytes drained, until [`DRAIN_TIMEOUT`].
    fn close(&mut self, reason: &str) {
        if self.closing.is_some() {
            return;
        }
        debug!(why = reason, "SPDY connection ended");
        self.closing = Some(Instant::now() + DRAIN_TIMEOUT);
        self.closed.cancel();
        self.incoming = None;
        self.blocked.clear();
        for (_, local) in self.streams.drain() {
            local.shared.end(CLOSED);
        }
    }
}

/// Queues a DATA frame of `stream_id` (its payload from `sent` on) as far as the
/// client's windows allow; `false` when the rest is parked for them.
fn send_data(
    session: &mut Session,
    out: &mut Output,
    stream_id: u32,
    local: &mut Local,
    mut frame: Vec<u8>,
    mut sent: usize,
) -> bool {
    let total = frame.len() - HEADER_LEN;
    while sent < total {
        let rest = total - sent;
        let n = match session.reserve(stream_id, rest) {
            Ok(0) => {
                local.parked.push_front((frame, sent));
                return false;
            }
            Ok(n) => n,
            Err(e) => {
                // Finished or reset meanwhile: the data has nowhere to go.
                debug!(stream = stream_id, error = %e, "SPDY data dropped");
                local.shared.credit.add_permits(rest);
                return true;
            }
        };
        session.data_sent(now());
        if sent == 0 && n == total {
            frame[..HEADER_LEN].copy_from_slice(&frame::data_header(stream_id, false, n));
            out.data(frame);
            local.shared.credit.add_permits(n);
            return true;
        }
        let start = HEADER_LEN + sent;
        let mut part = Vec::with_capacity(HEADER_LEN + n);
        part.extend_from_slice(&frame::data_header(stream_id, false, n));
        part.extend_from_slice(&frame[start..start + n]);
        out.data(part);
        local.shared.credit.add_permits(n);
        sent += n;
    }
    true
}

/// Bytes waiting for the socket, in order: short frames coalesced in shared buffers,
/// long DATA frames in their own.
#[derive(Debug, Default)]
struct Output {
    chunks: VecDeque<Vec<u8>>,
    /// Bytes of the first chunk already written.
    written: usize,
    /// Bytes not yet written.
    len: usize,
    /// Whether the last chunk is a shared buffer more frames may go in.
    tail_open: bool,
}

/// Up to [`MAX_SLICES`] of the output's buffers, for one vectored write.
struct Slices<'a> {
    slices: [IoSlice<'a>; MAX_SLICES],
    count: usize,
}

impl Output {
    /// The shared buffer at the end, made when there is none.
    fn tail(&mut self) -> &mut Vec<u8> {
        if !self.tail_open || self.chunks.is_empty() {
            self.chunks.push_back(Vec::with_capacity(16 * 1024));
            self.tail_open = true;
        }
        // Not empty: a buffer was just pushed if there was none.
        let last = self.chunks.len() - 1;
        &mut self.chunks[last]
    }

    fn frame(&mut self, frame: &Frame) {
        let tail = self.tail();
        let before = tail.len();
        frame.encode(tail);
        let added = tail.len() - before;
        self.len += added;
        if self.chunks.back().is_some_and(|c| c.len() >= READ_CHUNK) {
            self.tail_open = false;
        }
    }

    /// A DATA frame's bytes, whole.
    fn data(&mut self, frame: Vec<u8>) {
        self.len += frame.len();
        if frame.len() < COALESCE {
            self.tail().extend_from_slice(&frame);
        } else {
            self.chunks.push_back(frame);
            self.tail_open = false;
        }
    }

    fn slices(&self) -> Slices<'_> {
        let mut slices = Slices { slices: [IoSlice::new(&[]); MAX_SLICES], count: 0 };
        for (i, chunk) in self.chunks.iter().take(MAX_SLICES).enumerate() {
            let from = if i == 0 { self.written } else { 0 };
            slices.slices[i] = IoSlice::new(&chunk[from..]);
            slices.count = i + 1;
        }
        slices
    }

    /// `n` bytes were written.
    fn advance(&mut self, mut n: usize) {
        self.len = self.len.saturating_sub(n);
        while let Some(front) = self.chunks.front() {
            let left = front.len() - self.written;
            if n < left {
                self.written += n;
                return;
            }
            n -= left;
            self.written = 0;
            self.chunks.pop_front();
            if self.chunks.is_empty() {
                self.tail_open = false;
            }
        }
    }
}
