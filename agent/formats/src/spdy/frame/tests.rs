//! N3: SPDY/3.1's frames, each written and read back, byte layouts checked against the
//! draft, partial input, limits and malformed frames.

use proptest::prelude::*;

use super::*;

fn control_header(kind: u16, flags: u8, length: u32) -> Vec<u8> {
    let mut out = vec![0x80, 0x03];
    out.extend_from_slice(&kind.to_be_bytes());
    out.push(flags);
    out.extend_from_slice(&length.to_be_bytes()[1..]);
    out
}

/// N3: every frame type's bytes, as the draft lays them out.
#[test]
fn n3_frames_have_the_drafts_layout() {
    let data = Frame::Data { stream_id: 5, fin: true, data: b"hi".to_vec() };
    assert_eq!(data.to_bytes(), [0, 0, 0, 5, 1, 0, 0, 2, b'h', b'i']);
    assert_eq!(data_header(5, true, 2), data.to_bytes()[..HEADER_LEN]);

    let syn = Frame::SynStream {
        stream_id: 1,
        associated_to: 0,
        priority: 7,
        slot: 0,
        fin: false,
        unidirectional: true,
        header_block: vec![0xaa],
    };
    let mut expected = control_header(kind::SYN_STREAM, FLAG_UNIDIRECTIONAL, 11);
    expected.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0xe0, 0, 0xaa]);
    assert_eq!(syn.to_bytes(), expected);

    let reply = Frame::SynReply { stream_id: 3, fin: true, header_block: vec![1, 2] };
    let mut expected = control_header(kind::SYN_REPLY, FLAG_FIN, 6);
    expected.extend_from_slice(&[0, 0, 0, 3, 1, 2]);
    assert_eq!(reply.to_bytes(), expected);

    let rst = Frame::RstStream { stream_id: 7, status: rst::CANCEL };
    let mut expected = control_header(kind::RST_STREAM, 0, 8);
    expected.extend_from_slice(&[0, 0, 0, 7, 0, 0, 0, 5]);
    assert_eq!(rst.to_bytes(), expected);

    let settings = Frame::Settings {
        clear: true,
        entries: vec![Setting { flags: 1, id: settings::INITIAL_WINDOW_SIZE, value: 65536 }],
    };
    let mut expected = control_header(kind::SETTINGS, FLAG_CLEAR_SETTINGS, 12);
    expected.extend_from_slice(&[0, 0, 0, 1, 1, 0, 0, 7, 0, 1, 0, 0]);
    assert_eq!(settings.to_bytes(), expected);

    let ping = Frame::Ping { id: 0x0102_0304 };
    let mut expected = control_header(kind::PING, 0, 4);
    expected.extend_from_slice(&[1, 2, 3, 4]);
    assert_eq!(ping.to_bytes(), expected);

    let goaway = Frame::GoAway { last_good_stream_id: 9, status: goaway::PROTOCOL_ERROR };
    let mut expected = control_header(kind::GOAWAY, 0, 8);
    expected.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 1]);
    assert_eq!(goaway.to_bytes(), expected);

    let headers = Frame::Headers { stream_id: 1, fin: false, header_block: vec![] };
    let mut expected = control_header(kind::HEADERS, 0, 4);
    expected.extend_from_slice(&[0, 0, 0, 1]);
    assert_eq!(headers.to_bytes(), expected);

    let window = Frame::WindowUpdate { stream_id: 0, delta: 0x7fff_ffff };
    let mut expected = control_header(kind::WINDOW_UPDATE, 0, 8);
    expected.extend_from_slice(&[0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff]);
    assert_eq!(window.to_bytes(), expected);

    for frame in [data, syn, reply, rst, settings, ping, goaway, headers, window] {
        assert_eq!(parse(&frame.to_bytes()), Ok(frame));
    }
}

