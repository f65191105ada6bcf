//! The CRI log format: one record per line, `<timestamp> <stream> <tag> <content>\n`, the
//! timestamp RFC 3339 with nanoseconds, the stream `stdout` or `stderr`, the tag `F` for a
//! record that ends a line or `P` for a part of one (a line longer than
//! [`MAX_RECORD_CONTENT`], or the last output of a stream when it ends without a newline,
//! as containerd's CRI plugin writes them).
//!
//! [`LineSplitter`] turns a stream's bytes into records ([`complete`] does it without
//! holding the start of a line), [`encode`] writes one, [`decode`]
//! reads one and [`Joiner`] puts the parts of a line back together. No IO here.

use crate::time::Time;

/// containerd CRI's maximum record content (`max_container_log_line_size`): longer lines
/// are split into `P` parts of this size.
pub const MAX_RECORD_CONTENT: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// `P`: a part of a line; the line goes on in the next record of the same stream.
    Partial,
    /// `F`: the end of a line.
    Full,
}

impl Tag {
    pub fn as_str(self) -> &'static str {
        match self {
            Tag::Partial => "P",
            Tag::Full => "F",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("malformed CRI log record (expected `TIMESTAMP STREAM TAG CONTENT`)")]
    Fields,
    #[error("malformed CRI log record: unknown stream {0:?} (expected stdout or stderr)")]
    Stream(String),
    #[error("malformed CRI log record: unknown tag {0:?} (expected P or F)")]
    Tag(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Appends the record `<time> <stream> <tag> <content>\n` to `out`; the time in UTC with
/// nine fractional digits (fixed width, so records sort by their text).
pub fn encode(out: &mut Vec<u8>, time: Time, stream: Stream, tag: Tag, content: &[u8]) {
    time.write_rfc3339_nanos(out);
    out.push(b' ');
    out.extend_from_slice(stream.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(tag.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(content);
    out.push(b'\n');
}

/// Cuts one stream's bytes into record contents: a line (without its `\n`, and without a
/// `\r` before it) is one `F` record, or `P` parts of [`MAX_RECORD_CONTENT`] bytes and a
/// last `F`; what is left when the stream ends is a last `P` record.
#[derive(Debug, Default)]
pub struct LineSplitter {
    /// The start of a line whose end has not arrived; at most [`MAX_RECORD_CONTENT`].
    pending: Vec<u8>,
}

impl LineSplitter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes of the stream; `emit` gets each record that is complete.
    pub fn push(&mut self, bytes: &[u8], mut emit: impl FnMut(Tag, &[u8])) {
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            if self.pending.is_empty() {
                emit_line(&rest[..end], &mut emit);
            } else {
                self.pending.extend_from_slice(&rest[..end]);
                emit_line(&self.pending, &mut emit);
                self.pending.clear();
            }
            rest = &rest[end + 1..];
        }
        self.pending.extend_from_slice(rest);
        let mut start = 0;
        while self.pending.len() - start > MAX_RECORD_CONTENT {
            emit(Tag::Partial, &self.pending[start..start + MAX_RECORD_CONTENT]);
            start += MAX_RECORD_CONTENT;
        }
        self.pending.drain(..start);
    }

    /// The stream ended: what is left (a line without a newline) is a `P` record.
    pub fn finish(&mut self, mut emit: impl FnMut(Tag, &[u8])) {
        if !self.pending.is_empty() {
            emit(Tag::Partial, &self.pending);
            self.pending.clear();
        }
    }
}

/// The records that can be written from the start of a stream's unread bytes `bytes`,
/// and how many bytes they account for (the bytes to consume): every complete line, and
/// of a line longer than [`MAX_RECORD_CONTENT`] its parts but the last; with `end` (no
/// more bytes will come) the rest too, as a `P` record. What is not accounted for (the
/// start of a line) is to be read again, with what follows it, next time. Fed this way,
/// a stream gives the same records as [`LineSplitter`] (the node logger reads a FIFO
/// without consuming it, `tee(2)`, and consumes only what it has written).
pub fn complete(bytes: &[u8], end: bool, mut emit: impl FnMut(Tag, &[u8])) -> usize {
    let mut done = 0;
    while let Some(newline) = bytes[done..].iter().position(|&b| b == b'\n') {
        emit_line(&bytes[done..done + newline], &mut emit);
        done += newline + 1;
    }
    while bytes.len() - done > MAX_RECORD_CONTENT {
        emit(Tag::Partial, &bytes[done..done + MAX_RECORD_CONTENT]);
        done += MAX_RECORD_CONTENT;
    }
    if end && done < bytes.len() {
        emit(Tag::Partial, &bytes[done..]);
        done = bytes.len();
    }
    done
}

fn emit_line(line: &[u8], emit: &mut impl FnMut(Tag, &[u8])) {
    let mut line = line.strip_suffix(b"\r").unwrap_or(line);
    while line.len() > MAX_RECORD_CONTENT {
        let (part, rest) = line.split_at(MAX_RECORD_CONTENT);
        emit(Tag::Partial, part);
        line = rest;
    }
    emit(Tag::Full, line);
}

/// One decoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub timestamp: &'a str,
    pub stream: Stream,
    pub tag: Tag,
    pub content: &'a [u8],
}

/// Decodes one record, `line` without its `\n`. Like kubelet, the tag field may carry more
/// `:`-separated tags after the first; only the first counts.
pub fn decode(line: &[u8]) -> Result<Record<'_>> {
    let mut fields = line.splitn(4, |&b| b == b' ');
    let (Some(timestamp), Some(stream), Some(tags), Some(content)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(Error::Fields);
    };
    let timestamp = std::str::from_utf8(timestamp).map_err(|_| Error::Fields)?;
    if timestamp.is_empty() {
        return Err(Error::Fields);
    }
    let stream = match stream {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        other => return Err(Error::Stream(String::from_utf8_lossy(other).into_owned())),
    };
    let tag = match tags.split(|&b| b == b':').next() {
        Some(b"P") => Tag::Partial,
        Some(b"F") => Tag::Full,
        _ => return Err(Error::Tag(String::from_utf8_lossy(tags).into_owned())),
    };
    Ok(Record { timestamp, stream, tag, content })
}

