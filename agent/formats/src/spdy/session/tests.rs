//! N3: the SPDY/3.1 session as values: a client's frames in, the actions out.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::spdy::frame::Setting;

/// A client that writes frames for the session: its own header compression state.
struct Client {
    deflater: Deflater,
    inflater: Inflater,
}

impl Client {
    fn new() -> Client {
        Client { deflater: Deflater::new(), inflater: Inflater::default() }
    }

    fn syn(&mut self, stream_id: u32, headers: &[(&str, &str)]) -> Frame {
        let headers =
            Headers(headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect());
        Frame::syn_stream(stream_id, self.deflater.deflate(&headers))
    }
}

fn limits() -> Limits {
    Limits { max_streams: 4, idle_timeout: Some(Duration::from_secs(60)) }
}

fn data(stream_id: u32, fin: bool, data: &[u8]) -> Frame {
    Frame::Data { stream_id, fin, data: data.to_vec() }
}

fn rst(stream_id: u32, status: u32) -> Action {
    Action::Send(Frame::RstStream { stream_id, status })
}

/// Opens and accepts stream `id`.
fn open(session: &mut Session, client: &mut Client, id: u32, now: Instant) {
    let opened = session.on_frame(client.syn(id, &[("streamtype", "data")]), now);
    assert!(matches!(opened[..], [Action::Opened { stream_id, .. }] if stream_id == id));
    let reply = session.accept(id);
    let [Action::Send(Frame::SynReply { stream_id, header_block, .. })] = &reply[..] else {
        panic!("no SYN_REPLY: {reply:?}")
    };
    assert_eq!(*stream_id, id);
    assert_eq!(client.inflater.inflate(header_block), Ok(Headers::default()));
}

/// N3: a stream the client opens is handed out with its headers; accepted, it is
/// replied to; its data is handed on; each side finishes its half, and the stream is
/// then forgotten.
#[test]
fn n3_a_stream_opens_carries_data_and_finishes() {
    let now = Instant::now();
    let (mut session, mut client) = (Session::new(limits(), now), Client::new());
    let actions = session.on_frame(client.syn(1, &[("streamtype", "stdin")]), now);
    let [Action::Opened { stream_id: 1, headers, fin: false, unidirectional: false }] =
        &actions[..]
    else {
        panic!("{actions:?}")
    };
    assert_eq!(headers.get("streamType"), Some("stdin"));
    assert_eq!(session.accept(1).len(), 1);
    assert_eq!(session.accept(1), [], "a stream is accepted once");
    assert_eq!(
        session.on_frame(data(1, true, b"hi"), now),
        [
            Action::Data { stream_id: 1, data: b"hi".to_vec() },
            Action::RemoteFinished { stream_id: 1 }
        ]
    );
    assert_eq!(session.reserve(1, 100), Ok(100));
    assert_eq!(
        session.finish(1),
        Ok(vec![Action::Send(Frame::Data { stream_id: 1, fin: true, data: vec![] })])
    );
    assert_eq!(session.open_streams(), 0);
    assert_eq!(session.finish(1), Err(Error::Unknown(1)));
}

/// N3: a stream the endpoint refuses is reset with REFUSED_STREAM; IDs that are even or
/// not above the last are PROTOCOL_ERRORs; DATA on a stream never opened is
/// INVALID_STREAM, on one the client finished STREAM_ALREADY_CLOSED.
#[test]
fn n3_bad_streams_are_reset() {
    let now = Instant::now();
    let (mut session, mut client) = (Session::new(limits(), now), Client::new());
    session.on_frame(client.syn(3, &[]), now);
    assert_eq!(session.refuse(3), [rst(3, rst::REFUSED_STREAM)]);
    assert_eq!(session.refuse(3), []);
    for id in [2, 3, 1] {
        assert_eq!(
            session.on_frame(client.syn(id, &[]), now),
            [
                rst(id, rst::PROTOCOL_ERROR),
                Action::Refused {
                    stream_id: id,
                    reason: Refusal::StreamId { stream_id: id, last: 3 }
                }
            ]
        );
    }
    assert_eq!(session.on_frame(data(99, false, b"x"), now), [rst(99, rst::INVALID_STREAM)]);
    open(&mut session, &mut client, 5, now);
    session.on_frame(data(5, true, b""), now);
    assert_eq!(
        session.on_frame(data(5, false, b"late"), now),
        [rst(5, rst::STREAM_ALREADY_CLOSED)]
    );
    assert_eq!(session.reserve(5, 1), Ok(1), "this side's half is still open");
}

