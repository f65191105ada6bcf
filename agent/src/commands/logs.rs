//! `outpost logs NAMESPACE/POD`: prints a container's logs straight from its CRI log files
//! (so it works while the agent is down), like `kubectl logs`: the content without the CRI
//! prefixes, the parts of long lines joined, optionally timestamps, the last N lines, the
//! previous run, and `-f` following appends, rotations and restarts through inotify.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use inotify::{EventMask, Inotify, WatchMask};

use crate::cli::LogsArgs;
use crate::runtime::logs::cri::{self, Joiner, Line, Record, Stream};
use crate::runtime::logs::{locate, log_file_name};

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

/// Prints the logs `args` ask for to `out`; with `--follow`, returns only when the
/// container's log directory goes away.
pub fn print_logs(args: &LogsArgs, out: &mut impl Write) -> Result<()> {
    let (namespace, name) = args.pod.split_once('/').unwrap_or(("default", &args.pod));
    let pod = format!("{namespace}/{name}");
    let pod_dir = locate::pod_dir(&args.pod_log_dir, namespace, name)?;
    let dir = locate::container_dir(&pod_dir, &pod, args.container.as_deref())?;
    let container = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Watch before the first read, so no change after it goes unseen.
    let inotify = if args.follow { Some(watch(&dir)?) } else { None };
    let mut run = locate::run(&dir, &pod, &container, args.previous)?;
    let mut reader = FileReader::open(&dir.join(log_file_name(run)))?;
    let mut printer =
        Printer { out, timestamps: args.timestamps, mid_line: [false; 2], failed: None };

    let mut joiner = Joiner::new();
    let mut lines = VecDeque::new();
    reader.read_records(|record| {
        if let Some(line) = joiner.push(record) {
            keep_last(&mut lines, line, args.tail);
        }
    })?;
    for line in joiner.finish() {
        keep_last(&mut lines, line, args.tail);
    }
    for line in &lines {
        printer.line(line)?;
    }
    printer.flush()?;
    let Some(mut inotify) = inotify else { return Ok(()) };

    let mut events = vec![0u8; 4096];
    loop {
        reader.read_records(|record| printer.record(record))?;
        printer.flush()?;
        if reader.replaced()? {
            // Rotated (and the old file read to its end): the new file from its start.
            reader = FileReader::open(&reader.path.clone())?;
            continue;
        }
        if let Some(newer) = locate::runs(&dir)?.into_iter().filter(|n| *n > run).max() {
            // A restart. The shim waits for the old run's logger to exit when it deletes
            // the old task, so the old file, read to its end, is complete.
            printer.end_lines()?;
            run = newer;
            reader = FileReader::open(&dir.join(log_file_name(run)))?;
            continue;
        }
        let batch = inotify
            .read_events_blocking(&mut events)
            .map_err(|source| Error::Watch { path: dir.clone(), source })?;
        if batch.into_iter().any(|e| e.mask.intersects(EventMask::DELETE_SELF | EventMask::IGNORED))
        {
            return Ok(());
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

fn keep_last(lines: &mut VecDeque<Line>, line: Line, tail: Option<usize>) {
    lines.push_back(line);
    if tail.is_some_and(|n| lines.len() > n) {
        lines.pop_front();
    }
}

/// A log file read from where the last read stopped, record by record.
#[derive(Debug)]
struct FileReader {
    path: PathBuf,
    file: File,
    /// Bytes read after the last complete record (a record being written).
    carry: Vec<u8>,
}

impl FileReader {
    fn open(path: &Path) -> Result<Self> {
        let file =
            File::open(path).map_err(|source| Error::Read { path: path.to_path_buf(), source })?;
        Ok(Self { path: path.to_path_buf(), file, carry: Vec::new() })
    }

    /// Reads to the current end of the file and hands `f` each complete record; skips (and
    /// logs) malformed ones, as kubelet does.
    fn read_records(&mut self, mut f: impl FnMut(Record<'_>)) -> Result<()> {
        self.file
            .read_to_end(&mut self.carry)
            .map_err(|source| Error::Read { path: self.path.clone(), source })?;
        let mut start = 0;
        while let Some(end) = self.carry[start..].iter().position(|&b| b == b'\n') {
            let line = &self.carry[start..start + end];
            match cri::decode(line) {
                Ok(record) => f(record),
                Err(e) => {
                    tracing::warn!(file = %self.path.display(), error = %e, "skipping a log record")
                }
            }
            start += end + 1;
        }
        self.carry.drain(..start);
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
        if self.failed.is_some() {
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
        let mid_line = &mut self.mid_line[stream as usize];
        if self.timestamps && !*mid_line {
            write!(self.out, "{timestamp} ").map_err(Error::Output)?;
        }
        self.out.write_all(content).map_err(Error::Output)?;
        if newline {
            self.out.write_all(b"\n").map_err(Error::Output)?;
        }
        *mid_line = !newline;
        Ok(())
    }

    /// Ends the lines a finished run left without a newline.
    fn end_lines(&mut self) -> Result<()> {
        if self.mid_line.iter().any(|m| *m) {
            self.out.write_all(b"\n").map_err(Error::Output)?;
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
