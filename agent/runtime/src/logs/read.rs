//! Reading a container's logs from its CRI files, for `outpost logs` and the local API's
//! `/containerLogs`: the content without the CRI prefixes, the parts of long lines
//! joined, optionally timestamps, only lines since a time, the last N lines, at most N
//! bytes, the previous run, and following appends, rotations and restarts through
//! inotify until the container's directory goes away or the caller stops it.
//! Blocking IO: run it on a thread of its own (or `spawn_blocking`).
//!
//! Memory stays bounded whatever the log's size (10 MiB a file, by default): the file is
//! read a piece at a time, and lines already there are printed as they are read, only a
//! tail's lines being held.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchMask};
use jiff::Timestamp;

use super::cri::{self, Joiner, Line, Record, Stream};
use super::{locate, log_file_name};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Locate(#[from] locate::Error),
    #[error("cannot read the log file {}", .path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot watch {} for new output (inotify)", .path.display())]
    Watch { path: PathBuf, source: io::Error },
    #[error("cannot write the logs")]
    Output(#[source] io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How often a follower with nothing to read asks its caller whether to stop.
const STOP_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// What to read, kubelet's `PodLogOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The run before the current one.
    pub previous: bool,
    /// Keep reading new output.
    pub follow: bool,
    /// Only the last N lines (of those since `since`).
    pub tail: Option<usize>,
    /// Only lines whose first record is at or after this time.
    pub since: Option<Timestamp>,
    /// Start each line with its timestamp (RFC 3339).
    pub timestamps: bool,
    /// Stop after this many bytes of output.
    pub limit_bytes: Option<u64>,
}

/// A container's log opened for reading: the run chosen, its file open and, to follow,
/// the directory watched. Opening is where a missing log is found, before any output.
#[derive(Debug)]
pub struct ContainerLog {
    dir: PathBuf,
    run: u32,
    reader: FileReader,
    inotify: Option<Inotify>,
    options: Options,
}

impl ContainerLog {
    /// Opens the log of the container whose directory is `dir` (`.../<pod dir>/<name>`),
    /// choosing the run from the files there (the agent's status is not at hand: `outpost
    /// logs` while the agent is down); `pod` (`namespace/name`) names it in errors.
    pub fn open(dir: &Path, pod: &str, options: Options) -> Result<ContainerLog> {
        let container =
            dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        // Watch before the first read, so no change after it goes unseen.
        let inotify = if options.follow { Some(watch(dir)?) } else { None };
        let run = locate::run(dir, pod, &container, options.previous)?;
        let reader = FileReader::open(&dir.join(log_file_name(run)))?;
        Ok(ContainerLog { dir: dir.to_path_buf(), run, reader, inotify, options })
    }

    /// Opens run `run` of the container whose directory is `dir`: the run the pod's
    /// status chose (`previous` in `options` is then already decided).
    pub fn open_run(dir: &Path, run: u32, options: Options) -> Result<ContainerLog> {
        let inotify = if options.follow { Some(watch(dir)?) } else { None };
        let reader = FileReader::open(&dir.join(log_file_name(run)))?;
        Ok(ContainerLog { dir: dir.to_path_buf(), run, reader, inotify, options })
    }

    /// Writes the logs to `out`. Following, returns when the container's directory goes
    /// away, when a write fails, or soon after `stop` says so (it is asked whenever
    /// there is nothing to read).
    pub fn copy_to(mut self, out: &mut impl Write, stop: &dyn Fn() -> bool) -> Result<()> {
        let options = self.options.clone();
        let mut printer = Printer {
            out,
            timestamps: options.timestamps,
            since: options.since,
            remaining: options.limit_bytes,
            mid_line: [false; 2],
            failed: None,
        };
        // What is there already: line by line as read, or (for a tail) only the last
        // lines kept, so memory stays bounded by the tail, not by the file.
        let mut joiner = Joiner::new();
        let mut lines = VecDeque::new();
        let since = options.since;
        let mut take = |line: Line, printer: &mut Printer<'_, _>| {
            if !at_or_after(&line.timestamp, since) {
                return;
            }
            match options.tail {
                Some(tail) => keep_last(&mut lines, line, tail),
                None => printer.emit(&line),
            }
        };
        self.reader.read_records(|record| {
            if let Some(line) = joiner.push(record) {
                take(line, &mut printer);
            }
            printer.wants_more()
        })?;
        for line in joiner.finish() {
            take(line, &mut printer);
        }
        for line in &lines {
            printer.line(line)?;
        }
        printer.flush()?;
        let Some(mut inotify) = self.inotify.take() else { return Ok(()) };

        let mut events = vec![0u8; 4096];
        loop {
            if printer.exhausted() {
                return Ok(());
            }
            self.reader.read_records(|record| {
                printer.record(record);
                printer.wants_more()
            })?;
            printer.flush()?;
            if self.reader.replaced()? {
                // Rotated (and the old file read to its end): the new file from its start.
                self.reader = FileReader::open(&self.reader.path.clone())?;
                continue;
            }
            if let Some(newer) =
                locate::runs(&self.dir)?.into_iter().filter(|n| *n > self.run).max()
            {
                // A restart. The shim waits for the old run's logger to exit when it
                // deletes the old task, so the old file, read to its end, is complete.
                printer.end_lines()?;
                self.run = newer;
                self.reader = FileReader::open(&self.dir.join(log_file_name(self.run)))?;
                continue;
            }
            if !wait(&mut inotify, &self.dir, stop)? {
                return Ok(());
            }
            let batch = match inotify.read_events(&mut events) {
                Ok(batch) => batch,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(source) => return Err(Error::Watch { path: self.dir.clone(), source }),
            };
            if batch
                .into_iter()
                .any(|e| e.mask.intersects(EventMask::DELETE_SELF | EventMask::IGNORED))
            {
                return Ok(());
            }
        }
    }
}

