//! One output FIFO of a container (its stdout or its stderr), read without consuming
//! what is not yet in the log file: [`Pump::pump`] duplicates the FIFO's content into a
//! private pipe (`tee(2)`), reads it there, has the complete records written, then
//! consumes from the FIFO exactly the bytes those records hold. A line not yet ended
//! stays in the FIFO until its newline, [`cri::MAX_RECORD_CONTENT`] bytes of it, or the
//! end of the stream, so a logger killed at any point finds, when it starts again, every
//! byte it had not written.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, SpliceFFlags, fcntl, tee};

use crate::cri::{self, Stream, Tag};

/// The size asked for each FIFO (`F_SETPIPE_SZ`, best effort: the kernel's default is
/// 64 KiB): how much output a container may write while the logger is down before it
/// blocks.
pub const FIFO_SIZE: usize = 1024 * 1024;

/// An output FIFO, opened.
#[derive(Debug)]
pub struct Output {
    pub stream: Stream,
    /// The read end (non-blocking).
    reader: File,
    /// A writer of the logger's own, until the agent releases the FIFO: until then the
    /// FIFO never reports its end (the shim may not have opened it yet).
    hold: Option<File>,
    /// Whether the FIFO reported that its writers are gone (they never come back).
    hung_up: bool,
}

/// Where [`Pump::pump`] left an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More may come: wait for the FIFO's next event.
    Waiting,
    /// The stream has ended (its writers are gone and everything was written).
    Ended,
}

impl Output {
    /// Opens the FIFO `name` in `dir`, holding a writer of the logger's own.
    pub fn open(dir: &Path, name: &str, stream: Stream) -> io::Result<Output> {
        let path = dir.join(name);
        // The writer first: the non-blocking read-only open then sees a writer, so the
        // FIFO reports its end (EPOLLHUP) once every writer is gone, ours included.
        let hold = OpenOptions::new().read(true).write(true).open(&path)?;
        let reader =
            OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK).open(&path)?;
        // Best effort: a smaller FIFO only blocks the container sooner while the logger
        // is down.
        let _ = fcntl(&reader, FcntlArg::F_SETPIPE_SZ(FIFO_SIZE as nix::libc::c_int));
        Ok(Output { stream, reader, hold: Some(hold), hung_up: false })
    }

    pub fn reader(&self) -> &File {
        &self.reader
    }

    /// Drops the logger's own writer: from now on the end of the shim's writers is the
    /// end of the stream.
    pub fn release(&mut self) {
        self.hold = None;
    }

    pub fn hang_up(&mut self) {
        self.hung_up = true;
    }
}

/// The private pipe and buffer every output is read through (the logger has one
/// thread: one is enough).
#[derive(Debug)]
pub struct Pump {
    copy_r: File,
    copy_w: File,
    buf: Vec<u8>,
}

impl Pump {
    pub fn new() -> io::Result<Pump> {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
        let _ = fcntl(&w, FcntlArg::F_SETPIPE_SZ(FIFO_SIZE as nix::libc::c_int));
        let size = fcntl(&w, FcntlArg::F_GETPIPE_SZ).map_err(io::Error::from)?;
        let size = usize::try_from(size).unwrap_or(64 * 1024);
        Ok(Pump { copy_r: File::from(r), copy_w: File::from(w), buf: Vec::with_capacity(size) })
    }

    /// Writes (through `write`) every complete record waiting in `output`, consuming
    /// exactly their bytes; at the end of the stream, the rest as a `P` record.
    pub fn pump(
        &mut self,
        output: &mut Output,
        mut write: impl FnMut(Stream, Tag, &[u8]),
    ) -> io::Result<Progress> {
        let capacity = self.buf.capacity();
        loop {
            let n = match tee(
                &output.reader,
                &self.copy_w,
                capacity,
                SpliceFFlags::SPLICE_F_NONBLOCK,
            ) {
                Ok(0) => return Ok(Progress::Ended),
                Ok(n) => n,
                Err(Errno::EAGAIN) => return Ok(Progress::Waiting),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            self.buf.resize(n, 0);
            self.copy_r.read_exact(&mut self.buf)?;
            let stream = output.stream;
            // The writers gone: what is left can only be the end of the stream.
            let end = output.hung_up && output.hold.is_none();
            let consumed =
                cri::complete(&self.buf, end, |tag, content| write(stream, tag, content));
            consume(&output.reader, &mut self.buf[..consumed])?;
            if consumed < n {
                return Ok(Progress::Waiting);
            }
        }
    }
}

/// Reads (and so removes) exactly `buf.len()` bytes from the FIFO, the bytes `tee` gave:
/// the logger is the FIFO's only reader that reads.
fn consume(reader: &File, buf: &mut [u8]) -> io::Result<()> {
    let mut reader = reader;
    let mut done = 0;
    while done < buf.len() {
        match reader.read(&mut buf[done..]) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
