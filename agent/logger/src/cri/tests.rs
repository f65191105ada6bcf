use proptest::prelude::*;

use super::*;

fn split(chunks: &[&[u8]], finish: bool) -> Vec<(Tag, Vec<u8>)> {
    let mut splitter = LineSplitter::new();
    let mut records = Vec::new();
    for chunk in chunks {
        splitter.push(chunk, |tag, content| records.push((tag, content.to_vec())));
    }
    if finish {
        splitter.finish(|tag, content| records.push((tag, content.to_vec())));
    }
    records
}

/// What the node logger writes from a FIFO that receives `chunks`: at each chunk it reads
/// everything unread (`tee`), writes the records [`complete`] finds and consumes only
/// their bytes; `end`: the writers have gone after the last chunk.
fn tee_and_consume(chunks: &[&[u8]], end: bool) -> Vec<(Tag, Vec<u8>)> {
    let mut fifo = Vec::new();
    let mut records = Vec::new();
    for chunk in chunks {
        fifo.extend_from_slice(chunk);
        let consumed = complete(&fifo, false, |tag, content| records.push((tag, content.to_vec())));
        fifo.drain(..consumed);
    }
    if end {
        let consumed = complete(&fifo, true, |tag, content| records.push((tag, content.to_vec())));
        fifo.drain(..consumed);
        assert!(fifo.is_empty(), "everything is consumed at the end");
    }
    records
}

fn full(s: &str) -> (Tag, Vec<u8>) {
    (Tag::Full, s.as_bytes().to_vec())
}

#[test]
fn encode_writes_a_kubelet_record() {
    let time = Time::from_unix(1_767_323_045, 500_000_000);
    let mut out = Vec::new();
    encode(&mut out, time, Stream::Stdout, Tag::Full, b"hello world");
    encode(&mut out, time, Stream::Stderr, Tag::Partial, b"");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "2026-01-02T03:04:05.500000000Z stdout F hello world\n2026-01-02T03:04:05.500000000Z stderr P \n"
    );
}

#[test]
fn lines_become_full_records_without_line_endings() {
    assert_eq!(split(&[b"a\nbc\r\n\n"], false), [full("a"), full("bc"), full("")]);
}

#[test]
fn a_line_may_arrive_in_pieces() {
    assert_eq!(split(&[b"ab", b"c", b"d\ne", b"f\n"], false), [full("abcd"), full("ef")]);
}

#[test]
fn the_end_of_a_stream_without_newline_is_a_partial_record() {
    assert_eq!(split(&[b"a\nlast"], false), [full("a")]);
    assert_eq!(split(&[b"a\nlast"], true), [full("a"), (Tag::Partial, b"last".to_vec())]);
    assert_eq!(split(&[b"a\n"], true), [full("a")]);
}

#[test]
fn a_line_of_the_maximum_size_is_one_record() {
    let line = vec![b'x'; MAX_RECORD_CONTENT];
    let mut input = line.clone();
    input.push(b'\n');
    assert_eq!(split(&[&input], true), [(Tag::Full, line)]);
}

