use super::*;

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
        Ok(Inbound::Resize(vec![TerminalSize { width: 101, height: 33 }]))
    );
    assert_eq!(
        parse(v5, b"\x04{\"width\":80,\"height\":24}{\"Width\":81,\"Height\":25}"),
        Ok(Inbound::Resize(vec![
            TerminalSize { width: 80, height: 24 },
            TerminalSize { width: 81, height: 25 }
        ]))
    );
    assert_eq!(parse(v5, &[CLOSE, STDIN]), Ok(Inbound::Close(STDIN)));
    // Empty messages and the server's own channels are nothing to act on.
    assert_eq!(parse(v5, b""), Ok(Inbound::Ignored));
    for channel in [STDOUT, STDERR, ERROR, 9] {
        assert_eq!(parse(v5, &[channel, b'x']), Ok(Inbound::Ignored), "{channel}");
    }
}

#[test]
fn malformed_resize_and_close_messages_are_errors() {
    assert_eq!(parse(Protocol::V5, b"\x04{\"Width\":-1}"), Err(Error::Resize));
    assert_eq!(parse(Protocol::V5, b"\x0480x24"), Err(Error::Resize));
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

#[test]
fn success_is_serialized_as_kubelet_sends_it() {
    let frame = Status::exited(&["true".to_owned()], 0).to_frame();
    assert_eq!(frame, b"\x03{\"metadata\":{},\"status\":\"Success\"}");
}

#[test]
fn a_non_zero_exit_is_serialized_as_kubelet_sends_it() {
    let command = ["sh", "-c", "exit 3"].map(str::to_owned);
    let frame = Status::exited(&command, 3).to_frame();
    let expected = r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
    assert_eq!(frame[0], ERROR);
    assert_eq!(std::str::from_utf8(&frame[1..]).unwrap(), expected);
}

#[test]
fn an_internal_error_carries_code_500_and_the_cause() {
    let status = Status::internal_error("container abc: starting the process");
    let json: serde_json::Value = serde_json::to_value(&status).unwrap();
    assert_eq!(json["status"], "Failure");
    assert_eq!(json["reason"], "InternalError");
    assert_eq!(json["code"], 500);
    assert_eq!(
        json["message"],
        "Internal error occurred: error executing command in container: container abc: starting the process"
    );
    assert_eq!(
        json["details"]["causes"][0]["message"],
        "error executing command in container: container abc: starting the process"
    );
}

#[test]
fn a_client_reads_the_exit_code_back() {
    let command = ["false".to_owned()];
    for code in [0, 1, 3, 127, 255] {
        let status: Status =
            serde_json::from_slice(&Status::exited(&command, code).to_frame()[1..]).unwrap();
        assert_eq!(status.exit_code(), Ok(code));
    }
    let failed = Status::internal_error("no such container");
    assert_eq!(
        failed.exit_code().unwrap_err().to_string(),
        "Internal error occurred: error executing command in container: no such container"
    );
    // A status from another server, with fields this one never sends.
    let other: Status = serde_json::from_str(
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"42","field":""}]}}"#,
    )
    .unwrap();
    assert_eq!(other.exit_code(), Ok(42));
    let bare: Status =
        serde_json::from_str(r#"{"status":"Failure","reason":"Forbidden"}"#).unwrap();
    assert_eq!(bare.exit_code().unwrap_err().to_string(), "the command failed (Forbidden)");
}
