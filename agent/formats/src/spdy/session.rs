//! The server side of one SPDY/3.1 connection as plain state: no IO, no clock reads
//! (time comes in as an [`Instant`]). The connection's pump (the agent's
//! `api::spdy::connection`) feeds it the client's frames and this side's operations, and
//! carries out the [`Action`]s each returns, in order.
//!
//! - Streams: the client opens them (SYN_STREAM); a stream ID that is even or not above
//!   the last one is reset with `PROTOCOL_ERROR`; past [`Limits::max_streams`] open
//!   streams, or once the connection is going away, a stream is refused
//!   (`REFUSED_STREAM`, [`Action::Refused`] says why). Otherwise the endpoint decides
//!   ([`Action::Opened`], then [`Session::accept`] or [`Session::refuse`]). DATA on a
//!   stream never opened is `INVALID_STREAM`, on one the client finished
//!   `STREAM_ALREADY_CLOSED`. A stream is forgotten once both halves are finished, or
//!   either side reset it.
//! - Flow control (SPDY/3.1's windows per stream and for the connection, 64 KiB to
//!   start): data this side sends is charged to the client's windows always, and held to
//!   them once the client shows that it keeps them (a WINDOW_UPDATE, or SETTINGS
//!   `INITIAL_WINDOW_SIZE`): Kubernetes' clients (Go's `moby/spdystream`) send neither
//!   and never stop for a window, so waiting on one with them would stall every stream
//!   after 64 KiB. Data the client sends is acknowledged (WINDOW_UPDATE) once half a
//!   window of it has been [`Session::consumed`].
//! - The client's PINGs (odd IDs) are echoed; its GOAWAY stops new streams; this side's
//!   [`Session::go_away`] names the last stream the client opened.
//! - Idle timeout, as kubelet's `streamingConnectionIdleTimeout` (moby/spdystream's
//!   idle-aware framer): restarted by every frame read and every DATA frame written; when
//!   it fires every open stream is reset (`CANCEL`) and the connection goes away.
//!
//! After [`Action::Close`] the session emits nothing more.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::frame::{self, Frame, goaway, rst, settings};
use super::headers::{Deflater, Headers, Inflater};

/// SPDY/3.1's window, for each stream and for the connection, before any change.
pub const INITIAL_WINDOW: i64 = 64 * 1024;
/// The most data [`Session::reserve`] lets go in one frame.
pub const MAX_DATA_FRAME: usize = 32 * 1024;
/// kubelet's default `streamingConnectionIdleTimeout`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(4 * 60 * 60);
/// The default cap on a connection's open streams. kubectl opens at most 5 for a remote
/// command and 2 per forwarded connection: 128 leaves room for 64 connections forwarded
/// at once on one session, which no real client reaches, while a client that opens
/// streams and never finishes them pins a bounded amount of memory.
pub const DEFAULT_MAX_STREAMS: usize = 128;

/// What one connection may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Streams open at once (opened by the client and not yet ended on both sides); a
    /// SYN_STREAM past them is refused.
    pub max_streams: usize,
    /// How long the connection may carry no frame in and no DATA out; `None`: forever.
    pub idle_timeout: Option<Duration>,
}

impl Default for Limits {
    /// kubelet's: [`DEFAULT_MAX_STREAMS`] and [`DEFAULT_IDLE_TIMEOUT`].
    fn default() -> Limits {
        Limits { max_streams: DEFAULT_MAX_STREAMS, idle_timeout: Some(DEFAULT_IDLE_TIMEOUT) }
    }
}

/// What the pump does, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write this frame.
    Send(Frame),
    /// The client opened a stream: the endpoint decides ([`Session::accept`] or
    /// [`Session::refuse`]). `fin`: the client sends nothing on it; `unidirectional`:
    /// this side may send nothing on it.
    Opened { stream_id: u32, headers: Headers, fin: bool, unidirectional: bool },
    /// The session refused a stream the client opened (the RST_STREAM is sent before):
    /// for the pump's log.
    Refused { stream_id: u32, reason: Refusal },
    /// Hand this to the stream's reader; call [`Session::consumed`] once it took it.
    Data { stream_id: u32, data: Vec<u8> },
    /// The client sends no more on the stream (FIN, reset, or the connection's end):
    /// the reader's end.
    RemoteFinished { stream_id: u32 },
    /// The stream was reset by the client (or the idle timeout): this side can send
    /// nothing more on it.
    Reset { stream_id: u32 },
    /// The client's windows grew: data waiting for them may go now.
    Writable,
    /// Write what is queued, then end the connection.
    Close { reason: String },
}

