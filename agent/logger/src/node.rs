//! The node logger: ONE long-lived process per node that writes every container's stdout
//! and stderr into its CRI log file (`outpost-container-log node --state-dir DIR --socket
//! PATH`). One thread, edge-triggered epoll, no async runtime: it stays small whatever the
//! number of containers.
//!
//! Each container's outputs are FIFOs in `<run-dir>/io/<id>/` (`stdout` and, without a
//! TTY, `stderr`), made by the agent, which [registers](protocol) the container over
//! the logger's Unix socket before `Tasks.Create`. containerd's runc shim opens each
//! output FIFO with a writer and a reader of its own (its `copyPipes`), so while this
//! logger is down the output waits in the FIFO (the container blocks only once it is
//! full, [`output::FIFO_SIZE`]) and no write fails with EPIPE.
//!
//! - Registration: the logger opens the FIFOs and the log file, records the registration
//!   in its state directory ([`state`]), and holds a writer of its own on each FIFO until
//!   the connection that registered the container ends (the agent keeps it until
//!   `Tasks.Create` has returned): before that, the end of the FIFO's writers could not
//!   be told from a shim that has not opened it yet.
//! - Reading: [`output::Pump`] writes only complete records and consumes only what it
//!   wrote, so a `kill -9` loses nothing; a restarted logger re-opens every recorded
//!   container and goes on.
//! - The end: when both outputs have ended, the container is forgotten, its log file
//!   closed (its lock freed: [`crate::rotation::wait_for_writer`]) and its FIFO
//!   directory removed.
//! - A failing write (a full disk) drops the output, reported once per run of failures:
//!   the logger never stops reading, so a container never blocks because of it.

mod container;
pub mod output;
pub mod protocol;
pub mod state;

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};

use self::output::{Output, Pump};
use self::protocol::{ERROR, OK, PONG, Registration, Request};
use self::state::StateDir;
use crate::rotation::LogFile;

