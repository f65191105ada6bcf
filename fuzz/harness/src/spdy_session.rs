//! `spdy_session`: a SPDY/3.1 connection's server side ([`Session`]) driven as the
//! agent's pump drives it: the client's bytes framed by the [`Decoder`] (raw bytes, or
//! frames the harness writes from the input: streams opened with compressed headers,
//! DATA, window updates, settings, pings, resets) interleaved with this side's operations
//! (accept, refuse, reserve, finish, reset, consumed, the timer, GOAWAY).
//!
//! Invariants: no panic; a stream is handed out once, with an odd ID above the last;
//! data goes only to streams handed out; after `Close` nothing at all is emitted; open
//! streams stay within the cap; a reserve gives at most what was asked, and at most the
//! client's windows once it keeps them; every frame sent reads back as itself; the
//! connection's WINDOW_UPDATEs add up to the data consumed, less under half a window.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use outpost_formats::spdy::frame::{self, Frame, Setting, rst, settings};
use outpost_formats::spdy::session::{Action, INITIAL_WINDOW, Limits, MAX_DATA_FRAME};
use outpost_formats::spdy::{Decoder, Deflater, Headers, Session};

/// The cap on streams here: small, so that it is reached.
const MAX_STREAMS: usize = 4;
/// The idle timeout here.
const IDLE: Duration = Duration::from_secs(3600);

/// The input, read a byte at a time; zeros past its end.
struct Input<'a> {
    bytes: &'a [u8],
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((&b, rest)) => {
                self.bytes = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let (taken, rest) = self.bytes.split_at(n.min(self.bytes.len()));
        self.bytes = rest;
        taken
    }
}

/// What the harness knows, as a client that keeps windows would.
#[derive(Default)]
struct Model {
    opened: BTreeSet<u32>,
    last_opened: u32,
    flow_control: bool,
    initial: i64,
    connection: i64,
    windows: BTreeMap<u32, i64>,
    /// Data handed on and not yet consumed, by stream.
    handed: BTreeMap<u32, usize>,
    consumed: i64,
    acknowledged: i64,
    closed: bool,
}

pub fn spdy_session(data: &[u8]) {
    let mut input = Input { bytes: data };
    let start = Instant::now();
    let mut now = start;
    let limits = Limits { max_streams: MAX_STREAMS, idle_timeout: Some(IDLE) };
    let mut session = Session::new(limits, now);
    let mut decoder = Decoder::new(64 * 1024);
    let mut deflater = Deflater::new();
    let mut next_id = 1u32;
    let mut decoding = true;
    let mut model =
        Model { initial: INITIAL_WINDOW, connection: INITIAL_WINDOW, ..Model::default() };
    while !input.bytes.is_empty() {
        let op = input.byte();
        let id = u32::from(input.byte() % 16);
        let mut actions = Vec::new();
        let mut client = Vec::new();
        match op % 16 {
            0 => {
                let len = usize::from(input.byte());
                client.extend_from_slice(input.take(len));
            }
            1 => {
                let flags = input.byte();
                let stream_id = if flags & 0x80 != 0 { id } else { next_id };
                next_id += 2;
                let headers = Headers::from([("streamtype", "data"), ("port", "80")]);
                Frame::SynStream {
                    stream_id,
                    associated_to: 0,
                    priority: 0,
                    slot: 0,
                    fin: flags & 1 != 0,
                    unidirectional: flags & 2 != 0,
                    header_block: deflater.deflate(&headers),
                }
                .encode(&mut client);
            }
            2 => {
                let fin = input.byte() & 1 != 0;
                let len = usize::from(input.u16());
                Frame::Data { stream_id: id, fin, data: vec![7; len] }.encode(&mut client);
            }
            3 => {
                let delta = u32::from(input.u16()).max(1) * 16;
                Frame::WindowUpdate { stream_id: id % 2 * id, delta }.encode(&mut client);
            }
            4 => {
                let value = u32::from(input.u16()) * 4;
                let entries = vec![Setting { flags: 0, id: settings::INITIAL_WINDOW_SIZE, value }];
                Frame::Settings { clear: false, entries }.encode(&mut client);
            }
            5 => Frame::Ping { id: u32::from(input.byte()) }.encode(&mut client),
            6 => Frame::RstStream { stream_id: id.max(1), status: u32::from(input.byte() % 12) }
                .encode(&mut client),
            7 => Frame::GoAway { last_good_stream_id: id, status: 0 }.encode(&mut client),
            8 => actions = session.accept(id),
            9 => actions = session.refuse(id),
            10 => {
                let wanted = usize::from(input.u16()) * 2;
                let windows = (model.windows.get(&id).copied(), model.connection);
                if let Ok(n) = session.reserve(id, wanted) {
                    assert!(n <= wanted.min(MAX_DATA_FRAME), "reserved {n} of {wanted}");
                    let (Some(window), connection) = windows else {
                        panic!("reserved on stream {id}, never opened")
                    };
                    if model.flow_control {
                        assert!(n as i64 <= window.min(connection).max(0), "{n} past the windows");
                    }
                    model.windows.insert(id, window - n as i64);
                    model.connection -= n as i64;
                    session.data_sent(now);
                }
            }
            11 => actions = session.finish(id).unwrap_or_default(),
            12 => actions = session.reset(id, u32::from(input.byte() % 12)),
            13 => {
                let handed = model.handed.entry(id).or_default();
                let n = usize::from(input.u16()).min(*handed);
                *handed -= n;
                if !model.closed {
                    model.consumed += n as i64;
                }
                actions = session.consumed(id, n);
            }
            14 => {
                now += Duration::from_secs(u64::from(input.byte()) * 60);
                actions = session.on_timer(now);
            }
            _ => actions = session.go_away(),
        }
        if !client.is_empty() && decoding {
            decoder.extend(&client);
            loop {
                match decoder.next_frame() {
                    Ok(Some(frame)) => {
                        track_client(&mut model, &frame);
                        let data = match &frame {
                            Frame::Data { stream_id, data, .. } => Some((*stream_id, data.len())),
                            _ => None,
                        };
                        let answer = session.on_frame(frame, now);
                        // DATA nobody reads (the stream is not open, or the client
                        // finished it) is consumed at once.
                        if let Some((stream_id, len)) = data
                            && !model.closed
                            && answer.iter().any(|a| {
                                matches!(a, Action::Send(Frame::RstStream { stream_id: s, status })
                                    if *s == stream_id && (*status == rst::INVALID_STREAM || *status == rst::STREAM_ALREADY_CLOSED))
                            })
                        {
                            model.consumed += len as i64;
                        }
                        actions.extend(answer);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        actions.extend(session.on_decode_error(&e));
                        decoding = false;
                        break;
                    }
                }
            }
        }
        check(&mut model, actions);
        assert!(session.open_streams() <= MAX_STREAMS, "{} streams open", session.open_streams());
    }
}

