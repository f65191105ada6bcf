use super::*;
use crate::api::streams::status::TerminalSize;

#[test]
fn protocol_v5_is_preferred_and_both_names_round_trip() {
    assert_eq!(PROTOCOLS, ["v5.channel.k8s.io", "v4.channel.k8s.io"]);
    for p in [Protocol::V4, Protocol::V5] {
        assert_eq!(Protocol::from_name(p.name()), Some(p));
    }
    for other in ["channel.k8s.io", "base64.channel.k8s.io", "v4.base64.channel.k8s.io", ""] {
        assert_eq!(Protocol::from_name(other), None, "{other}");
    }
}

#[test]
fn stdin_resize_and_close_are_read_by_their_channel_byte() {
    let v5 = Protocol::V5;
    assert_eq!(parse(v5, b"\x00echo hi\n"), Ok(Inbound::Stdin(b"echo hi\n")));
    assert_eq!(parse(v5, b"\x00"), Ok(Inbound::Stdin(b"")));
    assert_eq!(
        parse(v5, b"\x04{\"Width\":101,\"Height\":33}"),
        Ok(Inbound::Resize(b"{\"Width\":101,\"Height\":33}"))
    );
    assert_eq!(parse(v5, &[CLOSE, STDIN]), Ok(Inbound::Close(STDIN)));
    // Empty messages and the server's own channels are nothing to act on.
    assert_eq!(parse(v5, b""), Ok(Inbound::Ignored));
    for channel in [STDOUT, STDERR, ERROR, 9] {
        assert_eq!(parse(v5, &[channel, b'x']), Ok(Inbound::Ignored), "{channel}");
    }
}

#[test]
fn malformed_close_messages_are_errors() {
    assert_eq!(parse(Protocol::V5, &[CLOSE]), Err(Error::Close(0)));
    assert_eq!(parse(Protocol::V5, &[CLOSE, 0, 1]), Err(Error::Close(2)));
}

#[test]
fn protocol_v4_has_no_close_stream_message() {
    assert_eq!(parse(Protocol::V4, &[CLOSE, STDIN]), Ok(Inbound::Ignored));
}

#[test]
fn frames_start_with_their_channel() {
    assert_eq!(frame(STDOUT, b"hi"), b"\x01hi");
    assert_eq!(frame(STDERR, b""), b"\x02");
    assert_eq!(resize(TerminalSize { width: 80, height: 24 }), b"\x04{\"Width\":80,\"Height\":24}");
}