/// N3: the client's RST_STREAM ends both halves of a stream: its reader's and its
/// sender's; this side's reset sends RST_STREAM with its status.
#[test]
fn n3_rst_stream_ends_a_stream() {
    let now = Instant::now();
    let (mut session, mut client) = (Session::new(limits(), now), Client::new());
    open(&mut session, &mut client, 1, now);
    open(&mut session, &mut client, 3, now);
    assert_eq!(
        session.on_frame(Frame::RstStream { stream_id: 1, status: rst::CANCEL }, now),
        [Action::RemoteFinished { stream_id: 1 }, Action::Reset { stream_id: 1 }]
    );
    assert_eq!(session.reserve(1, 1), Err(Error::Unknown(1)));
    assert_eq!(session.reset(3, rst::INTERNAL_ERROR), [rst(3, rst::INTERNAL_ERROR)]);
    assert_eq!(session.reset(3, rst::INTERNAL_ERROR), []);
    assert_eq!(session.open_streams(), 0);
}

/// N3: without WINDOW_UPDATE or SETTINGS from the client (Go's spdystream sends
/// neither), data is not held at the 64 KiB window; once the client sends one, the
/// windows (charged all along) hold it, and a WINDOW_UPDATE makes it writable.
#[test]
fn n3_flow_control_once_the_client_keeps_windows() {
    let now = Instant::now();
    let (mut session, mut client) = (Session::new(limits(), now), Client::new());
    open(&mut session, &mut client, 1, now);
    let mut sent = 0;
    for _ in 0..4 {
        sent += session.reserve(1, 100_000).unwrap();
    }
    assert_eq!(sent, 4 * MAX_DATA_FRAME, "past the 64 KiB window");
    assert!(!session.flow_control());
    let update = Frame::WindowUpdate { stream_id: 1, delta: 100_000 };
    assert_eq!(session.on_frame(update, now), [Action::Writable]);
    // The connection window is 64 KiB less 128 KiB sent: nothing may go.
    assert_eq!(session.reserve(1, 10), Ok(0));
    session.on_frame(Frame::WindowUpdate { stream_id: 0, delta: 64 * 1024 + 10 }, now);
    assert_eq!(session.reserve(1, 100), Ok(10));
    assert_eq!(session.reserve(1, 100), Ok(0));
}

/// N3: SETTINGS INITIAL_WINDOW_SIZE turns flow control on and moves every stream's
/// window by the change; new streams start with the new size.
#[test]
fn n3_settings_initial_window_size() {
    let now = Instant::now();
    let (mut session, mut client) = (Session::new(limits(), now), Client::new());
    open(&mut session, &mut client, 1, now);
    assert_eq!(session.reserve(1, 1000), Ok(1000));
    let entries = vec![Setting { flags: 0, id: settings::INITIAL_WINDOW_SIZE, value: 1500 }];
    assert_eq!(
        session.on_frame(Frame::Settings { clear: false, entries }, now),
        [Action::Writable]
    );
    assert_eq!(session.reserve(1, 1000), Ok(500));
    open(&mut session, &mut client, 3, now);
    assert_eq!(session.reserve(3, 10_000), Ok(1500));
    assert_eq!(session.reserve(3, 1), Ok(0));
    let other = vec![Setting { flags: 0, id: settings::MAX_CONCURRENT_STREAMS, value: 1 }];
    assert_eq!(session.on_frame(Frame::Settings { clear: false, entries: other }, now), []);
}

/// N3: data handed on is acknowledged with WINDOW_UPDATE, for the connection and the
/// stream, once half a window of it was consumed; data nobody reads counts for the
/// connection's window only.
#[test]
fn n3_window_updates_after_half_a_window() {
    let now = Instant::now();
    let (mut session, mut client) = (Session::new(limits(), now), Client::new());
    open(&mut session, &mut client, 1, now);
    let chunk = vec![0u8; 16 * 1024];
    session.on_frame(data(1, false, &chunk), now);
    assert_eq!(session.consumed(1, chunk.len()), []);
    session.on_frame(data(1, false, &chunk), now);
    assert_eq!(
        session.consumed(1, chunk.len()),
        [
            Action::Send(Frame::WindowUpdate { stream_id: 0, delta: 32 * 1024 }),
            Action::Send(Frame::WindowUpdate { stream_id: 1, delta: 32 * 1024 })
        ]
    );
    assert_eq!(session.on_frame(data(7, false, &chunk), now), [rst(7, rst::INVALID_STREAM)]);
    assert_eq!(
        session.on_frame(data(9, false, &chunk), now),
        [
            rst(9, rst::INVALID_STREAM),
            Action::Send(Frame::WindowUpdate { stream_id: 0, delta: 32 * 1024 })
        ]
    );
}

