//! Running a process in a running container: containerd's task exec, with the process
//! spec of the container's init (user, cwd, env, capabilities) and other arguments.
//! Its stdio are FIFOs under the exec directory, opened as containerd's own clients open
//! them. Two uses: [`Execs::run`] for probes and hooks (output captured, bounded in size
//! and time) and [`Execs::start`] for `outpost exec` and kubelet's `/exec` (streams, a
//! TTY and its size).

use std::path::PathBuf;
use std::time::Duration;

use super::Containerd;

/// How much of a probe's or hook's output is kept (kubelet keeps 10 KiB).
pub const MAX_OUTPUT: usize = 10 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("container {id}: {step}")]
    Containerd {
        id: String,
        step: &'static str,
        #[source]
        source: tonic::Status,
    },
    #[error("container {id}: the command did not finish within {timeout:?}")]
    TimedOut { id: String, timeout: Duration },
    #[error("container {id}: {step}")]
    Io {
        id: String,
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("container {id}: cannot read its OCI runtime spec")]
    Spec {
        id: String,
        #[source]
        source: serde_json::Error,
    },
}

/// What a finished command left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i32,
    /// stdout and stderr as they came, the first [`MAX_OUTPUT`] bytes.
    pub output: Vec<u8>,
}

/// An interactive command: which streams, and whether it gets a TTY (stderr then goes
/// to the TTY too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// Runs processes in the containers of one containerd namespace.
#[derive(Debug, Clone)]
pub struct Execs {
    containerd: Containerd,
    /// Where each exec's FIFOs go (`<run-dir>/exec/<exec id>/`).
    dir: PathBuf,
}

impl Execs {
    pub fn new(containerd: Containerd, dir: PathBuf) -> Execs {
        Execs { containerd, dir }
    }

    /// Runs `command` in container `id` to its end; past `timeout` it is killed and
    /// [`Error::TimedOut`] returned.
    pub async fn run(
        &self,
        id: &str,
        command: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, Error> {
        let _ = (&self.containerd, &self.dir, id, command, timeout);
        todo!("helper: runtime exec")
    }

    /// Starts `request` in container `id`; the session's streams are open.
    pub async fn start(&self, id: &str, request: &Request) -> Result<Session, Error> {
        let _ = (id, request);
        todo!("helper: runtime exec")
    }
}

/// A started interactive command. Its streams are `None` unless asked for.
#[derive(Debug)]
pub struct Session {
    pub stdin: Option<tokio::net::unix::pipe::Sender>,
    pub stdout: Option<tokio::net::unix::pipe::Receiver>,
    /// `None` with a TTY.
    pub stderr: Option<tokio::net::unix::pipe::Receiver>,
    // helper: what `resize` and `wait` need (containerd, container and exec IDs, FIFO dir)
}

impl Session {
    /// Sets the TTY's size.
    pub async fn resize(&self, width: u16, height: u16) -> Result<(), Error> {
        let _ = (width, height);
        todo!("helper: runtime exec")
    }

    /// Waits for the command's end (closing stdin first is the caller's: drop it);
    /// its exit code. Removes the process from containerd and its FIFOs.
    pub async fn wait(self) -> Result<i32, Error> {
        todo!("helper: runtime exec")
    }
}
