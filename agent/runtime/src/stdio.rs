//! A container's stdio, as `Tasks.Create` takes them, in one of two forms.
//!
//! - **FIFOs** ([`make_fifos`], with the node logger, the default): FIFOs in
//!   `<run-dir>/io/<container id>/` (`stdout`, without a TTY `stderr`, and for
//!   `stdin: true` `stdin`), as containerd's CRI gives a container. The node logger
//!   ([`crate::node_logger`]) reads the output FIFOs; the shim holds a writer of its own on
//!   `stdin` until `Tasks.CloseIO`, so the container's input stays open across attach
//!   sessions and agent restarts; an attach writes to it through [`open_stdin`], and
//!   `stdinOnce` closes it ([`crate::container::close_stdin`]) when the first attach
//!   that wrote ends.
//! - **Logged** ([`Stdio::logged`], `containerLogger: container`): stdout and stderr go
//!   to the `binary://` logger of [`crate::logs::logger_uri`], which the shim starts, one
//!   process per container; the container has no stdin (containerd's binary IO passes
//!   none to runc).

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::sys::stat::Mode;
pub use outpost_container_log::node::{STDERR, STDIN, STDOUT};
use tokio::net::unix::pipe::Sender;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("container {id}: cannot make its stdio FIFO {}", .path.display())]
    Fifo {
        id: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
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

/// Makes container `id`'s FIFOs in `dir` (private to root): `stdout`, without a TTY
/// `stderr`, and with `stdin` the `stdin` one; returns them as the task's stdio.
pub fn make_fifos(dir: &Path, id: &str, terminal: bool, stdin: bool) -> Result<Stdio> {
    let failed = |path: &Path| {
        let (id, path) = (id.to_owned(), path.to_path_buf());
        move |source| Error::Fifo { id, path, source }
    };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(failed(dir))?;
    let names = [stdin.then_some(STDIN), Some(STDOUT), (!terminal).then_some(STDERR)];
    for name in names.into_iter().flatten() {
        let path = dir.join(name);
        nix::unistd::mkfifo(&path, Mode::S_IRUSR | Mode::S_IWUSR)
            .map_err(io::Error::from)
            .map_err(failed(&path))?;
    }
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    Ok(Stdio {
        stdin: if stdin { path(STDIN) } else { String::new() },
        stdout: path(STDOUT),
        stderr: if terminal { String::new() } else { path(STDERR) },
    })
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