/// N3: the client's PINGs (odd IDs) are echoed; even ones and unknown frames are not
/// answered.
#[test]
fn n3_client_pings_are_echoed() {
    let now = Instant::now();
    let mut session = Session::new(limits(), now);
    assert_eq!(session.on_frame(Frame::Ping { id: 7 }, now), [Action::Send(Frame::Ping { id: 7 })]);
    assert_eq!(session.on_frame(Frame::Ping { id: 2 }, now), []);
    let unknown = Frame::Unknown { kind: 10, flags: 0, payload: vec![1] };
    assert_eq!(session.on_frame(unknown, now), []);
}

/// N3: after the client's GOAWAY new streams are refused; this side's GOAWAY names the
/// last stream the client opened and closes the session, which then emits nothing.
#[test]
fn n3_goaway() {
    let now = Instant::now();
    let (mut session, mut client) = (Session::new(limits(), now), Client::new());
    open(&mut session, &mut client, 1, now);
    session.on_frame(Frame::GoAway { last_good_stream_id: 0, status: goaway::OK }, now);
    assert_eq!(
        session.on_frame(client.syn(3, &[]), now),
        [rst(3, rst::REFUSED_STREAM), Action::Refused { stream_id: 3, reason: Refusal::GoingAway }]
    );
    assert_eq!(
        session.go_away(),
        [
            Action::Send(Frame::GoAway { last_good_stream_id: 3, status: goaway::OK }),
            Action::Close { reason: "closed by this side".into() }
        ]
    );
    assert_eq!(session.on_frame(Frame::Ping { id: 1 }, now), []);
    assert_eq!(session.go_away(), []);
    assert_eq!(session.reserve(1, 1), Err(Error::Closed));
    assert_eq!(session.deadline(), None);
}

/// N3: bytes that cannot be framed, or a header block that cannot be inflated, end the
/// connection with GOAWAY PROTOCOL_ERROR.
#[test]
fn n3_protocol_errors_end_the_connection() {
    let now = Instant::now();
    let mut session = Session::new(limits(), now);
    let actions = session.on_decode_error(&frame::Error::Version(2));
    assert_eq!(
        actions[0],
        Action::Send(Frame::GoAway { last_good_stream_id: 0, status: goaway::PROTOCOL_ERROR })
    );
    assert!(matches!(&actions[1..], [Action::Close { reason }] if reason.contains("version 2")));

    let mut session = Session::new(limits(), now);
    let mut client = Client::new();
    open(&mut session, &mut client, 1, now);
    let bad = Frame::Headers { stream_id: 1, fin: false, header_block: vec![1, 2, 3] };
    let actions = session.on_frame(bad, now);
    assert_eq!(
        actions[0],
        Action::Send(Frame::GoAway { last_good_stream_id: 1, status: goaway::PROTOCOL_ERROR })
    );
    assert!(matches!(&actions[1..], [Action::Close { reason }] if reason.contains("HEADERS")));
    assert_eq!(session.on_frame(client.syn(3, &[]), now), []);
}

/// N3: the idle timeout (kubelet's streamingConnectionIdleTimeout) restarts on every
/// frame read and DATA frame written; when it fires, every open stream is reset and the
/// connection goes away.
#[test]
fn n3_idle_timeout() {
    let start = Instant::now();
    let minute = Duration::from_secs(60);
    let (mut session, mut client) = (Session::new(limits(), start), Client::new());
    assert_eq!(session.deadline(), Some(start + minute));
    open(&mut session, &mut client, 1, start + minute / 2);
    assert_eq!(session.deadline(), Some(start + minute * 3 / 2));
    assert_eq!(session.on_timer(start + minute), []);
    session.data_sent(start + minute);
    assert_eq!(session.on_timer(start + minute * 3 / 2), []);
    open(&mut session, &mut client, 3, start + minute);
    session.on_frame(data(3, true, b""), start + minute);
    let actions = session.on_timer(start + minute * 2);
    assert_eq!(
        actions[..actions.len() - 1],
        [
            rst(1, rst::CANCEL),
            Action::RemoteFinished { stream_id: 1 },
            Action::Reset { stream_id: 1 },
            rst(3, rst::CANCEL),
            Action::Reset { stream_id: 3 },
            Action::Send(Frame::GoAway { last_good_stream_id: 3, status: goaway::OK }),
        ]
    );
    assert!(
        matches!(&actions[actions.len() - 1], Action::Close { reason } if reason.contains("60 s"))
    );
    assert_eq!(session.deadline(), None);
    assert_eq!(session.on_timer(start + minute * 10), []);

    let never = Limits { idle_timeout: None, ..limits() };
    assert_eq!(Session::new(never, start).deadline(), None);
}

