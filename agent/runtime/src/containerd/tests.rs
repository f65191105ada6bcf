use std::time::Duration;

use tonic::service::Interceptor;

use super::*;

#[test]
fn every_request_carries_the_namespace_and_the_lease_if_any() {
    let mut plain = Metadata { namespace: AsciiMetadataValue::from_static(NAMESPACE), lease: None };
    let request = plain.call(tonic::Request::new(())).unwrap();
    assert_eq!(request.metadata().get(NAMESPACE_HEADER).unwrap(), "outpost");
    assert!(request.metadata().get(LEASE_HEADER).is_none());

    let mut leased = Metadata { lease: Some(AsciiMetadataValue::from_static("l1")), ..plain };
    let request = leased.call(tonic::Request::new(())).unwrap();
    assert_eq!(request.metadata().get(NAMESPACE_HEADER).unwrap(), "outpost");
    assert_eq!(request.metadata().get(LEASE_HEADER).unwrap(), "l1");
}

#[tokio::test]
async fn a_missing_socket_is_named_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("containerd.sock");
    let error = Containerd::connect(&socket).await.unwrap_err();
    assert!(matches!(error, Error::Connect { .. }), "{error:?}");
    let text = outpost_core::error_chain::describe(&error);
    assert!(
        text.contains(&socket.display().to_string()) && text.contains("is containerd running?"),
        "{text}"
    );
}

#[tokio::test]
async fn connect_with_backoff_keeps_retrying_until_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("containerd.sock");
    let backoff = Backoff::new(Duration::from_millis(1), Duration::from_millis(5));
    let waited = tokio::time::timeout(
        Duration::from_millis(200),
        Containerd::connect_with_backoff(&socket, backoff),
    )
    .await;
    assert!(waited.is_err(), "connected to a socket that does not exist");
}

#[tokio::test]
async fn a_connection_broken_under_a_call_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("containerd.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    // Takes the client's HTTP/2 preface and request, then hangs up without an answer.
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await;
    });
    let error = Containerd::connect(&socket).await.unwrap_err();
    server.await.unwrap();
    let Error::Handshake { source, .. } = &error else { panic!("{error:?}") };
    assert!(unreachable(source), "{source:?}");
    // A connection that breaks under a later call (a broken pipe) comes as `Unknown`,
    // the transport error its source.
    let dir = tempfile::tempdir().unwrap();
    let Err(Error::Connect { source: transport, .. }) =
        Containerd::connect(&dir.path().join("gone.sock")).await
    else {
        panic!("connected to a socket that does not exist")
    };
    let mut broken = tonic::Status::unknown("transport error");
    broken.set_source(std::sync::Arc::new(transport));
    assert!(unreachable(&broken), "{broken:?}");
    assert!(!unreachable(&tonic::Status::unknown("not a transport error")));
    assert!(!unreachable(&tonic::Status::not_found("container x")));
    assert!(unreachable(&tonic::Status::unavailable("connection refused")));
}