/// The FIFO of the container's stdout (and, with a TTY, of its terminal).
pub const STDOUT: &str = "stdout";
/// The FIFO of the container's stderr; there is none with a TTY.
pub const STDERR: &str = "stderr";
/// The FIFO the container reads its input from (the shim's, for `stdin: true`).
pub const STDIN: &str = "stdin";
/// The subcommand that runs the node logger.
pub const SUBCOMMAND: &str = "node";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot make the node logger's state directory {}", .path.display())]
    StateDir { path: PathBuf, source: io::Error },
    #[error("another node logger runs on {} (its lock is held)", .path.display())]
    AlreadyRunning { path: PathBuf },
    #[error("cannot lock {}", .path.display())]
    Lock { path: PathBuf, source: io::Error },
    #[error("cannot listen on {}", .path.display())]
    Listen { path: PathBuf, source: io::Error },
    #[error("cannot set up the node logger's event loop")]
    Setup(#[source] io::Error),
    #[error("cannot wait for events")]
    Wait(#[source] nix::Error),
    /// The arguments: one the node logger does not take.
    #[error("unexpected argument {0}")]
    Argument(String),
    /// The arguments: a flag without its value.
    #[error("a flag needs a value")]
    FlagValue,
    /// The arguments: a flag left out (`--state-dir`, `--socket`).
    #[error("{0} is required")]
    Required(&'static str),
    /// A registration of a container the logger already logs.
    #[error("container {0} is registered already")]
    Registered(String),
    /// A registration the protocol cannot carry.
    #[error(transparent)]
    Protocol(#[from] protocol::Error),
    #[error("container {id}: cannot record its registration")]
    Record { id: String, source: io::Error },
    /// A registered (or recorded) container that cannot be logged: [`Error::Fifo`],
    /// [`Error::LogFile`] or [`Error::Watch`].
    #[error("container {id}")]
    Container { id: String, source: Box<Error> },
    #[error("cannot open its {name} FIFO {}", .path.display())]
    Fifo { name: &'static str, path: PathBuf, source: io::Error },
    #[error(transparent)]
    LogFile(crate::rotation::Error),
    #[error("cannot watch its FIFOs")]
    Watch(#[source] nix::Error),
}

/// `error: cause: cause`, on one line (a protocol answer, a line of the logger's stderr).
fn chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        line.push_str(&format!(": {c}"));
        cause = c.source();
    }
    line
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the node logger keeps its state and listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    pub state_dir: PathBuf,
    pub socket: PathBuf,
}

/// The node logger's usage line.
pub const USAGE: &str =
    "usage: outpost-container-log node --state-dir DIR --socket PATH (started by the agent)";

/// Parses the arguments after `node`.
pub fn parse_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Args> {
    let (mut state_dir, mut socket) = (None, None);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let slot = match arg.to_str() {
            Some("--state-dir") => &mut state_dir,
            Some("--socket") => &mut socket,
            _ => return Err(Error::Argument(arg.to_string_lossy().into_owned())),
        };
        *slot = Some(PathBuf::from(args.next().ok_or(Error::FlagValue)?));
    }
    Ok(Args {
        state_dir: state_dir.ok_or(Error::Required("--state-dir"))?,
        socket: socket.ok_or(Error::Required("--socket"))?,
    })
}

/// Runs the node logger until it is killed.
pub fn run(args: &Args) -> Result<()> {
    let dirs = StateDir::new(&args.state_dir);
    std::fs::create_dir_all(dirs.containers())
        .map_err(|source| Error::StateDir { path: args.state_dir.clone(), source })?;
    let _lock = lock(&dirs.lock())?;
    raise_fd_limit();
    let pid = std::process::id().to_string();
    state::write_atomically(&dirs.pid(), pid.as_bytes())
        .map_err(|source| Error::StateDir { path: dirs.pid(), source })?;
    let _ = std::fs::remove_file(&args.socket);
    let listener = UnixListener::bind(&args.socket)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| Error::Listen { path: args.socket.clone(), source })?;
    let mut logger = NodeLogger::new(dirs, listener)?;
    logger.reload();
    logger.serve()
}

/// Takes the state directory's lock for the process's life.
fn lock(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| Error::Lock { path: path.to_path_buf(), source })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(Error::AlreadyRunning { path: path.to_path_buf() }),
        Err(TryLockError::Error(source)) => Err(Error::Lock { path: path.to_path_buf(), source }),
    }
}

/// Each container holds up to five fds: raise the soft limit to the hard one.
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// What an epoll token stands for.
#[derive(Debug, Clone, Copy)]
enum Target {
    Listener,
    Connection(u64),
    Output { container: u64, index: usize },
}

const LISTENER: u64 = 0;

struct Connection {
    socket: UnixStream,
    /// Bytes of a request line not yet ended.
    pending: Vec<u8>,
    /// The containers it registered and has not released.
    registered: Vec<u64>,
}

struct Container {
    registration: Registration,
    file: LogFile,
    /// stdout, and stderr without a TTY; `None` once ended.
    outputs: [Option<Output>; 2],
    /// Whether the last write failed (the failure was reported).
    failing: bool,
}

struct NodeLogger {
    dirs: StateDir,
    listener: UnixListener,
    epoll: Epoll,
    pump: Pump,
    next: u64,
    targets: HashMap<u64, Target>,
    connections: HashMap<u64, Connection>,
    containers: HashMap<u64, Container>,
    record: Vec<u8>,
}