/// N3: past `max_streams` open streams a new one is refused with REFUSED_STREAM, naming
/// the limit; once one ends, another may open.
#[test]
fn n3_stream_cap() {
    let now = Instant::now();
    let (mut session, mut client) = (Session::new(limits(), now), Client::new());
    for id in [1, 3, 5, 7] {
        open(&mut session, &mut client, id, now);
    }
    assert_eq!(
        session.on_frame(client.syn(9, &[]), now),
        [
            rst(9, rst::REFUSED_STREAM),
            Action::Refused { stream_id: 9, reason: Refusal::StreamLimit { limit: 4 } }
        ]
    );
    session.on_frame(data(1, true, b""), now);
    session.finish(1).unwrap();
    open(&mut session, &mut client, 11, now);
    assert_eq!(session.open_streams(), 4);
}

/// An input to the session, for the properties.
#[derive(Debug, Clone)]
enum Input {
    Open { fin: bool },
    Frame(Frame),
    Accept(u32),
    Refuse(u32),
    Reserve(u32, usize),
    Finish(u32),
    Reset(u32),
    Consumed(u32, usize),
    GoAway,
    Advance(u64),
}

fn any_input() -> impl Strategy<Value = Input> {
    let id = 0u32..12;
    prop_oneof![
        3 => any::<bool>().prop_map(|fin| Input::Open { fin }),
        2 => (id.clone(), any::<bool>(), 0usize..40_000)
            .prop_map(|(stream_id, fin, len)| Input::Frame(Frame::Data { stream_id, fin, data: vec![0; len] })),
        1 => (id.clone(), 0u32..10).prop_map(|(stream_id, status)| Input::Frame(Frame::RstStream { stream_id, status })),
        2 => (id.clone(), 1u32..100_000).prop_map(|(stream_id, delta)| Input::Frame(Frame::WindowUpdate { stream_id, delta })),
        1 => (0u32..200_000).prop_map(|value| Input::Frame(Frame::Settings {
            clear: false,
            entries: vec![Setting { flags: 0, id: settings::INITIAL_WINDOW_SIZE, value }],
        })),
        1 => any::<u32>().prop_map(|id| Input::Frame(Frame::Ping { id })),
        1 => (id.clone(), any::<bool>(), proptest::collection::vec(any::<u8>(), 0..8))
            .prop_map(|(stream_id, fin, header_block)| Input::Frame(Frame::Headers { stream_id, fin, header_block })),
        3 => id.clone().prop_map(Input::Accept),
        1 => id.clone().prop_map(Input::Refuse),
        4 => (id.clone(), 0usize..100_000).prop_map(|(id, n)| Input::Reserve(id, n)),
        2 => id.clone().prop_map(Input::Finish),
        1 => id.clone().prop_map(Input::Reset),
        3 => (id, 0usize..40_000).prop_map(|(id, n)| Input::Consumed(id, n)),
        1 => Just(Input::GoAway),
        1 => (0u64..100).prop_map(Input::Advance),
    ]
}

