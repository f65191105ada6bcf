//! N3: the error stream's status and the resize stream's sizes.

use super::*;

#[test]
fn success_is_serialized_as_kubelet_sends_it() {
    let frame = Status::exited(&["true".to_owned()], 0).to_json();
    assert_eq!(frame, b"{\"metadata\":{},\"status\":\"Success\"}");
}

#[test]
fn a_non_zero_exit_is_serialized_as_kubelet_sends_it() {
    let command = ["sh", "-c", "exit 3"].map(str::to_owned);
    let frame = Status::exited(&command, 3).to_json();
    let expected = r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
    assert_eq!(std::str::from_utf8(&frame).unwrap(), expected);
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
            serde_json::from_slice(&Status::exited(&command, code).to_json()).unwrap();
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

/// N3: the resize stream's JSON objects come out as they complete; anything else stops it.
#[test]
fn n3_resize_decoder() {
    let mut decoder = ResizeDecoder::default();
    assert_eq!(decoder.push(br#"{"Width":1,"Hei"#), []);
    assert_eq!(
        decoder.push(br#"ght":2} {"width":3,"height":4}"#),
        [TerminalSize { width: 1, height: 2 }, TerminalSize { width: 3, height: 4 }]
    );
    assert!(!decoder.failed());
    assert_eq!(decoder.push(b"not json"), []);
    assert!(decoder.failed());
    assert_eq!(decoder.push(br#"{"Width":1,"Height":2}"#), []);
}