/// Why the session refused a stream the client opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "the connection already has {limit} open streams, its limit: a client finishes or resets streams before it opens more"
    )]
    StreamLimit { limit: usize },
    #[error("the connection is going away: open the stream on a new connection")]
    GoingAway,
    #[error(
        "stream ID {stream_id} is even or not above the last one the client opened ({last}): a client's stream IDs are odd and increasing"
    )]
    StreamId { stream_id: u32, last: u32 },
}

/// Why this side cannot send on a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the client reset SPDY stream {0}")]
    Reset(u32),
    #[error("SPDY stream {0} is already finished on this side")]
    Finished(u32),
    #[error("SPDY stream {0} is not open")]
    Unknown(u32),
    #[error("the SPDY connection is closed")]
    Closed,
}

/// One open stream.
#[derive(Debug)]
struct Stream {
    /// Taken by the endpoint (SYN_REPLY sent).
    accepted: bool,
    /// The client may still send on it.
    receiving: bool,
    /// This side finished its half (or may not send: unidirectional).
    finished: bool,
    /// The client's window for this stream.
    send_window: i64,
    /// Data consumed and not yet acknowledged with WINDOW_UPDATE.
    unacknowledged: i64,
}

/// The server side of one SPDY/3.1 connection.
#[derive(Debug)]
pub struct Session {
    limits: Limits,
    streams: BTreeMap<u32, Stream>,
    /// The highest stream ID the client opened.
    last_stream: u32,
    /// Whether the client keeps windows (see the module's documentation).
    flow_control: bool,
    /// The client's initial window for each stream.
    initial_window: i64,
    /// The client's window for the connection.
    send_window: i64,
    /// Data consumed on the connection and not yet acknowledged.
    unacknowledged: i64,
    going_away: bool,
    closed: bool,
    /// The last frame read or DATA frame written.
    active: Instant,
    inflater: Inflater,
    deflater: Deflater,
}

impl Session {
    /// A connection that starts at `now`.
    pub fn new(limits: Limits, now: Instant) -> Session {
        Session {
            limits,
            streams: BTreeMap::new(),
            last_stream: 0,
            flow_control: false,
            initial_window: INITIAL_WINDOW,
            send_window: INITIAL_WINDOW,
            unacknowledged: 0,
            going_away: false,
            closed: false,
            active: now,
            inflater: Inflater::default(),
            deflater: Deflater::new(),
        }
    }

