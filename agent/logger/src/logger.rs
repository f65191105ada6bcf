//! The shim's logger: copies a container's stdout and stderr into its CRI log file until
//! both end. One thread per stream, sharing the file (it runs once per container: it must
//! stay small, no async runtime).
//!
//! When the task is deleted, containerd's shim closes its ends of the pipes and then sends
//! the logger SIGTERM, waiting up to 12 s for it to exit before killing it. The logger
//! blocks SIGTERM and exits at the end of both streams instead, so it never loses the
//! output still in the pipes.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::sync::{Mutex, PoisonError};
use std::thread;

use nix::sys::signal::{SigSet, Signal};

use crate::cri::{self, LineSplitter, Stream, Tag};
use crate::rotation::{self, LogFile};
use crate::time::Time;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot block SIGTERM in the container logger")]
    BlockSigterm(#[source] nix::Error),
    #[error("cannot start the container logger's stderr thread")]
    Thread(#[source] io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Stack of the stderr thread: it holds no more than a few small frames.
const THREAD_STACK: usize = 64 * 1024;
/// Bytes read from a pipe at a time.
const READ_SIZE: usize = 16 * 1024;

/// Copies `stdout` and `stderr` (none with a TTY: its output is all on `stdout`) into
/// `file` as CRI records until both reach their end.
/// A failure to read a pipe ends that stream; a failure to write is reported (on
/// stderr: containerd 1.6's shim gives its logger /dev/null there, so this shows only when
/// run by hand) once per run of failures, and the output is dropped meanwhile, so the
/// container is never blocked on a full pipe.
pub fn run(stdout: OwnedFd, stderr: Option<OwnedFd>, file: &mut LogFile) -> Result<()> {
    SigSet::from(Signal::SIGTERM).thread_block().map_err(Error::BlockSigterm)?;
    let writer = Mutex::new(Writer { file, failing: false, record: Vec::with_capacity(1024) });
    thread::scope(|scope| {
        if let Some(stderr) = stderr {
            thread::Builder::new()
                .name("stderr".into())
                .stack_size(THREAD_STACK)
                .spawn_scoped(scope, || copy(Stream::Stderr, File::from(stderr), &writer))
                .map_err(Error::Thread)?;
        }
        copy(Stream::Stdout, File::from(stdout), &writer);
        Ok(())
    })
}

/// Copies one stream to its end (or a read error), then writes what is left of it.
fn copy(stream: Stream, mut pipe: File, writer: &Mutex<Writer<'_>>) {
    let mut splitter = LineSplitter::new();
    let mut buf = vec![0u8; READ_SIZE];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let now = Time::now();
                let mut writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
                splitter.push(&buf[..n], |tag, content| writer.write(now, stream, tag, content));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                eprintln!(
                    "outpost-container-log: cannot read the container's {}: {e}; ending this stream",
                    stream.as_str()
                );
                break;
            }
        }
    }
    let mut writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
    splitter.finish(|tag, content| writer.write(Time::now(), stream, tag, content));
}

#[derive(Debug)]
struct Writer<'a> {
    file: &'a mut LogFile,
    /// Whether the last write failed (the failure was reported).
    failing: bool,
    record: Vec<u8>,
}

impl Writer<'_> {
    fn write(&mut self, now: Time, stream: Stream, tag: Tag, content: &[u8]) {
        self.record.clear();
        cri::encode(&mut self.record, now, stream, tag, content);
        match self.file.write_record(&self.record, now) {
            Ok(()) => self.failing = false,
            Err(e) => {
                if !self.failing {
                    report(&e);
                }
                self.failing = true;
            }
        }
    }
}

fn report(e: &rotation::Error) {
    let cause = std::error::Error::source(e).map(|c| format!(": {c}")).unwrap_or_default();
    eprintln!(
        "outpost-container-log: {e}{cause}; dropping the container's output until writes succeed again"
    );
}

#[cfg(test)]
mod tests;