/// Waits until `inotify` has events (true), or `stop` says to stop (false).
fn wait(inotify: &mut Inotify, dir: &Path, stop: &dyn Fn() -> bool) -> Result<bool> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let timeout = PollTimeout::try_from(STOP_CHECK_INTERVAL).unwrap_or(PollTimeout::MAX);
    loop {
        if stop() {
            return Ok(false);
        }
        let mut fds = [PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => return Ok(true),
            Err(errno) => {
                return Err(Error::Watch { path: dir.to_path_buf(), source: errno.into() });
            }
        }
    }
}

fn watch(dir: &Path) -> Result<Inotify> {
    let watch_error = |source| Error::Watch { path: dir.to_path_buf(), source };
    let inotify = Inotify::init().map_err(watch_error)?;
    let mask = WatchMask::MODIFY | WatchMask::CREATE | WatchMask::MOVED_TO | WatchMask::DELETE_SELF;
    inotify.watches().add(dir, mask).map_err(watch_error)?;
    Ok(inotify)
}

fn keep_last(lines: &mut VecDeque<Line>, line: Line, tail: usize) {
    lines.push_back(line);
    if lines.len() > tail {
        lines.pop_front();
    }
}

/// Whether a record's timestamp is at or after `since`; an unparsable one is kept.
pub fn at_or_after(timestamp: &str, since: Option<Timestamp>) -> bool {
    match (since, timestamp.parse::<Timestamp>()) {
        (Some(since), Ok(time)) => time >= since,
        _ => true,
    }
}

/// A log file read from where the last read stopped, record by record, a bounded piece
/// at a time: what it holds is at most [`READ_BYTES`] and the record being read (itself at
/// most [`MAX_RECORD_BYTES`]), whatever the file's size.
#[derive(Debug)]
struct FileReader {
    path: PathBuf,
    file: File,
    /// Bytes read after the last complete record (a record being written).
    carry: Vec<u8>,
    /// Within a record over [`MAX_RECORD_BYTES`]: its bytes are dropped up to its end.
    skipping: bool,
}

/// How much of a log file is read at once.
const READ_BYTES: usize = 64 * 1024;
/// The longest record kept: the logger writes at most [`cri::MAX_RECORD_CONTENT`] bytes of
/// content per record, plus its prefix; anything longer is not the logger's and is skipped.
const MAX_RECORD_BYTES: usize = cri::MAX_RECORD_CONTENT + 1024;

impl FileReader {
    fn open(path: &Path) -> Result<Self> {
        let file =
            File::open(path).map_err(|source| Error::Read { path: path.to_path_buf(), source })?;
        Ok(Self { path: path.to_path_buf(), file, carry: Vec::new(), skipping: false })
    }

