//! N3: the SPDY/3.1 connection's server side against a client written on the frame
//! codec (`test_client`).

use outpost_formats::spdy::frame::{Frame, Setting, goaway, rst, settings};
use outpost_formats::spdy::session::INITIAL_WINDOW;
use std::time::Duration;

use super::*;
use crate::api::spdy::test_client::{Client, Event};

fn accept_all() -> Accept {
    Box::new(|_| Ok(()))
}

/// N3: a stream the client opens is replied to and handed out with its headers; data
/// flows both ways and each side finishes its half; the close is a GOAWAY naming the
/// last stream, then the end of the connection.
#[tokio::test]
async fn n3_streams_carry_data_both_ways_and_close_cleanly() {
    let (mut client, io) = Client::pair();
    let mut connection = Connection::new(io, accept_all(), Limits::default());
    let id = client.open(&[("streamtype", "stdin"), ("x", "1")]).await;
    let Some(Event::Reply { stream_id, .. }) = client.next().await else { panic!("no reply") };
    assert_eq!(stream_id, id);
    let mut stream = connection.accept().await.unwrap();
    assert_eq!((stream.id, stream.headers.get("streamType")), (id, Some("stdin")));

    client.send(id, b"hello", false).await;
    client.send(id, b" world", true).await;
    let mut got = Vec::new();
    while let Some(chunk) = stream.inbound.recv().await {
        got.extend_from_slice(&chunk);
    }
    assert_eq!(got, b"hello world");

    stream.sender.send(b"back").await.unwrap();
    stream.sender.finish().await.unwrap();
    assert!(stream.sender.send(b"late").await.is_err(), "data after FIN");
    connection.close().await;
    let transcript = client.read_to_end().await;
    assert_eq!(transcript.text(id), "back");
    assert_eq!(transcript.finished, [id]);
    assert_eq!(
        transcript.events,
        [Event::Frame(Frame::GoAway { last_good_stream_id: id, status: goaway::OK })]
    );
}

/// N3: a stream the endpoint does not take is refused with REFUSED_STREAM; a stream ID
/// that is even or not above the last is a PROTOCOL_ERROR; DATA on a stream never
/// opened is INVALID_STREAM.
#[tokio::test]
async fn n3_bad_streams_are_reset() {
    let (mut client, io) = Client::pair();
    let accept: Accept = Box::new(|headers| match headers.get("port") {
        Some(_) => Ok(()),
        None => Err("\"port\" header is required".into()),
    });
    let _connection = Connection::new(io, accept, Limits::default());
    let refused = client.open(&[("streamtype", "data")]).await;
    assert_eq!(
        client.next().await,
        Some(Event::Frame(Frame::RstStream { stream_id: refused, status: rst::REFUSED_STREAM }))
    );
    client.open_as(2, &[("port", "80")]).await;
    assert_eq!(
        client.next().await,
        Some(Event::Frame(Frame::RstStream { stream_id: 2, status: rst::PROTOCOL_ERROR }))
    );
    client.send(99, b"x", false).await;
    assert_eq!(
        client.next().await,
        Some(Event::Frame(Frame::RstStream { stream_id: 99, status: rst::INVALID_STREAM }))
    );
}

/// N3: the client's PINGs (odd IDs) are echoed; unknown control frames are ignored.
#[tokio::test]
async fn n3_client_pings_are_answered() {
    let (mut client, io) = Client::pair();
    let _connection = Connection::new(io, accept_all(), Limits::default());
    client.write(Frame::Unknown { kind: 10, flags: 0, payload: vec![1, 2, 3] }).await;
    client.write(Frame::Ping { id: 2 }).await;
    client.write(Frame::Ping { id: 7 }).await;
    assert_eq!(client.next().await, Some(Event::Frame(Frame::Ping { id: 7 })));
}