impl NodeLogger {
    fn new(dirs: StateDir, listener: UnixListener) -> Result<NodeLogger> {
        let epoll =
            Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| Error::Setup(e.into()))?;
        epoll
            .add(&listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))
            .map_err(|e| Error::Setup(e.into()))?;
        Ok(NodeLogger {
            dirs,
            listener,
            epoll,
            pump: Pump::new().map_err(Error::Setup)?,
            next: LISTENER + 1,
            targets: HashMap::from([(LISTENER, Target::Listener)]),
            connections: HashMap::new(),
            containers: HashMap::new(),
            record: Vec::with_capacity(1024),
        })
    }

    fn token(&mut self, target: Target) -> u64 {
        let token = self.next;
        self.next += 1;
        self.targets.insert(token, target);
        token
    }

    /// Re-opens every container the state directory records (a restart), released: the
    /// connections that registered them ended with the previous logger.
    fn reload(&mut self) {
        let registrations = match self.dirs.load() {
            Ok(found) => found,
            Err(e) => {
                eprintln!("outpost-container-log: cannot read the recorded containers: {e}");
                return;
            }
        };
        for registration in registrations {
            let id = registration.id.clone();
            match self.add(registration) {
                Ok(key) => self.release(key),
                Err(e) => {
                    let e = chain(&e);
                    eprintln!("outpost-container-log: container {id}: {e}; forgetting it");
                    let _ = self.dirs.forget(&id);
                }
            }
        }
    }

    fn serve(&mut self) -> Result<()> {
        loop {
            self.turn(EpollTimeout::NONE)?;
        }
    }

    /// Waits for events (at most `timeout`) and handles them.
    fn turn(&mut self, timeout: EpollTimeout) -> Result<()> {
        let mut events = [EpollEvent::empty(); 64];
        let n = match self.epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(nix::Error::EINTR) => return Ok(()),
            Err(e) => return Err(Error::Wait(e)),
        };
        {
            for event in &events[..n] {
                let Some(&target) = self.targets.get(&event.data()) else { continue };
                match target {
                    Target::Listener => self.accept(),
                    Target::Connection(key) => self.read_requests(key),
                    Target::Output { container, index } => {
                        let hung_up = event.events().contains(EpollFlags::EPOLLHUP);
                        self.pump(container, index, hung_up);
                    }
                }
            }
        }
        Ok(())
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((socket, _)) => {
                    if socket.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let key = self.next;
                    let flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLET;
                    if self.epoll.add(&socket, EpollEvent::new(flags, key)).is_err() {
                        continue;
                    }
                    let token = self.token(Target::Connection(key));
                    debug_assert_eq!(token, key);
                    let connection =
                        Connection { socket, pending: Vec::new(), registered: Vec::new() };
                    self.connections.insert(key, connection);
                    self.read_requests(key);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// Reads what the connection sent (edge-triggered: to the end), answers each complete
    /// request, and closes it at its end.
    fn read_requests(&mut self, key: u64) {
        let mut buf = [0u8; 4096];
        let mut ended = false;
        let mut lines = Vec::new();
        if let Some(connection) = self.connections.get_mut(&key) {
            loop {
                match connection.socket.read(&mut buf) {
                    Ok(0) => {
                        ended = true;
                        break;
                    }
                    Ok(n) => connection.pending.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        ended = true;
                        break;
                    }
                }
            }
            while let Some(end) = connection.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = connection.pending.drain(..=end).collect();
                lines.push(String::from_utf8_lossy(&line[..end]).into_owned());
            }
        }
        for line in lines {
            let answer = self.answer(key, &line);
            if let (Some(answer), Some(connection)) = (answer, self.connections.get_mut(&key)) {
                // The agent reads every answer; one that cannot be written ends with it.
                let _ = connection.socket.write_all(format!("{answer}\n").as_bytes());
            }
        }
        if ended && let Some(connection) = self.connections.remove(&key) {
            self.targets.remove(&key);
            for container in connection.registered {
                self.release(container);
            }
        }
    }

    fn answer(&mut self, connection: u64, line: &str) -> Option<String> {
        let request = match Request::parse(line) {
            Ok(request) => request,
            Err(e) => return Some(format!("{ERROR}\t{e}")),
        };
        match request {
            Request::Ping => Some(format!("{PONG}\t{}", std::process::id())),
            Request::Watch => None,
            Request::Register(registration) => Some(match self.register(registration) {
                Ok(container) => {
                    if let Some(c) = self.connections.get_mut(&connection) {
                        c.registered.push(container);
                    }
                    OK.to_owned()
                }
                Err(error) => format!("{ERROR}\t{}", chain(&error)),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
