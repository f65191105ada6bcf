//! A container's stdio, as `Tasks.Create` takes them, in one of two forms.
//!
//! - **Logged** ([`Stdio::logged`]): stdout and stderr go to the `binary://` logger of
//!   [`crate::logs::logger_uri`], which the shim starts; the container has no stdin
//!   (containerd's binary IO passes none to runc).
//! - **With stdin** ([`Logger::start`], for `stdin: true`): FIFOs in
//!   `<run-dir>/io/<container id>/` (`stdin`, `stdout` and, without a TTY, `stderr`),
//!   as containerd's CRI gives such a container. The agent starts the same logger on the
//!   output FIFOs ([`outpost_container_log::fifos`] says how it outlives the agent and how
//!   it is released), and the shim holds a writer of its own on `stdin` until
//!   `Tasks.CloseIO`. So the container's input stays open across attach sessions and
//!   agent restarts; an attach writes to it through [`open_stdin`], and `stdinOnce`
//!   closes it ([`crate::container::close_stdin`]) when the first attach that wrote
//!   ends.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio as ProcessStdio;
use std::time::Duration;

use nix::sys::stat::Mode;
use outpost_container_log::fifos::{READY, STDERR, STDIN, STDOUT};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe::Sender;
use tokio::process::{Child, ChildStdin, Command};

/// How long a started logger may take to say it is ready.
const READY_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("container {id}: cannot make its stdio FIFO {}", .path.display())]
    Fifo {
        id: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("container {id}: cannot start its logger {}", .logger.display())]
    Spawn {
        id: String,
        logger: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("container {id}: its logger cannot log: {line}")]
    NotReady { id: String, line: String },
    #[error("container {id}: its logger did not say it was ready within {READY_WAIT:?}")]
    Silent { id: String },
    #[error(
        "container {id} has no open stdin ({}): it was not made with stdin: true, or stdinOnce closed it when the first attach ended (it reopens when the container restarts)",
        .path.display()
    )]
    StdinClosed {
        id: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The stdio URIs and paths of a task.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stdio {
    /// The stdin FIFO, or empty: none.
    pub stdin: String,
    pub stdout: String,
    /// Empty with a TTY: its output is all on stdout.
    pub stderr: String,
}

impl Stdio {
    /// stdout and stderr to the `binary://` logger `uri`, no stdin.
    pub fn logged(uri: &str, terminal: bool) -> Stdio {
        let stderr = if terminal { String::new() } else { uri.to_owned() };
        Stdio { stdin: String::new(), stdout: uri.to_owned(), stderr }
    }
}

/// `<io_dir>/<id>`: the FIFOs of container `id` (`io_dir` is `<run-dir>/io`).
pub fn fifo_dir(io_dir: &Path, id: &str) -> PathBuf {
    io_dir.join(id)
}

/// A logger started on a container's FIFOs, not yet released: drop it once
/// `Tasks.Create` has returned (see [`outpost_container_log::fifos`]).
#[derive(Debug)]
pub struct Logger {
    pub stdio: Stdio,
    /// The release pipe: its end is the logger's release.
    _release: ChildStdin,
}

impl Logger {
    /// Makes container `id`'s FIFOs under `io_dir` and starts `logger` on them, writing
    /// `log_path`; returns once the logger is ready.
    pub async fn start(
        io_dir: &Path,
        id: &str,
        logger: &Path,
        log_path: &Path,
        terminal: bool,
    ) -> Result<Logger> {
        let dir = fifo_dir(io_dir, id);
        let made = make_fifos(&dir, id, terminal);
        let started = match made {
            Ok(stdio) => spawn(&dir, id, logger, log_path).await.map(|release| (stdio, release)),
            Err(e) => Err(e),
        };
        match started {
            Ok((stdio, release)) => Ok(Logger { stdio, _release: release }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }
}

fn make_fifos(dir: &Path, id: &str, terminal: bool) -> Result<Stdio> {
    let failed = |path: &Path| {
        let (id, path) = (id.to_owned(), path.to_path_buf());
        move |source| Error::Fifo { id, path, source }
    };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(failed(dir))?;
    let names: &[&str] = if terminal { &[STDIN, STDOUT] } else { &[STDIN, STDOUT, STDERR] };
    for name in names {
        let path = dir.join(name);
        nix::unistd::mkfifo(&path, Mode::S_IRUSR | Mode::S_IWUSR)
            .map_err(io::Error::from)
            .map_err(failed(&path))?;
    }
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    Ok(Stdio {
        stdin: path(STDIN),
        stdout: path(STDOUT),
        stderr: if terminal { String::new() } else { path(STDERR) },
    })
}

/// Starts the logger in a process group of its own (a signal to the agent's group does
/// not reach it) and waits for its first line.
async fn spawn(dir: &Path, id: &str, logger: &Path, log_path: &Path) -> Result<ChildStdin> {
    let mut command = Command::new(logger);
    command
        .arg(crate::logs::LOGGER_SUBCOMMAND)
        .arg("--fifos")
        .arg(dir)
        .arg(log_path)
        .stdin(ProcessStdio::piped())
        .stdout(ProcessStdio::piped())
        .stderr(ProcessStdio::null())
        .process_group(0);
    let spawn_failed =
        |source| Error::Spawn { id: id.to_owned(), logger: logger.to_path_buf(), source };
    let mut child = command.spawn().map_err(spawn_failed)?;
    let line = tokio::time::timeout(READY_WAIT, first_line(&mut child)).await;
    if !matches!(&line, Ok(Ok(line)) if line == READY) {
        let _ = child.start_kill();
    }
    let release = child.stdin.take();
    // The process is reaped by tokio once it exits: it is not the agent's to wait for.
    drop(child);
    let not_ready = |line: String| Error::NotReady { id: id.to_owned(), line };
    match (line, release) {
        (Ok(Ok(line)), Some(release)) if line == READY => Ok(release),
        (Ok(Ok(line)), _) => Err(not_ready(line)),
        (Ok(Err(e)), _) => Err(not_ready(format!("reading its first line: {e}"))),
        (Err(_), _) => Err(Error::Silent { id: id.to_owned() }),
    }
}

async fn first_line(child: &mut Child) -> io::Result<String> {
    let Some(stdout) = child.stdout.take() else { return Ok(String::new()) };
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).await?;
    Ok(line.trim_end().to_owned())
}

/// An attach's writer on container `id`'s stdin FIFO. It opens only while the shim
/// reads it: a container without stdin, or whose stdin `stdinOnce` closed, is an error
/// that says so. Needs a tokio runtime.
pub fn open_stdin(io_dir: &Path, id: &str) -> Result<Sender> {
    let path = fifo_dir(io_dir, id).join(STDIN);
    tokio::net::unix::pipe::OpenOptions::new()
        .open_sender(&path)
        .map_err(|source| Error::StdinClosed { id: id.to_owned(), path: path.clone(), source })
}

#[cfg(test)]
mod tests;