    /// Reads to the current end of the file and hands `f` each complete record, until `f`
    /// returns false; skips (and logs) malformed ones, as kubelet does.
    fn read_records(&mut self, mut f: impl FnMut(Record<'_>) -> bool) -> Result<()> {
        let mut more = true;
        while more {
            let before = self.carry.len();
            let read = (&mut self.file)
                .take(READ_BYTES as u64)
                .read_to_end(&mut self.carry)
                .map_err(|source| Error::Read { path: self.path.clone(), source })?;
            if read == 0 {
                break;
            }
            let mut start = 0;
            // Only the bytes just read can hold the newline that ends the carried record.
            let mut from = before;
            while let Some(end) = self.carry[from..].iter().position(|&b| b == b'\n') {
                let end = from + end;
                if std::mem::take(&mut self.skipping) {
                    // The end of a record too long to keep.
                } else if more {
                    match cri::decode(&self.carry[start..end]) {
                        Ok(record) => more = f(record),
                        Err(e) => {
                            tracing::warn!(file = %self.path.display(), error = %e, "skipping a log record")
                        }
                    }
                }
                start = end + 1;
                from = start;
            }
            self.carry.drain(..start);
            if self.carry.len() > MAX_RECORD_BYTES {
                tracing::warn!(
                    file = %self.path.display(), limit = MAX_RECORD_BYTES,
                    "skipping a log record longer than the logger writes"
                );
                self.carry.clear();
                self.skipping = true;
            }
        }
        // A burst read once does not stay allocated for the rest of a follow.
        self.carry.shrink_to(MAX_RECORD_BYTES);
        Ok(())
    }

    /// Whether the path now names another file than the one open (the logger rotated it).
    /// A path that does not exist yet (between the rename and the new file) is not.
    fn replaced(&self) -> Result<bool> {
        let open = self
            .file
            .metadata()
            .map_err(|source| Error::Read { path: self.path.clone(), source })?;
        Ok(match std::fs::metadata(&self.path) {
            Ok(now) => (now.dev(), now.ino()) != (open.dev(), open.ino()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(source) => return Err(Error::Read { path: self.path.clone(), source }),
        })
    }
}

/// Writes lines (joined) or records (as they come, when following) to `out`.
#[derive(Debug)]
struct Printer<'a, W> {
    out: &'a mut W,
    timestamps: bool,
    /// Records before this time are skipped (following).
    since: Option<Timestamp>,
    /// Bytes left to write, when limited.
    remaining: Option<u64>,
    /// Per stream (stdout, stderr): whether the last output ended in the middle of a line.
    mid_line: [bool; 2],
    /// The first failed write of [`Printer::record`], returned by the next flush.
    failed: Option<io::Error>,
}

impl<W: Write> Printer<'_, W> {
    fn line(&mut self, line: &Line) -> Result<()> {
        self.write(line.stream, &line.timestamp, &line.content, line.newline)
    }

    /// Prints a record as it comes (following); a failed write is kept for the next
    /// [`Printer::flush`], and nothing more is written meanwhile.
    fn record(&mut self, record: Record<'_>) {
        if self.failed.is_some() || !at_or_after(record.timestamp, self.since) {
            return;
        }
        let newline = record.tag == cri::Tag::Full;
        if let Err(Error::Output(e)) =
            self.write(record.stream, record.timestamp, record.content, newline)
        {
            self.failed = Some(e);
        }
    }

    fn write(
        &mut self,
        stream: Stream,
        timestamp: &str,
        content: &[u8],
        newline: bool,
    ) -> Result<()> {
        let mid_line = self.mid_line[stream as usize];
        if self.timestamps && !mid_line {
            self.put(timestamp.as_bytes())?;
            self.put(b" ")?;
        }
        self.put(content)?;
        if newline {
            self.put(b"\n")?;
        }
        self.mid_line[stream as usize] = !newline;
        Ok(())
    }

    /// Writes what the byte limit leaves of `bytes`.
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        let bytes = match &mut self.remaining {
            Some(remaining) => {
                let n = usize::try_from(*remaining).unwrap_or(usize::MAX).min(bytes.len());
                *remaining -= n as u64;
                &bytes[..n]
            }
            None => bytes,
        };
        self.out.write_all(bytes).map_err(Error::Output)
    }

    /// Prints a whole line (catching up), a failed write kept as [`Printer::record`] does.
    fn emit(&mut self, line: &Line) {
        if self.failed.is_some() {
            return;
        }
        if let Err(Error::Output(e)) = self.line(line) {
            self.failed = Some(e);
        }
    }

    /// Whether the byte limit is reached.
    fn exhausted(&self) -> bool {
        self.remaining == Some(0)
    }

    /// Whether more output can go anywhere: no write failed and the limit is not reached.
    fn wants_more(&self) -> bool {
        self.failed.is_none() && !self.exhausted()
    }

    /// Ends the lines a finished run left without a newline.
    fn end_lines(&mut self) -> Result<()> {
        if self.mid_line.iter().any(|m| *m) {
            self.put(b"\n")?;
        }
        self.mid_line = [false; 2];
        self.flush()
    }

    fn flush(&mut self) -> Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(Error::Output(e));
        }
        self.out.flush().map_err(Error::Output)
    }
}

#[cfg(test)]
mod tests;
