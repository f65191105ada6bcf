//! The logger of a container with `stdin: true`, which the agent starts rather than the
//! shim. containerd's shim gives a `binary://` logger's container no stdin at all (its
//! binary IO passes none to runc), so such a container's stdio are FIFOs in a directory
//! the agent makes, `<run-dir>/io/<container id>/`: [`STDIN`], [`STDOUT`] and, without a
//! TTY, [`STDERR`]. The shim holds a writer of its own on `stdin` for the container's
//! life (until `Tasks.CloseIO`), so input written there by an attach reaches the
//! container across attach sessions and agent restarts; this process reads `stdout` and
//! `stderr` into the CRI log file exactly as the shim's logger does, and is as
//! independent of the agent: it runs in a process group of its own and the agent's end
//! never comes into it.
//!
//! With the agent, over its own stdin and stdout:
//! 1. it opens the output FIFOs and the log file, and prints one line: [`READY`], or why
//!    it cannot log (the agent then fails the container's creation with that line);
//! 2. it holds a writer of its own on each output FIFO (opened read-write, which never
//!    blocks: fifo(7)) until its stdin ends. The agent closes that pipe once
//!    `Tasks.Create` has returned, when the shim holds its writers, or failed; a pipe
//!    that ends because the agent died does the same. Before that, end-of-file could not
//!    be told from a shim not yet connected; after it, end-of-file is the end of the
//!    container's output (or, when the creation failed, of nothing);
//! 3. it logs until both streams end, then removes the directory.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::logger;
use crate::rotation::{self, Limits, LogFile};

/// The FIFO the container reads its input from.
pub const STDIN: &str = "stdin";
/// The FIFO of the container's stdout (and, with a TTY, of its terminal).
pub const STDOUT: &str = "stdout";
/// The FIFO of the container's stderr; there is none with a TTY.
pub const STDERR: &str = "stderr";
/// The line the logger prints once it is ready.
pub const READY: &str = "ready";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open the container's {name} FIFO {}", .path.display())]
    Fifo {
        name: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Open(#[from] rotation::Error),
    #[error(transparent)]
    Logger(#[from] logger::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One output FIFO, opened: the read end, and a writer of the logger's own until the
/// agent releases it.
#[derive(Debug)]
struct Output {
    reader: File,
    hold: File,
}

impl Output {
    /// The read end alone: the agent has released the FIFO.
    fn released(self) -> OwnedFd {
        drop(self.hold);
        OwnedFd::from(self.reader)
    }

    fn open(dir: &Path, name: &'static str) -> Result<Output> {
        let path = dir.join(name);
        let failed = |source| Error::Fifo { name, path: path.clone(), source };
        // The writer first: a blocking read-only open then returns at once.
        let hold = OpenOptions::new().read(true).write(true).open(&path).map_err(failed)?;
        let reader = File::open(&path).map_err(failed)?;
        Ok(Output { reader, hold })
    }
}

/// Logs the container whose FIFOs are in `dir` into `path` (see the module's doc),
/// talking to the agent over this process's stdin and stdout.
pub fn container_log(dir: &Path, path: &Path, limits: Limits) -> Result<()> {
    container_log_with(dir, path, limits, io::stdin().lock(), io::stdout().lock())
}

/// [`container_log`] with the agent's release and this logger's announcement on the
/// given pipes.
pub fn container_log_with(
    dir: &Path,
    path: &Path,
    limits: Limits,
    release: impl Read,
    agent: impl Write,
) -> Result<()> {
    let opened = open(dir, path, limits);
    announce(agent, opened.as_ref().map(drop));
    let (stdout, stderr, mut file) = opened?;
    wait_for(release);
    logger::run(stdout.released(), stderr.map(Output::released), &mut file)?;
    if let Err(e) = std::fs::remove_dir_all(dir) {
        eprintln!("outpost-container-log: cannot remove {}: {e}", dir.display());
    }
    Ok(())
}

fn open(dir: &Path, path: &Path, limits: Limits) -> Result<(Output, Option<Output>, LogFile)> {
    let stdout = Output::open(dir, STDOUT)?;
    let stderr = if dir.join(STDERR).exists() { Some(Output::open(dir, STDERR)?) } else { None };
    let file = LogFile::open(path, limits)?;
    Ok((stdout, stderr, file))
}

/// Tells the agent: [`READY`], or the error and its causes on one line.
fn announce(mut agent: impl Write, opened: Result<(), &Error>) {
    let line = match opened {
        Ok(()) => READY.to_owned(),
        Err(e) => {
            let mut line = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                line.push_str(&format!(": {c}"));
                cause = c.source();
            }
            line
        }
    };
    // Nobody to tell if the agent is gone already.
    let _ = writeln!(agent, "{line}").and_then(|()| agent.flush());
}

/// Reads the agent's release pipe to its end (see the module's doc).
fn wait_for(mut release: impl Read) {
    let mut sink = [0u8; 64];
    loop {
        match release.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests;