/// N3: the reserved bits are ignored when read and cleared when written.
#[test]
fn n3_reserved_bits_are_ignored() {
    let mut bytes = control_header(kind::RST_STREAM, 0, 8);
    bytes.extend_from_slice(&[0x80, 0, 0, 3, 0, 0, 0, 1]);
    assert_eq!(parse(&bytes), Ok(Frame::RstStream { stream_id: 3, status: rst::PROTOCOL_ERROR }));
    let written = Frame::Data { stream_id: u32::MAX, fin: false, data: vec![] }.to_bytes();
    assert_eq!(written[..4], [0x7f, 0xff, 0xff, 0xff]);
}

/// N3: NOOP, CREDENTIAL and types to come are read as unknown frames, to be ignored.
#[test]
fn n3_unknown_control_frames_are_kept_apart() {
    for kind in [5, 10, 0x1234] {
        let mut bytes = control_header(kind, 0x42, 3);
        bytes.extend_from_slice(b"abc");
        assert_eq!(
            parse(&bytes),
            Ok(Frame::Unknown { kind, flags: 0x42, payload: b"abc".to_vec() })
        );
    }
}

/// N3: frames the draft does not allow are refused with what is wrong.
#[test]
fn n3_malformed_frames_are_refused() {
    let mut v2 = control_header(kind::PING, 0, 4);
    v2[1] = 2;
    v2.extend_from_slice(&[0; 4]);
    assert_eq!(parse(&v2), Err(Error::Version(2)));

    let short = |kind, len: usize| {
        let mut bytes = control_header(kind, 0, len as u32);
        bytes.extend(std::iter::repeat_n(0x01, len));
        parse(&bytes)
    };
    assert!(matches!(short(kind::SYN_STREAM, 9), Err(Error::Length { frame: "SYN_STREAM", .. })));
    assert!(matches!(short(kind::SYN_REPLY, 3), Err(Error::Length { .. })));
    assert!(matches!(short(kind::HEADERS, 3), Err(Error::Length { .. })));
    assert!(matches!(short(kind::RST_STREAM, 9), Err(Error::Length { .. })));
    assert!(matches!(short(kind::PING, 5), Err(Error::Length { .. })));
    assert!(matches!(short(kind::GOAWAY, 4), Err(Error::Length { .. })));
    assert!(matches!(short(kind::WINDOW_UPDATE, 7), Err(Error::Length { .. })));
    assert!(matches!(short(kind::SETTINGS, 2), Err(Error::Length { .. })));
    // A count of 0x01010101 entries in 4 bytes.
    assert!(matches!(short(kind::SETTINGS, 8), Err(Error::SettingsCount { .. })));

    let mut zero = control_header(kind::SYN_REPLY, 0, 4);
    zero.extend_from_slice(&[0x80, 0, 0, 0]);
    assert_eq!(parse(&zero), Err(Error::StreamZero { frame: "SYN_REPLY" }));

    let mut no_delta = control_header(kind::WINDOW_UPDATE, 0, 8);
    no_delta.extend_from_slice(&[0, 0, 0, 1, 0x80, 0, 0, 0]);
    assert_eq!(parse(&no_delta), Err(Error::Delta(0)));
}

/// N3: a frame split anywhere comes out whole once its last byte is in, and not before.
#[test]
fn n3_decoder_waits_for_whole_frames() {
    let frames = [
        Frame::Ping { id: 1 },
        Frame::Data { stream_id: 1, fin: false, data: vec![7; 300] },
        Frame::WindowUpdate { stream_id: 1, delta: 10 },
    ];
    let bytes: Vec<u8> = frames.iter().flat_map(Frame::to_bytes).collect();
    for cut in 0..bytes.len() {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        for part in [&bytes[..cut], &bytes[cut..]] {
            decoder.extend(part);
            while let Some(frame) = decoder.next_frame().unwrap() {
                out.push(frame);
            }
        }
        assert_eq!(out, frames, "cut at {cut}");
        assert_eq!(decoder.buffered(), 0);
    }
}