    /// Streams open: opened by the client and not ended on both sides.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether the session has emitted [`Action::Close`].
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Whether the client keeps windows (it sent WINDOW_UPDATE or SETTINGS
    /// `INITIAL_WINDOW_SIZE`), so that [`Session::reserve`] holds data to them.
    pub fn flow_control(&self) -> bool {
        self.flow_control
    }

    /// When the idle timeout fires, unless a frame comes or goes before; `None` without
    /// one or once closed.
    pub fn deadline(&self) -> Option<Instant> {
        let timeout = self.limits.idle_timeout.filter(|_| !self.closed)?;
        self.active.checked_add(timeout)
    }

    /// A frame the client sent.
    pub fn on_frame(&mut self, frame: Frame, now: Instant) -> Vec<Action> {
        if self.closed {
            return Vec::new();
        }
        self.active = now;
        match frame {
            Frame::SynStream { stream_id, fin, unidirectional, header_block, .. } => {
                match self.inflater.inflate(&header_block) {
                    Ok(headers) => self.open(stream_id, headers, fin, unidirectional),
                    Err(e) => self.protocol_error(&format!(
                        "stream {stream_id}'s SYN_STREAM headers cannot be read: {e}"
                    )),
                }
            }
            Frame::Data { stream_id, fin, data } => self.data(stream_id, fin, data),
            Frame::RstStream { stream_id, .. } => match self.streams.remove(&stream_id) {
                Some(stream) => {
                    let mut actions = Vec::with_capacity(2);
                    if stream.receiving {
                        actions.push(Action::RemoteFinished { stream_id });
                    }
                    actions.push(Action::Reset { stream_id });
                    actions
                }
                None => Vec::new(),
            },
            Frame::Settings { entries, .. } => {
                let mut actions = Vec::new();
                for entry in entries.iter().filter(|e| e.id == settings::INITIAL_WINDOW_SIZE) {
                    let new = i64::from(entry.value.min(frame::MAX_STREAM_ID));
                    let grown = new - self.initial_window;
                    self.initial_window = new;
                    self.flow_control = true;
                    for stream in self.streams.values_mut() {
                        stream.send_window = stream.send_window.saturating_add(grown);
                    }
                    actions = vec![Action::Writable];
                }
                actions
            }
            // Odd IDs are the client's own: echo them. Even ones would answer this
            // side's, which sends none.
            Frame::Ping { id } if id % 2 == 1 => vec![Action::Send(Frame::Ping { id })],
            Frame::Ping { .. } => Vec::new(),
            Frame::GoAway { .. } => {
                self.going_away = true;
                Vec::new()
            }
            Frame::Headers { stream_id, fin, header_block } => {
                // Read to keep the compression state; Kubernetes' streams carry no more.
                if let Err(e) = self.inflater.inflate(&header_block) {
                    return self.protocol_error(&format!(
                        "stream {stream_id}'s HEADERS cannot be read: {e}"
                    ));
                }
                if fin { self.remote_finished(stream_id) } else { Vec::new() }
            }
            Frame::WindowUpdate { stream_id, delta } => {
                self.flow_control = true;
                let delta = i64::from(delta);
                if stream_id == 0 {
                    self.send_window = self.send_window.saturating_add(delta);
                } else if let Some(stream) = self.streams.get_mut(&stream_id) {
                    stream.send_window = stream.send_window.saturating_add(delta);
                }
                vec![Action::Writable]
            }
            // SYN_REPLY goes to streams this side opened: it opens none. Unknown frames
            // are ignored, as the draft says.
            Frame::SynReply { .. } | Frame::Unknown { .. } => Vec::new(),
        }
    }

    /// The client's bytes cannot be framed: GOAWAY `PROTOCOL_ERROR`, and the end.
    pub fn on_decode_error(&mut self, error: &frame::Error) -> Vec<Action> {
        if self.closed {
            return Vec::new();
        }
        self.protocol_error(&format!("the client's frames cannot be read: {error}"))
    }

    /// The endpoint takes stream `stream_id` ([`Action::Opened`]): SYN_REPLY.
    pub fn accept(&mut self, stream_id: u32) -> Vec<Action> {
        if self.closed {
            return Vec::new();
        }
        let Some(stream) = self.streams.get_mut(&stream_id).filter(|s| !s.accepted) else {
            return Vec::new();
        };
        stream.accepted = true;
        // A stream the client finished and this side may not answer is done already.
        self.forget_if_done(stream_id);
        let header_block = self.deflater.deflate(&Headers::default());
        vec![Action::Send(Frame::SynReply { stream_id, fin: false, header_block })]
    }

    /// The endpoint does not take stream `stream_id`: RST_STREAM `REFUSED_STREAM`.
    pub fn refuse(&mut self, stream_id: u32) -> Vec<Action> {
        if self.closed || self.streams.get(&stream_id).is_none_or(|s| s.accepted) {
            return Vec::new();
        }
        self.streams.remove(&stream_id);
        vec![Action::Send(Frame::RstStream { stream_id, status: rst::REFUSED_STREAM })]
    }

    /// How many of `wanted` bytes may go on `stream_id` now, at most [`MAX_DATA_FRAME`]:
    /// 0 means wait for [`Action::Writable`]. The windows are charged with them.
    pub fn reserve(&mut self, stream_id: u32, wanted: usize) -> Result<usize, Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        let stream = self.streams.get_mut(&stream_id).ok_or(Error::Unknown(stream_id))?;
        if stream.finished {
            return Err(Error::Finished(stream_id));
        }
        let most = wanted.min(MAX_DATA_FRAME);
        let allowed = if self.flow_control {
            let window = stream.send_window.min(self.send_window).max(0);
            most.min(usize::try_from(window).unwrap_or(usize::MAX))
        } else {
            most
        };
        stream.send_window -= allowed as i64;
        self.send_window -= allowed as i64;
        Ok(allowed)
    }

