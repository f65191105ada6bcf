//! `cri_log`: a container's CRI log file (`<time> <stream> <tag> <content>` lines), as
//! `outpost logs` and the local API's `/containerLogs` read it ([`cri::decode`], the
//! parts of long lines joined by [`Joiner`], `--since` by [`read::at_or_after`]); and the
//! same bytes as a container's output, written as records by the logger
//! ([`LineSplitter`], [`cri::encode`]) and read back.

use jiff::Timestamp;
use outpost::runtime::logs::cri::{self, Joiner, Line, LineSplitter, Stream, Tag};
use outpost::runtime::logs::read;
use outpost::runtime::logs::time::Time;

/// Reads `data` as a log file, then writes it as output and reads that back: the output
/// must come back whole.
pub fn cri_log(data: &[u8]) {
    read_file(data);
    round_trip(data);
}

/// The records of a log file: each complete line decoded (a malformed one skipped, as
/// kubelet does) and its parts joined per stream.
fn read_file(data: &[u8]) {
    let since = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let mut joiner = Joiner::new();
    let mut lines: Vec<Line> = Vec::new();
    let complete = data.iter().rposition(|&b| b == b'\n').map_or(&[][..], |end| &data[..end]);
    for line in complete.split(|&b| b == b'\n') {
        let Ok(record) = cri::decode(line) else { continue };
        assert!(line.ends_with(record.content), "the content is not the end of the line");
        assert!(line.starts_with(record.timestamp.as_bytes()), "the timestamp is not its start");
        let encoded = fields(record.timestamp, record.stream, record.tag, record.content);
        let tags_ok =
            line.get(record.timestamp.len() + record.stream.as_str().len() + 3) == Some(&b' ');
        if tags_ok {
            assert_eq!(encoded, line, "a single-tag record does not encode back to its line");
        }
        lines.extend(joiner.push(record));
    }
    lines.extend(joiner.finish());
    for line in &lines {
        let _ = read::at_or_after(&line.timestamp, Some(since));
    }
}

/// `data` as a container's output, cut where its first byte says: split into records,
/// encoded, decoded and joined, it comes back as it was (a `\r` before a newline dropped).
fn round_trip(data: &[u8]) {
    let time = Time::from_unix(1_700_000_000, 0);
    let cut = data.first().map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let mut file = Vec::new();
    let mut splitter = LineSplitter::new();
    let mut emit = |tag: Tag, content: &[u8]| {
        assert!(content.len() <= cri::MAX_RECORD_CONTENT, "a record over the size limit");
        assert!(!content.contains(&b'\n'), "a record with a newline in it");
        cri::encode(&mut file, time, Stream::Stdout, tag, content);
    };
    splitter.push(&data[..cut], &mut emit);
    splitter.push(&data[cut..], &mut emit);
    splitter.finish(&mut emit);

    let mut joiner = Joiner::new();
    let mut output = Vec::new();
    let records = file.strip_suffix(b"\n").map(|f| f.split(|&b| b == b'\n'));
    for line in records.into_iter().flatten() {
        let record = cri::decode(line).unwrap_or_else(|e| panic!("the logger wrote {line:?}: {e}"));
        assert_eq!(record.stream, Stream::Stdout);
        if let Some(line) = joiner.push(record) {
            output.extend_from_slice(&line.content);
            output.push(b'\n');
        }
    }
    for line in joiner.finish() {
        assert!(!line.newline, "an unfinished line that ended");
        output.extend_from_slice(&line.content);
    }
    assert_eq!(output, without_cr(data), "the output did not come back whole");
}

/// A record's bytes as the logger writes them, without the newline.
fn fields(timestamp: &str, stream: Stream, tag: Tag, content: &[u8]) -> Vec<u8> {
    let parts: [&[u8]; 4] =
        [timestamp.as_bytes(), stream.as_str().as_bytes(), tag.as_str().as_bytes(), content];
    parts.join(&b' ')
}

/// `data` with one `\r` dropped before each newline.
fn without_cr(data: &[u8]) -> Vec<u8> {
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let last = lines.len() - 1;
    let mut out = Vec::with_capacity(data.len());
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        let ended = i < last;
        out.extend_from_slice(if ended { line.strip_suffix(b"\r").unwrap_or(line) } else { line });
    }
    out
}