#[test]
fn longer_lines_are_cut_into_partial_records() {
    let line: Vec<u8> = (0..40 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let mut input = line.clone();
    input.push(b'\n');
    for chunks in
        [vec![&input[..]], input.chunks(1000).collect(), input.chunks(MAX_RECORD_CONTENT).collect()]
    {
        let records = split(&chunks, true);
        let tags: Vec<Tag> = records.iter().map(|(t, _)| *t).collect();
        assert_eq!(tags, [Tag::Partial, Tag::Partial, Tag::Full]);
        assert_eq!(records[0].1, line[..MAX_RECORD_CONTENT]);
        assert_eq!(records[1].1, line[MAX_RECORD_CONTENT..2 * MAX_RECORD_CONTENT]);
        assert_eq!(records[2].1, line[2 * MAX_RECORD_CONTENT..]);
    }
}

#[test]
fn a_partial_line_stays_unconsumed_until_its_newline() {
    let mut records = Vec::new();
    let consumed = complete(b"one\ntw", false, |tag, c| records.push((tag, c.to_vec())));
    assert_eq!((consumed, records), (4, vec![full("one")]));
    let mut records = Vec::new();
    let consumed = complete(b"tw", false, |tag, c| records.push((tag, c.to_vec())));
    assert_eq!((consumed, records), (0, vec![]));
    assert_eq!(tee_and_consume(&[b"one\ntw", b"o\nthr"], false), [full("one"), full("two")]);
}

#[test]
fn a_partial_line_is_a_partial_record_at_the_end() {
    assert_eq!(tee_and_consume(&[b"one\ntw"], true), [full("one"), (Tag::Partial, b"tw".to_vec())]);
}

#[test]
fn a_long_partial_line_is_consumed_a_maximum_record_at_a_time() {
    let long = vec![b'x'; MAX_RECORD_CONTENT + 10];
    let mut records = Vec::new();
    let consumed = complete(&long, false, |tag, c| records.push((tag, c.len())));
    assert_eq!((consumed, records), (MAX_RECORD_CONTENT, vec![(Tag::Partial, MAX_RECORD_CONTENT)]));
    // Exactly the maximum may still end with a newline: one F record then.
    let mut records = Vec::new();
    let consumed =
        complete(&long[..MAX_RECORD_CONTENT], false, |tag, c| records.push((tag, c.len())));
    assert_eq!((consumed, records), (0, vec![]));
}

#[test]
fn decode_reads_the_four_fields() {
    let record = decode(b"2026-01-02T03:04:05.1Z stderr P some  text ").unwrap();
    assert_eq!(
        record,
        Record {
            timestamp: "2026-01-02T03:04:05.1Z",
            stream: Stream::Stderr,
            tag: Tag::Partial,
            content: b"some  text ",
        }
    );
    assert_eq!(decode(b"t stdout F ").unwrap().content, b"");
    assert_eq!(decode(b"t stdout F:extra x").unwrap().tag, Tag::Full);
}

#[test]
fn decode_rejects_malformed_records() {
    assert_eq!(decode(b""), Err(Error::Fields));
    assert_eq!(decode(b"t stdout F"), Err(Error::Fields));
    assert_eq!(decode(b" stdout F x"), Err(Error::Fields));
    assert_eq!(decode(b"t stdin F x"), Err(Error::Stream("stdin".into())));
    assert_eq!(decode(b"t stdout X x"), Err(Error::Tag("X".into())));
}

#[test]
fn joiner_joins_parts_per_stream() {
    let mut joiner = Joiner::new();
    let record = |timestamp, stream, tag, content: &'static str| Record {
        timestamp,
        stream,
        tag,
        content: content.as_bytes(),
    };
    assert_eq!(joiner.push(record("t1", Stream::Stdout, Tag::Partial, "hel")), None);
    let err = joiner.push(record("t2", Stream::Stderr, Tag::Full, "oops")).unwrap();
    assert_eq!(
        (err.timestamp.as_str(), err.content.as_slice(), err.newline),
        ("t2", &b"oops"[..], true)
    );
    let out = joiner.push(record("t3", Stream::Stdout, Tag::Full, "lo")).unwrap();
    assert_eq!(
        out,
        Line {
            timestamp: "t1".into(),
            stream: Stream::Stdout,
            content: b"hello".to_vec(),
            newline: true
        }
    );
    assert_eq!(joiner.push(record("t5", Stream::Stdout, Tag::Partial, "b")), None);
    assert_eq!(joiner.push(record("t4", Stream::Stderr, Tag::Partial, "a")), None);
    let rest = joiner.finish();
    let contents: Vec<(&str, &[u8], bool)> =
        rest.iter().map(|l| (l.timestamp.as_str(), l.content.as_slice(), l.newline)).collect();
    assert_eq!(contents, [("t4", &b"a"[..], false), ("t5", &b"b"[..], false)]);
    assert!(joiner.finish().is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever a stream writes, in whatever pieces: records hold at most the maximum, no
    /// newline, and encoding, decoding and joining them gives the output back.
    #[test]
    fn records_round_trip(
        pieces in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 1..16), 0usize..40_000, any::<bool>()),
            0..6,
        ),
        cuts in proptest::collection::vec(0usize..100_000, 0..8),
    ) {
        // Pieces of a repeated pattern, each maybe ending a line. containerd drops a `\r`
        // before `\n`; the property is about the rest.
        let mut data = Vec::new();
        for (pattern, len, newline) in pieces {
            data.extend(pattern.iter().cycle().take(len).map(|&b| if b == b'\r' { b'r' } else { b }));
            if newline {
                data.push(b'\n');
            }
        }
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for cut in cuts.into_iter().chain([data.len()]) {
            chunks.push(&data[start..cut]);
            start = cut;
        }
        let records = split(&chunks, true);
        // The node logger's tee-and-consume reading gives the same records.
        prop_assert_eq!(&tee_and_consume(&chunks, true), &records);
        let mut file = Vec::new();
        for (tag, content) in &records {
            prop_assert!(content.len() <= MAX_RECORD_CONTENT);
            prop_assert!(!content.contains(&b'\n'));
            encode(&mut file, Time::UNIX_EPOCH, Stream::Stdout, *tag, content);
        }
        let mut joiner = Joiner::new();
        let mut output = Vec::new();
        for line in file.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if let Some(line) = joiner.push(decode(line).unwrap()) {
                output.extend_from_slice(&line.content);
                output.push(b'\n');
            }
        }
        for line in joiner.finish() {
            prop_assert!(!line.newline);
            output.extend_from_slice(&line.content);
        }
        prop_assert_eq!(output, data);
    }
}
