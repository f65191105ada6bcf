use super::*;

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().unwrap()
}

#[test]
fn no_parameters_read_the_current_run_whole() {
    assert_eq!(parse(None, now()).unwrap(), Options::default());
    assert_eq!(parse(Some(""), now()).unwrap(), Options::default());
}

#[test]
fn every_kubelet_parameter_is_read() {
    let options = parse(
        Some("follow=true&tailLines=10&timestamps=1&limitBytes=500&sinceTime=2024-05-01T11%3A00%3A00Z&container=ignored"),
        now(),
    )
    .unwrap();
    assert_eq!(
        options,
        Options {
            previous: false,
            follow: true,
            tail: Some(10),
            since: Some("2024-05-01T11:00:00Z".parse().unwrap()),
            timestamps: true,
            limit_bytes: Some(500),
        }
    );
    let options = parse(Some("previous&sinceSeconds=60&tailLines=0"), now()).unwrap();
    assert!(options.previous && !options.follow);
    assert_eq!(options.tail, Some(0));
    assert_eq!(options.since, Some("2024-05-01T11:59:00Z".parse().unwrap()));
}

#[test]
fn bad_parameters_are_refused_naming_the_parameter() {
    for (query, named) in [
        ("follow=maybe", "follow"),
        ("tailLines=-1", "tailLines"),
        ("tailLines=ten", "tailLines"),
        ("limitBytes=0", "limitBytes"),
        ("sinceSeconds=0", "sinceSeconds"),
        ("sinceTime=yesterday", "sinceTime"),
        ("sinceSeconds=5&sinceTime=2024-05-01T11:00:00Z", "at most one"),
        ("follow=true&previous=true", "previous"),
    ] {
        let error = parse(Some(query), now()).unwrap_err().to_string();
        assert!(error.contains(named), "{query}: {error}");
    }
}

#[test]
fn only_a_followed_container_log_streams() {
    let uri = |s: &str| s.parse::<Uri>().unwrap();
    assert!(streams(&uri("/containerLogs/a/b/c?follow=true")));
    assert!(streams(&uri("/containerLogs/a/b/c?tailLines=1&follow")));
    assert!(!streams(&uri("/containerLogs/a/b/c?follow=false")));
    assert!(!streams(&uri("/containerLogs/a/b/c")));
    assert!(!streams(&uri("/pods?follow=true")));
    assert!(!streams(&uri("/metrics")));
}

#[test]
fn a_pods_containers_include_init_and_ephemeral_ones() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {
            "containers": [{"name": "app"}, {"name": "side"}],
            "initContainers": [{"name": "setup"}],
            "ephemeralContainers": [{"name": "debug"}],
        }
    }))
    .unwrap();
    assert_eq!(container_names(&pod), ["app", "side", "setup", "debug"]);
    assert!(container_names(&Pod::default()).is_empty());
}

#[test]
fn the_channel_writer_sends_on_flush_and_fails_once_the_client_is_gone() {
    let (tx, mut rx) = mpsc::channel(4);
    let mut writer = ChannelWriter { tx, buffer: Vec::new() };
    writer.write_all(b"hello ").unwrap();
    writer.write_all(b"world\n").unwrap();
    assert!(rx.try_recv().is_err(), "nothing before a flush or a full chunk");
    writer.flush().unwrap();
    assert_eq!(rx.try_recv().unwrap(), Bytes::from_static(b"hello world\n"));
    writer.write_all(&vec![b'x'; CHUNK_BYTES]).unwrap();
    assert_eq!(rx.try_recv().unwrap().len(), CHUNK_BYTES, "a full chunk goes at once");
    drop(rx);
    writer.write_all(b"more").unwrap();
    let error = writer.flush().unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::BrokenPipe);
}

#[test]
fn output_goes_in_chunks_of_at_most_chunk_bytes() {
    // The chunks waiting for a client bound a stream's memory (CHANNEL_CHUNKS of them).
    let (tx, mut rx) = mpsc::channel(64);
    let mut out = ChannelWriter { tx, buffer: Vec::new() };
    let output: Vec<u8> = (0..100 * 1024).map(|i| (i % 251) as u8).collect();
    for piece in output.chunks(7_000) {
        out.write_all(piece).unwrap();
    }
    out.write_all(b"").unwrap();
    out.flush().unwrap();
    drop(out);
    let mut chunks = Vec::new();
    while let Ok(chunk) = rx.try_recv() {
        chunks.push(chunk);
    }
    let sizes: Vec<usize> = chunks.iter().map(Bytes::len).collect();
    assert_eq!(sizes, [CHUNK_BYTES, CHUNK_BYTES, CHUNK_BYTES, 100 * 1024 - 3 * CHUNK_BYTES]);
    assert_eq!(chunks.concat(), output);
}
