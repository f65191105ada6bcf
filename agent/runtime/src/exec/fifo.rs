//! The FIFOs an exec process's stdio go through, and how the agent's ends are opened.
//!
//! The shim opens them while it starts the process (inside `Tasks.Start`): for stdout and
//! stderr a *blocking* write-only open (which waits for a reader), then a read-only open
//! of its own that it never reads (so its writes cannot fail with `EPIPE`); for stdin a
//! read end that copies to the process and a write end of its own that `Tasks.CloseIO`
//! closes. On Linux a read on a FIFO that has no writer returns end-of-file, so a read end
//! must not be read as if the output were over before the shim has connected its writer.
//!
//! containerd's Go client (`github.com/containerd/fifo`) solves that with a blocking
//! open in a goroutine, which must then be released by an open of the other end when
//! the exec fails. Here nothing blocks: [`Output`] first opens the FIFO read-write (which
//! Linux allows, and never blocks on: fifo(7)), a writer of the agent's own,
//! then the read end proper (non-blocking, it returns at once). While the read-write
//! descriptor is open the read end cannot see end-of-file, and the shim's blocking opens
//! return at once. Once `Tasks.Start` has returned the shim holds its write end, and
//! [`Output::connected`] closes the read-write descriptor: from then on end-of-file means
//! that every writer the shim had is closed, that is all the output arrived. (The read end
//! was opened while a writer existed, so the kernel reports the writers' going away to
//! epoll as a hang-up, which wakes the reader; a FIFO opened non-blocking with no writer
//! at all would not be woken.) A failed `Exec` or `Start` leaves nothing to release:
//! dropping the descriptors is all.
//!
//! [`input`] (stdin) is the read-write descriptor itself, as a [`Sender`]: the shim's read
//! end opens at once, and the agent never reads from it. Once the shim's own write end is
//! closed (`Tasks.CloseIO`), dropping the sender leaves the FIFO without writers, and the
//! shim passes end-of-file on to the process. (The shim opens its read end in a goroutine
//! started inside `Tasks.Start`; a sender dropped before that goroutine ran would leave
//! the open waiting for a writer. `Tasks.CloseIO` comes in between, a round trip through
//! containerd to the shim, as with containerd's own clients.)

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::sys::stat::Mode;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe::{Receiver, Sender};

/// Makes `dir` (mode 0700, only the agent reads and writes an exec's stdio) and its parents.
pub fn make_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Makes the FIFO `path` (mode 0600).
pub fn make(path: &Path) -> io::Result<()> {
    nix::unistd::mkfifo(path, Mode::S_IRUSR | Mode::S_IWUSR).map_err(io::Error::from)
}

/// Removes an exec's FIFO directory; one already gone is fine.
pub fn remove_dir(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn open(path: &Path, read: bool, write: bool) -> io::Result<File> {
    OpenOptions::new().read(read).write(write).custom_flags(libc::O_NONBLOCK).open(path)
}

/// The agent's read end of a stdout or stderr FIFO.
#[derive(Debug)]
pub struct Output {
    path: PathBuf,
    /// A writer of the agent's own until the shim's is connected (see the module's doc).
    hold: Option<File>,
    reader: File,
}

impl Output {
    /// Makes the FIFO `path` and opens it, before the exec is created.
    pub fn make(path: PathBuf) -> io::Result<Output> {
        make(&path)?;
        Output::open(path)
    }

    /// Opens an existing FIFO (never blocks).
    pub fn open(path: PathBuf) -> io::Result<Output> {
        let hold = open(&path, true, true)?;
        let reader = open(&path, true, false)?;
        Ok(Output { path, hold: Some(hold), reader })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The read end, once the shim's write end is open (`Tasks.Start` returned): its
    /// end-of-file is the end of the output. Needs a tokio runtime.
    pub fn connected(mut self) -> io::Result<Receiver> {
        let receiver = Receiver::from_file(self.reader)?;
        // After the registration: if the shim's writers are gone already, the hang-up
        // that closing this descriptor raises is what wakes the reader.
        self.hold = None;
        Ok(receiver)
    }
}

/// The agent's end of a stdin FIFO: read-write (see the module's doc).
pub fn input(path: &Path) -> io::Result<File> {
    make(path)?;
    open(path, true, true)
}

/// [`input`] as a tokio sender. Needs a tokio runtime.
pub fn sender(file: File) -> io::Result<Sender> {
    Sender::from_file(file)
}

/// What [`collect`] kept: the first `limit` bytes of a stream.
#[derive(Debug, Default)]
pub struct Collected {
    pub bytes: Vec<u8>,
    /// Everything read, kept or not.
    pub total: u64,
}

impl Collected {
    /// Reads `receiver` to its end, keeping the first `limit` bytes and reading (and
    /// dropping) the rest, so the writer never waits on a full pipe.
    pub async fn read_to_end(&mut self, receiver: &mut Receiver, limit: usize) -> io::Result<()> {
        let mut scratch = [0u8; 8192];
        loop {
            let n = receiver.read(&mut scratch).await?;
            if n == 0 {
                return Ok(());
            }
            self.keep(&scratch[..n], limit);
        }
    }

    /// Reads what a pipe holds (`reader`, non-blocking) once its writers are gone,
    /// keeping the first `limit` bytes: it ends at the pipe's end, or, were a writer still
    /// there, with what was in it.
    pub fn read_ended(&mut self, reader: OwnedFd, limit: usize) -> io::Result<()> {
        use std::io::Read as _;
        let mut pipe = File::from(reader);
        let mut scratch = [0u8; 8192];
        loop {
            match pipe.read(&mut scratch) {
                Ok(0) => return Ok(()),
                Ok(n) => self.keep(&scratch[..n], limit),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn keep(&mut self, chunk: &[u8], limit: usize) {
        let room = limit.saturating_sub(self.bytes.len());
        self.bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        self.total += chunk.len() as u64;
    }
}

/// Reads and drops everything `receiver` yields, until its end (a stream nobody asked
/// for: the process must not block on it).
pub async fn discard(mut receiver: Receiver) {
    let mut scratch = [0u8; 8192];
    while let Ok(n) = receiver.read(&mut scratch).await {
        if n == 0 {
            break;
        }
    }
}