/// N3: frames that break the framing end the connection with GOAWAY PROTOCOL_ERROR.
#[tokio::test]
async fn n3_unreadable_frames_end_the_connection() {
    let (mut client, io) = Client::pair();
    let mut connection = Connection::new(io, accept_all(), Limits::default());
    client.write(Frame::Ping { id: 1 }).await;
    // A version 2 control frame.
    tokio::io::AsyncWriteExt::write_all(
        &mut client_io(&mut client),
        &[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1],
    )
    .await
    .unwrap();
    let transcript = client.read_to_end().await;
    assert_eq!(
        transcript.events,
        [
            Event::Frame(Frame::Ping { id: 1 }),
            Event::Frame(Frame::GoAway { last_good_stream_id: 0, status: goaway::PROTOCOL_ERROR })
        ]
    );
    assert!(connection.accept().await.is_none());
}

fn client_io(client: &mut Client) -> &mut tokio::io::DuplexStream {
    client.io_mut()
}

/// N3: a client that resets a stream ends it on both sides.
#[tokio::test]
async fn n3_a_reset_stream_ends() {
    let (mut client, io) = Client::pair();
    let mut connection = Connection::new(io, accept_all(), Limits::default());
    let id = client.open(&[("streamtype", "stdout")]).await;
    let mut stream = connection.accept().await.unwrap();
    client.write(Frame::RstStream { stream_id: id, status: rst::CANCEL }).await;
    assert_eq!(stream.inbound.recv().await, None);
    // The reset is read before the next frame: a PING answered says it was.
    client.write(Frame::Ping { id: 1 }).await;
    loop {
        if client.next().await == Some(Event::Frame(Frame::Ping { id: 1 })) {
            break;
        }
    }
    assert_eq!(stream.sender.send(b"x").await, Err(Error::Reset(id)));
}

/// N3: a client that keeps windows (it sent SETTINGS or WINDOW_UPDATE) gets no more
/// data than its window allows until it grows it; received data is acknowledged with
/// WINDOW_UPDATE for the stream and the connection.
#[tokio::test]
async fn n3_flow_control_windows() {
    let (mut client, io) = Client::pair();
    let mut connection = Connection::new(io, accept_all(), Limits::default());
    let entries = vec![Setting { flags: 0, id: settings::INITIAL_WINDOW_SIZE, value: 10 }];
    client.write(Frame::Settings { clear: false, entries }).await;
    let id = client.open(&[("streamtype", "stdout")]).await;
    let stream = connection.accept().await.unwrap();
    let sender = stream.sender.clone();
    let sending = tokio::spawn(async move { sender.send(&[7u8; 25]).await });
    let mut received = 0;
    let mut grants = 0;
    while received < 25 {
        match client.next().await {
            Some(Event::Frame(Frame::Data { data, .. })) => {
                received += data.len();
                // Never past what was granted: 10, then 10 more each time.
                assert!(received <= 10 * (grants + 1), "{received} bytes with {grants} grants");
                if received == 10 * (grants + 1) {
                    grants += 1;
                    client.write(Frame::WindowUpdate { stream_id: id, delta: 10 }).await;
                }
            }
            Some(_) => {}
            None => panic!("the connection ended"),
        }
    }
    sending.await.unwrap().unwrap();

    // 40 KiB in: the server acknowledges 32 KiB and more, per stream and connection.
    let mut inbound = stream.inbound;
    let reader = tokio::spawn(async move { while inbound.recv().await.is_some() {} });
    for _ in 0..10 {
        client.send(id, &[1u8; 4096], false).await;
    }
    let (mut stream_acks, mut connection_acks) = (0, 0);
    while stream_acks == 0 || connection_acks == 0 {
        if let Some(Event::Frame(Frame::WindowUpdate { stream_id, delta })) = client.next().await {
            assert!(delta >= (INITIAL_WINDOW / 2) as u32 || stream_id == id);
            if stream_id == 0 {
                connection_acks += delta;
            } else {
                stream_acks += delta;
            }
        }
    }
    assert!(connection_acks >= 32 * 1024);
    assert!(stream_acks >= 5);
    client.send(id, b"", true).await;
    reader.await.unwrap();
}

