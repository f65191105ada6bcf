//! The agent's side of the node logger (`outpost-container-log node`, see
//! [`outpost_container_log::node`]): one process per node that writes every container's
//! output into its CRI log file, started by the agent when none runs, adopted by an agent
//! that starts again, and restarted when it dies ([`NodeLogger::watch`] lets the agent's
//! supervision task learn of it at once).
//!
//! Its state directory and socket are under the agent's run directory
//! (`<run-dir>/logger/`): a test agent's run directory is private, so is its logger.
//!
//! A container is [registered](NodeLogger::register) before `Tasks.Create`: the agent
//! makes its FIFOs, the logger opens them and holds them until the returned
//! [`Registration`] is dropped, once `Tasks.Create` has returned.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio as ProcessStdio;
use std::time::Duration;

use outpost_container_log::node::protocol::{self, ERROR, OK, PONG};
use outpost_container_log::rotation::Limits;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::stdio::{self, Stdio};

/// How long a logger the agent started may take to answer.
const START_WAIT: Duration = Duration::from_secs(10);
/// How long the logger may take to answer a request.
const ANSWER_WAIT: Duration = Duration::from_secs(10);
/// The agent's own hidden subcommand that runs the node logger, where the small binary
/// is not installed.
pub const AGENT_SUBCOMMAND: &str = "container-log-node";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot start the node logger {}", .binary.display())]
    Spawn {
        binary: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the node logger did not answer on {} within {START_WAIT:?} of its start (its messages are in {})",
        .socket.display(), .log.display()
    )]
    Silent { socket: PathBuf, log: PathBuf },
    #[error("cannot talk to the node logger on {}", .socket.display())]
    Talk {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the node logger answered {answer:?} to {request}")]
    Unexpected { request: &'static str, answer: String },
    #[error("the node logger cannot log container {id}: {message}")]
    Refused { id: String, message: String },
    #[error(transparent)]
    Protocol(#[from] protocol::Error),
    #[error(transparent)]
    Fifos(#[from] stdio::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the node logger of an agent lives, and how to start it. Clones share
/// [`NodeLogger::started`].
#[derive(Debug, Clone)]
pub struct NodeLogger {
    binary: PathBuf,
    state_dir: PathBuf,
    socket: PathBuf,
    /// Told each time this agent starts a logger (a permit kept if nobody waits).
    started: std::sync::Arc<tokio::sync::Notify>,
}

/// A registered container, held by the logger until this is dropped (once
/// `Tasks.Create` has returned).
#[derive(Debug)]
pub struct Registration {
    pub stdio: Stdio,
    _connection: UnixStream,
}

impl NodeLogger {
    /// The node logger of the agent whose run directory is `run_dir`, run from `binary`
    /// (`outpost-container-log`, or the agent's own executable:
    /// [`crate::logs::logger_binary`]).
    pub fn new(binary: &Path, run_dir: &Path) -> NodeLogger {
        let state_dir = run_dir.join("logger");
        let socket = state_dir.join("logger.sock");
        let started = std::sync::Arc::default();
        NodeLogger { binary: binary.to_path_buf(), state_dir, socket, started }
    }

    /// The logger binary it runs (the one the shims run with `containerLogger: container`).
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The file the logger's messages go to.
    pub fn log(&self) -> PathBuf {
        self.state_dir.join("logger.log")
    }

    /// The running logger's pid, if one answers.
    pub async fn ping(&self) -> Result<u32> {
        let (answer, _) = self.ask("ping", "ping").await?;
        answer
            .strip_prefix(PONG)
            .and_then(|pid| pid.trim_start_matches('\t').parse().ok())
            .ok_or(Error::Unexpected { request: "ping", answer })
    }

    /// The running logger's pid, starting it first if none answers (`true`: started).
    pub async fn ensure_running(&self) -> Result<(u32, bool)> {
        if let Ok(pid) = self.ping().await {
            return Ok((pid, false));
        }
        self.spawn()?;
        self.started.notify_one();
        let deadline = tokio::time::Instant::now() + START_WAIT;
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            match self.ping().await {
                Ok(pid) => return Ok((pid, true)),
                Err(_) if tokio::time::Instant::now() < deadline => {}
                Err(_) => {
                    return Err(Error::Silent { socket: self.socket.clone(), log: self.log() });
                }
            }
        }
    }

    /// Returns once a logger runs: at once if one answers, else when this agent (a clone
    /// of this value) starts one. With `containerLogger: container` the logger is started
    /// on demand, by the first container with stdin, and supervised from then on.
    pub async fn running(&self) {
        if self.ping().await.is_err() {
            self.started.notified().await;
        }
    }

    /// Starts the logger, not as the agent's child to wait for: it leaves the agent's
    /// session (`setsid`) and outlives it. Another logger already on the state directory
    /// makes it exit at once (its lock).
    fn spawn(&self) -> Result<()> {
        let failed = |source| Error::Spawn { binary: self.binary.clone(), source };
        std::fs::create_dir_all(&self.state_dir).map_err(failed)?;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log());
        let small = self.binary.file_name().is_some_and(|n| n == outpost_container_log::BINARY);
        let subcommand =
            if small { outpost_container_log::node::SUBCOMMAND } else { AGENT_SUBCOMMAND };
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .arg(subcommand)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .arg("--socket")
            .arg(&self.socket)
            .stdin(ProcessStdio::null())
            .stdout(ProcessStdio::null())
            .stderr(log.map(ProcessStdio::from).unwrap_or_else(|_| ProcessStdio::null()))
            .kill_on_drop(false);
        // Reaped by tokio when it exits: not the agent's to wait for.
        drop(command.spawn().map_err(failed)?);
        Ok(())
    }

    /// Makes container `id`'s FIFOs under `io_dir` and registers it with the logger
    /// (starting the logger if none runs), to log into `log`.
    pub async fn register(
        &self,
        io_dir: &Path,
        id: &str,
        log: &Path,
        terminal: bool,
        stdin: bool,
    ) -> Result<Registration> {
        let dir = stdio::fifo_dir(io_dir, id);
        let registered = self.register_fifos(&dir, id, log, terminal, stdin).await;
        if registered.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        registered
    }

    async fn register_fifos(
        &self,
        dir: &Path,
        id: &str,
        log: &Path,
        terminal: bool,
        stdin: bool,
    ) -> Result<Registration> {
        let stdio = stdio::make_fifos(dir, id, terminal, stdin)?;
        let registration = protocol::Registration {
            id: id.to_owned(),
            fifos: dir.to_path_buf(),
            log: log.to_path_buf(),
            limits: Limits::default(),
        };
        let request = registration.to_request()?;
        let (answer, connection) = match self.ask("register", &request).await {
            Ok(answered) => answered,
            Err(_) => {
                self.ensure_running().await?;
                self.ask("register", &request).await?
            }
        };
        if answer == OK {
            return Ok(Registration { stdio, _connection: connection });
        }
        match answer.strip_prefix(ERROR) {
            Some(message) => Err(Error::Refused {
                id: id.to_owned(),
                message: message.trim_start_matches('\t').to_owned(),
            }),
            None => Err(Error::Unexpected { request: "register", answer }),
        }
    }

    /// Waits until the running logger ends (its `watch` connection closes); at once if
    /// none runs.
    pub async fn watch(&self) {
        let Ok(mut connection) = UnixStream::connect(&self.socket).await else { return };
        if connection.write_all(b"watch\n").await.is_err() {
            return;
        }
        let mut sink = [0u8; 64];
        while matches!(connection.read(&mut sink).await, Ok(n) if n > 0) {}
    }

    /// Sends one request on a new connection; its answer and the connection.
    async fn ask(&self, request: &'static str, line: &str) -> Result<(String, UnixStream)> {
        let talk = |source| Error::Talk { socket: self.socket.clone(), source };
        let exchange = async {
            let mut connection = UnixStream::connect(&self.socket).await?;
            connection.write_all(format!("{line}\n").as_bytes()).await?;
            let mut answer = String::new();
            BufReader::new(&mut connection).read_line(&mut answer).await?;
            Ok::<_, io::Error>((answer.trim_end().to_owned(), connection))
        };
        let (answer, connection) = tokio::time::timeout(ANSWER_WAIT, exchange)
            .await
            .map_err(|_| talk(io::ErrorKind::TimedOut.into()))?
            .map_err(talk)?;
        if answer.is_empty() {
            return Err(Error::Unexpected { request, answer });
        }
        Ok((answer, connection))
    }
}