/// A line of a container's output, put back together from its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The timestamp of its first record.
    pub timestamp: String,
    pub stream: Stream,
    /// Without the newline.
    pub content: Vec<u8>,
    /// Whether the line ended with a newline (false for output that ended without one).
    pub newline: bool,
}

/// Joins the `P` records of a line with the `F` record that ends it, for each stream
/// separately (the two streams' records interleave in the file).
#[derive(Debug, Default)]
pub struct Joiner {
    stdout: Option<Line>,
    stderr: Option<Line>,
}

impl Joiner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a record; returns the line it ends, if it is an `F` record.
    pub fn push(&mut self, record: Record<'_>) -> Option<Line> {
        let slot = match record.stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        let line = slot.get_or_insert_with(|| Line {
            timestamp: record.timestamp.to_owned(),
            stream: record.stream,
            content: Vec::new(),
            newline: false,
        });
        line.content.extend_from_slice(record.content);
        match record.tag {
            Tag::Partial => None,
            Tag::Full => {
                let mut line = slot.take()?;
                line.newline = true;
                Some(line)
            }
        }
    }

    /// No more records will come: the lines begun and not ended (output that ended without
    /// a newline), oldest first.
    pub fn finish(&mut self) -> Vec<Line> {
        let mut lines: Vec<Line> =
            [self.stdout.take(), self.stderr.take()].into_iter().flatten().collect();
        lines.sort_by(|a, b| a.timestamp.cmp(&b.timestamp));
        lines
    }
}

#[cfg(test)]
mod tests;
