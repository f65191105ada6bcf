//! N3: kubelet's port-forward over SPDY/3.1, to real TCP servers on the loopback.

use std::io;

use futures::FutureExt;
use futures::future::BoxFuture;
use outpost_formats::spdy::frame::{Frame, rst};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::api::spdy::test_client::{Client, Event};

/// Connects to the host's loopback, where the tests' servers listen.
struct Loopback;

impl PortDialer for Loopback {
    fn pod(&self) -> String {
        "web, uid 1234".to_owned()
    }

    fn dial(&self, port: u16) -> BoxFuture<'static, io::Result<TcpStream>> {
        TcpStream::connect(("127.0.0.1", port)).boxed()
    }
}

/// A server that answers each connection with `<prefix>` and what it read, upper-cased,
/// once the client has finished sending.
async fn upper_server(prefix: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut read = Vec::new();
                socket.read_to_end(&mut read).await.unwrap();
                socket.write_all(prefix.as_bytes()).await.unwrap();
                socket.write_all(&read.to_ascii_uppercase()).await.unwrap();
            });
        }
    });
    port
}

/// What the server sends on `stream_id`, up to its FIN (other frames skipped).
async fn read_stream(client: &mut Client, stream_id: u32) -> String {
    let mut text = String::new();
    loop {
        if let Some(Event::Frame(Frame::Data { stream_id: id, fin, data })) = client.next().await
            && id == stream_id
        {
            text.push_str(&String::from_utf8_lossy(&data));
            if fin {
                return text;
            }
        }
    }
}

fn limits() -> Limits {
    Limits { max_streams: 128, idle_timeout: None }
}

fn headers(pairs: &[(&str, &str)]) -> Headers {
    Headers(pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect())
}