/// N3: a frame longer than the limit is refused from its header, before its payload is
/// buffered.
#[test]
fn n3_decoder_refuses_frames_past_its_limit() {
    let mut decoder = Decoder::new(16);
    decoder.extend(&Frame::Data { stream_id: 1, fin: false, data: vec![0; 16] }.to_bytes());
    assert!(matches!(decoder.next_frame(), Ok(Some(Frame::Data { .. }))));
    decoder.extend(&[0, 0, 0, 1, 0, 0, 0, 17]);
    assert_eq!(decoder.next_frame(), Err(Error::TooLarge { length: 17, limit: 16 }));
    assert_eq!(frame_len(&[0, 0, 0, 1, 0, 0, 1, 0]), Some(8 + 256));
}

pub(crate) fn any_frame() -> impl Strategy<Value = Frame> {
    let id = 1..=MAX_STREAM_ID;
    let bytes = proptest::collection::vec(any::<u8>(), 0..64);
    prop_oneof![
        (0..=MAX_STREAM_ID, any::<bool>(), bytes.clone())
            .prop_map(|(stream_id, fin, data)| Frame::Data { stream_id, fin, data }),
        (
            id.clone(),
            0..=MAX_STREAM_ID,
            0u8..8,
            any::<u8>(),
            any::<bool>(),
            any::<bool>(),
            bytes.clone()
        )
            .prop_map(
                |(stream_id, associated_to, priority, slot, fin, unidirectional, header_block)| {
                    Frame::SynStream {
                        stream_id,
                        associated_to,
                        priority,
                        slot,
                        fin,
                        unidirectional,
                        header_block,
                    }
                }
            ),
        (id.clone(), any::<bool>(), bytes.clone()).prop_map(|(stream_id, fin, header_block)| {
            Frame::SynReply { stream_id, fin, header_block }
        }),
        (id.clone(), any::<u32>())
            .prop_map(|(stream_id, status)| Frame::RstStream { stream_id, status }),
        (
            any::<bool>(),
            proptest::collection::vec((any::<u8>(), 0u32..1 << 24, any::<u32>()), 0..5)
        )
            .prop_map(|(clear, entries)| Frame::Settings {
                clear,
                entries: entries
                    .into_iter()
                    .map(|(flags, id, value)| Setting { flags, id, value })
                    .collect(),
            }),
        any::<u32>().prop_map(|id| Frame::Ping { id }),
        (0..=MAX_STREAM_ID, any::<u32>()).prop_map(|(last_good_stream_id, status)| Frame::GoAway {
            last_good_stream_id,
            status
        }),
        (id, any::<bool>(), bytes.clone()).prop_map(|(stream_id, fin, header_block)| {
            Frame::Headers { stream_id, fin, header_block }
        }),
        (0..=MAX_STREAM_ID, 1..=MAX_STREAM_ID)
            .prop_map(|(stream_id, delta)| Frame::WindowUpdate { stream_id, delta }),
        (10u16..=u16::MAX, any::<u8>(), bytes).prop_map(|(kind, flags, payload)| Frame::Unknown {
            kind,
            flags,
            payload
        }),
    ]
}

proptest! {
    /// N3: any frame written, fed to the decoder in any pieces, comes back as it was.
    #[test]
    fn n3_frames_round_trip(frames in proptest::collection::vec(any_frame(), 1..6), step in 1usize..40) {
        let bytes: Vec<u8> = frames.iter().flat_map(Frame::to_bytes).collect();
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        for chunk in bytes.chunks(step) {
            decoder.extend(chunk);
            while let Some(frame) = decoder.next_frame().unwrap() {
                out.push(frame);
            }
        }
        prop_assert_eq!(out, frames);
    }

    /// N3: any bytes are framed or refused, never a panic; a frame read writes back to
    /// the same bytes when its reserved bits are clear.
    #[test]
    fn n3_any_bytes_parse_or_fail(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Some(len) = frame_len(&bytes) && len <= bytes.len() && let Ok(frame) = parse(&bytes[..len]) {
            let again = parse(&frame.to_bytes());
            prop_assert_eq!(again, Ok(frame));
        }
    }
}
