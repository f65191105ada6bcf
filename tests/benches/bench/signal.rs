//! How a benchmark learns that a container's process runs, without polling: the
//! container's first command writes a line to a FIFO the benchmark holds open (a
//! hostPath volume in a pod, a bind mount for `ctr run`), and a reader thread stamps
//! each line as it arrives.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;

/// A FIFO in `dir`, read line by line; each line comes with the instant it was read.
#[derive(Debug)]
pub struct Signals {
    pub dir: PathBuf,
    lines: mpsc::Receiver<(String, Instant)>,
}

/// The FIFO's name inside the container's mount of `dir`.
pub const FIFO: &str = "ready";

impl Signals {
    pub fn new(dir: &Path) -> anyhow::Result<Signals> {
        std::fs::create_dir_all(dir)?;
        let fifo = dir.join(FIFO);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666))
            .with_context(|| format!("mkfifo {}", fifo.display()))?;
        // Read-write: the open does not wait for a writer, and writers coming and going
        // never make the reader see an end of file.
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&fifo)?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(file).lines().map_while(Result::ok) {
                if tx.send((line, Instant::now())).is_err() {
                    break;
                }
            }
        });
        Ok(Signals { dir: dir.to_owned(), lines })
    }

    /// The next line and when it arrived (an error after `timeout`).
    pub fn next(&self, timeout: Duration) -> anyhow::Result<(String, Instant)> {
        self.lines.recv_timeout(timeout).context("no container signalled that it runs")
    }

    /// Waits for the line `expected`, skipping others.
    pub fn wait_for(&self, expected: &str, timeout: Duration) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (line, at) = self.next(left)?;
            if line == expected {
                return Ok(at);
            }
        }
    }
}

/// The shell snippet a container runs first: announce `name`, then stay up.
pub fn announce(name: &str) -> String {
    format!("echo {name} > /signal/{FIFO}; exec sleep 100000")
}