/// N3: without SETTINGS or WINDOW_UPDATE from the client (Go's spdystream sends
/// neither), data is not held back at the 64 KiB window.
#[tokio::test]
async fn n3_clients_without_flow_control_are_not_stalled() {
    let (mut client, io) = Client::pair();
    let mut connection = Connection::new(io, accept_all(), Limits::default());
    let id = client.open(&[("streamtype", "stdout")]).await;
    let stream = connection.accept().await.unwrap();
    let big = vec![3u8; 200 * 1024];
    stream.sender.send(&big).await.unwrap();
    stream.sender.finish().await.unwrap();
    connection.close().await;
    let transcript = client.read_to_end().await;
    assert_eq!(transcript.data[&id].len(), big.len());
}

/// N3: a connection that carries no frame for the idle timeout (kubelet's
/// streamingConnectionIdleTimeout) resets its open streams and goes away; frames in
/// and DATA out restart the timer.
#[tokio::test(start_paused = true)]
async fn n3_idle_connections_are_closed() {
    let (mut client, io) = Client::pair();
    let limits = Limits { idle_timeout: Some(Duration::from_secs(60)), ..Limits::default() };
    let mut connection = Connection::new(io, accept_all(), limits);
    let id = client.open(&[("streamtype", "stdout")]).await;
    let mut stream = connection.accept().await.unwrap();
    assert!(matches!(client.next().await, Some(Event::Reply { .. })));
    let started = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(40)).await;
    client.write(Frame::Ping { id: 1 }).await;
    assert_eq!(client.next().await, Some(Event::Frame(Frame::Ping { id: 1 })));
    tokio::time::sleep(Duration::from_secs(40)).await;
    stream.sender.send(b"still here").await.unwrap();
    let transcript = client.read_to_end().await;
    assert_eq!(transcript.text(id), "still here");
    assert_eq!(
        transcript.events,
        [
            Event::Frame(Frame::RstStream { stream_id: id, status: rst::CANCEL }),
            Event::Frame(Frame::GoAway { last_good_stream_id: id, status: goaway::OK }),
        ]
    );
    assert!(started.elapsed() >= Duration::from_secs(140), "closed after {:?}", started.elapsed());
    assert_eq!(stream.inbound.recv().await, None);
    assert_eq!(stream.sender.send(b"late").await, Err(Error::Closed));
    assert!(connection.closed().is_cancelled());
}

/// N3: past its cap on open streams a connection refuses new ones with
/// REFUSED_STREAM; once one ends, another may open.
#[tokio::test]
async fn n3_streams_past_the_cap_are_refused() {
    let (mut client, io) = Client::pair();
    let limits = Limits { max_streams: 2, ..Limits::default() };
    let mut connection = Connection::new(io, accept_all(), limits);
    let first = client.open(&[("streamtype", "data")]).await;
    let _second = client.open(&[("streamtype", "data")]).await;
    let third = client.open(&[("streamtype", "data")]).await;
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(client.next().await.unwrap());
    }
    assert_eq!(
        events[2],
        Event::Frame(Frame::RstStream { stream_id: third, status: rst::REFUSED_STREAM })
    );
    let stream = connection.accept().await.unwrap();
    assert_eq!(stream.id, first);
    client.send(first, b"", true).await;
    stream.sender.finish().await.unwrap();
    assert_eq!(
        client.next().await,
        Some(Event::Frame(Frame::Data { stream_id: first, fin: true, data: vec![] }))
    );
    let fourth = client.open(&[("streamtype", "data")]).await;
    assert!(
        matches!(client.next().await, Some(Event::Reply { stream_id, .. }) if stream_id == fourth)
    );
}