/// N3: pairs of streams, each a connection to its port; several at once, on two ports;
/// the client's FIN reaches the server as the end of its input, the server's end is the
/// data stream's FIN, and the error stream ends empty.
#[tokio::test]
async fn n3_pairs_forward_to_their_ports() {
    let (a, b) = (upper_server("a:").await, upper_server("b:").await);
    let (mut client, io) = Client::pair();
    let server = tokio::spawn(serve(io, Arc::new(Loopback), limits()));
    let mut pairs = Vec::new();
    for (request, port) in [("0", a), ("1", b), ("2", a)] {
        let port = port.to_string();
        let error =
            client.open(&[("streamType", "error"), ("port", &port), ("requestID", request)]).await;
        let data =
            client.open(&[("streamType", "data"), ("port", &port), ("requestID", request)]).await;
        pairs.push((error, data));
    }
    for (i, (_, data)) in pairs.iter().enumerate() {
        client.send(*data, format!("hello {i}").as_bytes(), true).await;
    }
    let mut finished = 0;
    let mut transcript = crate::api::spdy::test_client::Transcript::default();
    while finished < 6 {
        match client.next().await.expect("the connection is open") {
            Event::Frame(Frame::Data { stream_id, fin, data }) => {
                transcript.data.entry(stream_id).or_default().extend_from_slice(&data);
                finished += usize::from(fin);
            }
            Event::Reply { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(transcript.text(pairs[0].1), "a:HELLO 0");
    assert_eq!(transcript.text(pairs[1].1), "b:HELLO 1");
    assert_eq!(transcript.text(pairs[2].1), "a:HELLO 2");
    for (error, _) in &pairs {
        assert_eq!(transcript.text(*error), "");
    }
    drop(client);
    server.await.unwrap();
}

/// N3: a port nobody listens on is reported on the pair's error stream.
#[tokio::test]
async fn n3_a_failed_dial_is_written_on_the_error_stream() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let (mut client, io) = Client::pair();
    let _server = tokio::spawn(serve(io, Arc::new(Loopback), limits()));
    let port = closed.to_string();
    let error = client.open(&[("streamType", "error"), ("port", &port), ("requestID", "7")]).await;
    let _data = client.open(&[("streamType", "data"), ("port", &port), ("requestID", "7")]).await;
    let message = read_stream(&mut client, error).await;
    assert!(
        message.starts_with(&format!("error forwarding port {closed} to pod web, uid 1234: ")),
        "{message}"
    );
}

/// N3: streams without a valid port or stream type are refused, as kubelet refuses them.
#[tokio::test]
async fn n3_streams_without_valid_headers_are_refused() {
    let (mut client, io) = Client::pair();
    let _server = tokio::spawn(serve(io, Arc::new(Loopback), limits()));
    for bad in [
        &[("streamType", "data")][..],
        &[("streamType", "data"), ("port", "http")],
        &[("streamType", "data"), ("port", "0")],
        &[("streamType", "stdin"), ("port", "80")],
        &[("port", "80")],
    ] {
        let id = client.open(bad).await;
        assert_eq!(
            client.next().await,
            Some(Event::Frame(Frame::RstStream { stream_id: id, status: rst::REFUSED_STREAM })),
            "{bad:?}"
        );
    }
}

/// N3: a second stream of the same kind for a pair being opened is told on the pair's
/// error stream in kubelet's words, and reset (it holds no place under the connection's
/// cap on streams); the pair then completes as usual.
#[tokio::test]
async fn n3_a_duplicate_stream_of_a_pair_is_reported_and_reset() {
    let port = upper_server("a:").await.to_string();
    let (mut client, io) = Client::pair();
    let _server = tokio::spawn(serve(io, Arc::new(Loopback), limits()));
    let error = client.open(&[("streamType", "error"), ("port", &port), ("requestID", "9")]).await;
    let again = client.open(&[("streamType", "error"), ("port", &port), ("requestID", "9")]).await;
    let mut message = String::new();
    let mut reset = None;
    while reset.is_none() || message.is_empty() {
        match client.next().await.expect("the connection is open") {
            Event::Frame(Frame::Data { stream_id, data, .. }) if stream_id == error => {
                message.push_str(&String::from_utf8_lossy(&data));
            }
            Event::Frame(Frame::RstStream { stream_id, status }) => {
                reset = Some((stream_id, status))
            }
            _ => {}
        }
    }
    assert_eq!(message, "error processing stream for request 9: error stream already assigned");
    assert_eq!(reset, Some((again, rst::REFUSED_STREAM)));
    let data = client.open(&[("streamType", "data"), ("port", &port), ("requestID", "9")]).await;
    client.send(data, b"hi", true).await;
    assert_eq!(read_stream(&mut client, data).await, "a:HI");
}

/// N3: kubelet's header checks and its pairing of older clients' streams by ID.
#[test]
fn n3_headers_and_request_ids() {
    assert_eq!(
        check(&headers(&[("port", "8080"), ("streamtype", "data")])),
        Ok((8080, StreamType::Data))
    );
    let refused = |pairs: &[(&str, &str)]| check(&headers(pairs)).unwrap_err().to_string();
    assert_eq!(refused(&[("streamtype", "data")]), "\"port\" header is required");
    assert!(
        refused(&[("port", "70000"), ("streamtype", "data")])
            .starts_with("unable to parse \"70000\"")
    );
    assert_eq!(refused(&[("port", "1")]), "\"streamType\" header is required");
    assert_eq!(refused(&[("port", "1"), ("streamtype", "x")]), "invalid stream type \"x\"");
    let with_id = headers(&[("requestid", "42")]);
    assert_eq!(request_id(&with_id, 9, StreamType::Data), "42");
    assert_eq!(request_id(&Headers::default(), 1, StreamType::Error), "1");
    assert_eq!(request_id(&Headers::default(), 3, StreamType::Data), "1");
}

/// N3: a pair whose other stream does not come within 30 seconds is told so on its
/// error stream.
#[tokio::test(start_paused = true)]
async fn n3_an_incomplete_pair_times_out() {
    let (mut client, io) = Client::pair();
    let _server = tokio::spawn(serve(io, Arc::new(Loopback), limits()));
    let error = client.open(&[("streamType", "error"), ("port", "80"), ("requestID", "5")]).await;
    let message = read_stream(&mut client, error).await;
    assert_eq!(message, "(request=5) timed out waiting for streams");
}