/// What a frame from the client does to the windows and the data consumed.
fn track_client(model: &mut Model, frame: &Frame) {
    if model.closed {
        return;
    }
    match frame {
        Frame::WindowUpdate { stream_id: 0, delta } => {
            model.flow_control = true;
            model.connection += i64::from(*delta);
        }
        Frame::WindowUpdate { stream_id, delta } => {
            model.flow_control = true;
            if let Some(window) = model.windows.get_mut(stream_id) {
                *window += i64::from(*delta);
            }
        }
        Frame::Settings { entries, .. } => {
            for entry in entries.iter().filter(|e| e.id == settings::INITIAL_WINDOW_SIZE) {
                model.flow_control = true;
                let new = i64::from(entry.value.min(frame::MAX_STREAM_ID));
                model.windows.values_mut().for_each(|w| *w += new - model.initial);
                model.initial = new;
            }
        }
        _ => {}
    }
}

/// The session's actions against the invariants.
fn check(model: &mut Model, actions: Vec<Action>) {
    if model.closed {
        assert!(actions.is_empty(), "{actions:?} after Close");
    }
    for action in actions {
        match action {
            Action::Send(frame) => {
                assert_eq!(frame::parse(&frame.to_bytes()).as_ref(), Ok(&frame), "a frame sent");
                if let Frame::WindowUpdate { stream_id: 0, delta } = frame {
                    model.acknowledged += i64::from(delta);
                }
            }
            Action::Opened { stream_id, .. } => {
                assert!(stream_id % 2 == 1 && stream_id > model.last_opened, "stream {stream_id}");
                assert!(model.opened.insert(stream_id), "stream {stream_id} opened twice");
                model.last_opened = stream_id;
                model.windows.insert(stream_id, model.initial);
            }
            Action::Data { stream_id, data } => {
                assert!(model.opened.contains(&stream_id), "data for stream {stream_id}");
                assert!(!data.is_empty());
                *model.handed.entry(stream_id).or_default() += data.len();
            }
            Action::Close { .. } => model.closed = true,
            _ => {}
        }
    }
    if !model.closed {
        let unacknowledged = model.consumed - model.acknowledged;
        assert!(
            (0..INITIAL_WINDOW / 2).contains(&unacknowledged),
            "{unacknowledged} bytes consumed and not acknowledged"
        );
    }
}