    /// A DATA frame went out: the idle timer restarts.
    pub fn data_sent(&mut self, now: Instant) {
        self.active = now;
    }

    /// Ends this side's half of `stream_id`: an empty DATA frame with FIN.
    pub fn finish(&mut self, stream_id: u32) -> Result<Vec<Action>, Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        let stream = self.streams.get_mut(&stream_id).ok_or(Error::Unknown(stream_id))?;
        if stream.finished {
            return Err(Error::Finished(stream_id));
        }
        stream.finished = true;
        self.forget_if_done(stream_id);
        Ok(vec![Action::Send(Frame::Data { stream_id, fin: true, data: Vec::new() })])
    }

    /// Ends `stream_id` at once: RST_STREAM with `status`. Nothing for a stream not open.
    pub fn reset(&mut self, stream_id: u32, status: u32) -> Vec<Action> {
        if self.closed || self.streams.remove(&stream_id).is_none() {
            return Vec::new();
        }
        vec![Action::Send(Frame::RstStream { stream_id, status })]
    }

    /// The reader of `stream_id` took `bytes` of its data ([`Action::Data`]):
    /// WINDOW_UPDATEs for the connection and the stream once half a window is in.
    pub fn consumed(&mut self, stream_id: u32, bytes: usize) -> Vec<Action> {
        if self.closed {
            return Vec::new();
        }
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let mut actions = self.acknowledge_connection(bytes);
        if let Some(stream) = self.streams.get_mut(&stream_id).filter(|s| s.receiving) {
            stream.unacknowledged = stream.unacknowledged.saturating_add(bytes);
            if stream.unacknowledged >= INITIAL_WINDOW / 2 {
                let delta = window_delta(std::mem::take(&mut stream.unacknowledged));
                actions.push(Action::Send(Frame::WindowUpdate { stream_id, delta }));
            }
        }
        actions
    }

    /// This side ends the connection: GOAWAY `OK` naming the last stream the client
    /// opened, then [`Action::Close`].
    pub fn go_away(&mut self) -> Vec<Action> {
        if self.closed {
            return Vec::new();
        }
        self.going_away = true;
        self.closed = true;
        let goaway = Frame::GoAway { last_good_stream_id: self.last_stream, status: goaway::OK };
        vec![Action::Send(goaway), Action::Close { reason: "closed by this side".to_owned() }]
    }

    /// Time passed: past [`Session::deadline`], every open stream is reset (`CANCEL`) and
    /// the connection goes away.
    pub fn on_timer(&mut self, now: Instant) -> Vec<Action> {
        let Some(deadline) = self.deadline().filter(|d| now >= *d) else { return Vec::new() };
        let idle = deadline.duration_since(self.active);
        let mut actions = Vec::new();
        for (stream_id, stream) in std::mem::take(&mut self.streams) {
            actions.push(Action::Send(Frame::RstStream { stream_id, status: rst::CANCEL }));
            if stream.receiving {
                actions.push(Action::RemoteFinished { stream_id });
            }
            actions.push(Action::Reset { stream_id });
        }
        self.going_away = true;
        self.closed = true;
        let goaway = Frame::GoAway { last_good_stream_id: self.last_stream, status: goaway::OK };
        actions.push(Action::Send(goaway));
        actions.push(Action::Close {
            reason: format!(
                "no frame for {} s, the streaming connection idle timeout",
                idle.as_secs()
            ),
        });
        actions
    }

    /// A SYN_STREAM whose headers were read.
    fn open(&mut self, stream_id: u32, headers: Headers, fin: bool, uni: bool) -> Vec<Action> {
        let refusal = if stream_id.is_multiple_of(2) || stream_id <= self.last_stream {
            Some((rst::PROTOCOL_ERROR, Refusal::StreamId { stream_id, last: self.last_stream }))
        } else {
            self.last_stream = stream_id;
            if self.going_away {
                Some((rst::REFUSED_STREAM, Refusal::GoingAway))
            } else if self.streams.len() >= self.limits.max_streams {
                let limit = self.limits.max_streams;
                Some((rst::REFUSED_STREAM, Refusal::StreamLimit { limit }))
            } else {
                None
            }
        };
        if let Some((status, reason)) = refusal {
            return vec![
                Action::Send(Frame::RstStream { stream_id, status }),
                Action::Refused { stream_id, reason },
            ];
        }
        let stream = Stream {
            accepted: false,
            receiving: !fin,
            finished: uni,
            send_window: self.initial_window,
            unacknowledged: 0,
        };
        self.streams.insert(stream_id, stream);
        vec![Action::Opened { stream_id, headers, fin, unidirectional: uni }]
    }

    /// DATA from the client.
    fn data(&mut self, stream_id: u32, fin: bool, data: Vec<u8>) -> Vec<Action> {
        // Stream 0 is the connection's: no stream to reset, the framing is broken.
        if stream_id == 0 {
            return self.protocol_error("the client sent DATA on stream 0");
        }
        let receiving = self.streams.get(&stream_id).map(|s| s.receiving);
        let status = match receiving {
            Some(true) => {
                let mut actions = Vec::with_capacity(2);
                if !data.is_empty() {
                    actions.push(Action::Data { stream_id, data });
                }
                if fin {
                    actions.extend(self.remote_finished(stream_id));
                }
                return actions;
            }
            Some(false) => rst::STREAM_ALREADY_CLOSED,
            None => rst::INVALID_STREAM,
        };
        // Nobody reads it, but it took its place in the connection's window.
        let mut actions = vec![Action::Send(Frame::RstStream { stream_id, status })];
        actions.extend(self.acknowledge_connection(data.len() as i64));
        actions
    }

    /// The client finished its half of `stream_id`.
    fn remote_finished(&mut self, stream_id: u32) -> Vec<Action> {
        let Some(stream) = self.streams.get_mut(&stream_id).filter(|s| s.receiving) else {
            return Vec::new();
        };
        stream.receiving = false;
        stream.unacknowledged = 0;
        self.forget_if_done(stream_id);
        vec![Action::RemoteFinished { stream_id }]
    }

    fn acknowledge_connection(&mut self, bytes: i64) -> Vec<Action> {
        self.unacknowledged = self.unacknowledged.saturating_add(bytes);
        if self.unacknowledged < INITIAL_WINDOW / 2 {
            return Vec::new();
        }
        let delta = window_delta(std::mem::take(&mut self.unacknowledged));
        vec![Action::Send(Frame::WindowUpdate { stream_id: 0, delta })]
    }

    /// Forgets a stream both sides have finished.
    fn forget_if_done(&mut self, stream_id: u32) {
        if self.streams.get(&stream_id).is_some_and(|s| s.finished && !s.receiving) {
            self.streams.remove(&stream_id);
        }
    }

    fn protocol_error(&mut self, reason: &str) -> Vec<Action> {
        self.going_away = true;
        self.closed = true;
        let last_good_stream_id = self.last_stream;
        vec![
            Action::Send(Frame::GoAway { last_good_stream_id, status: goaway::PROTOCOL_ERROR }),
            Action::Close { reason: reason.to_owned() },
        ]
    }
}

/// A WINDOW_UPDATE's delta for `bytes` (31 bits).
fn window_delta(bytes: i64) -> u32 {
    u32::try_from(bytes).unwrap_or(u32::MAX).min(frame::MAX_STREAM_ID)
}

#[cfg(test)]
mod tests;