/// What the properties track, as a client that keeps windows would.
#[derive(Default)]
struct Model {
    flow_control: bool,
    initial: i64,
    connection: i64,
    streams: BTreeMap<u32, i64>,
    opened: BTreeSet<u32>,
    /// Data handed on and not yet consumed, by stream.
    handed: BTreeMap<u32, usize>,
    consumed: i64,
    acknowledged: i64,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// N3: any sequence of frames and local operations: no panic; no stream is handed
    /// out twice; once flow control is on no reserve passes the client's windows; after
    /// Close nothing at all is emitted; the connection's WINDOW_UPDATEs add up to the
    /// data consumed, less under half a window.
    #[test]
    fn n3_session_invariants(inputs in proptest::collection::vec(any_input(), 1..80)) {
        let start = Instant::now();
        let mut now = start;
        let limits = Limits { max_streams: 3, idle_timeout: Some(Duration::from_secs(1000)) };
        let mut session = Session::new(limits, start);
        let mut client = Client::new();
        let mut next_id = 1;
        let mut model = Model { initial: INITIAL_WINDOW, connection: INITIAL_WINDOW, ..Model::default() };
        let mut closed = false;
        for input in inputs {
            let actions = match input {
                Input::Open { fin } => {
                    let mut frame = client.syn(next_id, &[("streamtype", "data")]);
                    if let Frame::SynStream { fin: f, .. } = &mut frame { *f = fin; }
                    next_id += 2;
                    session.on_frame(frame, now)
                }
                Input::Frame(frame) => {
                    match &frame {
                        Frame::WindowUpdate { stream_id: 0, delta } => {
                            model.flow_control = true;
                            model.connection += i64::from(*delta);
                        }
                        Frame::WindowUpdate { stream_id, delta } => {
                            model.flow_control = true;
                            if let Some(w) = model.streams.get_mut(stream_id) { *w += i64::from(*delta); }
                        }
                        Frame::Settings { entries, .. } => {
                            model.flow_control = true;
                            let new = i64::from(entries[0].value);
                            model.streams.values_mut().for_each(|w| *w += new - model.initial);
                            model.initial = new;
                        }
                        Frame::Data { stream_id, data, .. } if !closed && !session.streams.get(stream_id).is_some_and(|s| s.receiving) => {
                            // Nobody reads it: consumed at once.
                            model.consumed += data.len() as i64;
                        }
                        Frame::RstStream { stream_id, .. } => { model.streams.remove(stream_id); }
                        _ => {}
                    }
                    session.on_frame(frame, now)
                }
                Input::Accept(id) => session.accept(id),
                Input::Refuse(id) => session.refuse(id),
                Input::Reserve(id, wanted) => {
                    let before = (model.streams.get(&id).copied(), model.connection);
                    if let Ok(n) = session.reserve(id, wanted) {
                        prop_assert!(n <= wanted.min(MAX_DATA_FRAME));
                        let (Some(window), connection) = before else {
                            return Err(TestCaseError::fail(format!("reserved on {id}, never opened")));
                        };
                        if model.flow_control {
                            prop_assert!(n as i64 <= window.min(connection).max(0), "{n} bytes past the windows");
                        }
                        model.streams.insert(id, window - n as i64);
                        model.connection -= n as i64;
                        session.data_sent(now);
                    }
                    Vec::new()
                }
                Input::Finish(id) => session.finish(id).unwrap_or_default(),
                Input::Reset(id) => session.reset(id, rst::CANCEL),
                Input::Consumed(id, n) => {
                    // Only what was handed on is consumed, as the pump does.
                    let handed = model.handed.entry(id).or_default();
                    let n = n.min(*handed);
                    *handed -= n;
                    if !closed { model.consumed += n as i64; }
                    session.consumed(id, n)
                }
                Input::GoAway => session.go_away(),
                Input::Advance(seconds) => {
                    now += Duration::from_secs(seconds * 10);
                    session.on_timer(now)
                }
            };
            if closed {
                prop_assert!(actions.is_empty(), "{actions:?} after Close");
            }
            for action in actions {
                match action {
                    Action::Opened { stream_id, .. } => {
                        prop_assert!(model.opened.insert(stream_id), "stream {stream_id} opened twice");
                        model.streams.insert(stream_id, model.initial);
                    }
                    Action::Data { stream_id, data } => {
                        *model.handed.entry(stream_id).or_default() += data.len();
                    }
                    Action::Send(Frame::WindowUpdate { stream_id: 0, delta }) => {
                        model.acknowledged += i64::from(delta);
                    }
                    Action::Close { .. } => closed = true,
                    _ => {}
                }
            }
            prop_assert!(session.open_streams() <= 3);
            if !closed {
                let unacknowledged = model.consumed - model.acknowledged;
                prop_assert!((0..INITIAL_WINDOW / 2).contains(&unacknowledged), "{unacknowledged} bytes unacknowledged");
            }
        }
    }

    /// N3: any frames, even ones that make no sense together, never panic the session.
    #[test]
    fn n3_any_frames_never_panic(
        frames in proptest::collection::vec(crate::spdy::frame::tests::any_frame(), 0..30),
        ops in proptest::collection::vec((0u32..8, 0usize..70_000), 0..30),
    ) {
        let now = Instant::now();
        let mut session = Session::new(limits(), now);
        for (frame, (id, n)) in frames.into_iter().zip(ops.into_iter().chain(std::iter::repeat((1, 1)))) {
            session.on_frame(frame, now);
            session.accept(id);
            let _ = session.reserve(id, n);
            session.consumed(id, n);
            session.on_timer(now + Duration::from_secs(n as u64));
        }
    }
}
