//! A containerd the agent runs itself (`--containerd managed`), as k3s does: a
//! supervised child with its own config, sockets and directories, restarted with backoff
//! when it dies.
//!
//! Containers do not depend on it staying up: each has a shim, a separate process in a
//! group of its own, which outlives a containerd restart and the agent's exit. Only the
//! containerd process itself is ever signalled.
//!
//! If the agent is killed (SIGKILL) its containerd lives on, holding the lock of its
//! metadata database. The pid file in the run directory lets the next start find it
//! (checking that the pid still runs `<binary> --config <our config>`) and stop it.
//! PR_SET_PDEATHSIG is not used: it fires when the *thread* that spawned the child exits,
//! and tokio's threads come and go, so containerd could be killed at any time; and it
//! needs an `unsafe` pre-exec hook.

mod config;
mod process;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use outpost_core::backoff::Backoff;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Where the managed containerd's sockets, pid file and state go (a tmpfs).
pub const DEFAULT_RUN_DIR: &str = "/run/outpost/containerd";
/// Unix socket paths are limited to 107 bytes (`sun_path`, with its NUL).
const MAX_SOCKET_PATH: usize = 107;
/// Restarts back off from 1 s to 1 min; an instance that ran this long resets it.
const RESTART_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
const STABLE_AFTER: Duration = Duration::from_secs(60);

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "containerd is not on PATH: install it (Debian: `apt install containerd runc`), or run \
         with --containerd external and point --containerd-socket at a running containerd"
    )]
    NotOnPath,
    #[error("cannot create {} for the managed containerd", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the managed containerd's socket path {} is {len} bytes; unix sockets allow at most \
         {MAX_SOCKET_PATH}: use a shorter run directory",
        path.display()
    )]
    SocketPath { path: PathBuf, len: usize },
    #[error("{}: the managed containerd's paths must be UTF-8 to be written into its config", path.display())]
    NotUtf8 { path: PathBuf },
    #[error("cannot write the managed containerd's config {}", path.display())]
    WriteConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open or write containerd's log {}", path.display())]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot run containerd ({}): is it installed and executable?", binary.display())]
    Spawn {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write containerd's pid file {}", path.display())]
    PidFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot remove containerd's stale {}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("containerd exited during start ({status}); the end of {}:\n{tail}", log.display())]
    Exited { status: ExitStatus, log: PathBuf, tail: String },
    #[error("waiting for the containerd process")]
    Wait {
        #[source]
        source: std::io::Error,
    },
    #[error(
        "containerd did not answer on {} within {timeout:?}; stopped it; the end of {}:\n{tail}",
        socket.display(), log.display()
    )]
    Timeout { socket: PathBuf, timeout: Duration, log: PathBuf, tail: String },
    #[error("cannot signal the containerd (pid {pid}) left running by a previous agent")]
    Stale {
        pid: i32,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("the containerd (pid {pid}) left running by a previous agent survived SIGKILL")]
    StaleSurvived { pid: i32 },
    #[error("the managed containerd's supervisor panicked or was cancelled")]
    Supervisor {
        #[source]
        source: tokio::task::JoinError,
    },
}

/// What the agent does about containerd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Connect to `--containerd-socket` (retrying until it answers).
    External,
    /// Start [`ManagedContainerd`].
    Managed,
}

/// Decides: the `wanted` choice if one is set (`--containerd managed|external`), else
/// (auto) by whether the external socket exists and whether a `containerd` binary was
/// found. In auto mode, with neither, the agent connects to the external socket and
/// reports that it cannot, retrying: containerd may be starting.
pub fn choose(wanted: Option<Choice>, socket_exists: bool, binary_found: bool) -> Choice {
    match wanted {
        Some(choice) => choice,
        None if socket_exists => Choice::External,
        None if binary_found => Choice::Managed,
        None => Choice::External,
    }
}

/// The `containerd` executable on PATH.
pub fn find_binary() -> Option<PathBuf> {
    outpost_host::on_path("containerd")
}

/// Where the managed containerd lives and how long it may take.
#[derive(Debug, Clone)]
pub struct Options {
    pub binary: PathBuf,
    /// Persistent: its config, `root/` (images, snapshots, metadata) and `opt/`.
    pub dir: PathBuf,
    /// Volatile: its sockets, `state/` and the pid file.
    pub run_dir: PathBuf,
    pub log: PathBuf,
    /// How long it may take to answer after it is started.
    pub start_timeout: Duration,
    /// How long it may take to exit after SIGTERM before it gets SIGKILL.
    pub stop_timeout: Duration,
    /// The log is moved to `<log>.1` at a start once it is larger than this.
    pub max_log_size: u64,
}

impl Options {
    /// The defaults: `<state-dir>/containerd` with `containerd.log` in it, and
    /// [`DEFAULT_RUN_DIR`].
    pub fn new(binary: PathBuf, state_dir: &Path) -> Options {
        let dir = state_dir.join("containerd");
        Options {
            binary,
            log: dir.join("containerd.log"),
            dir,
            run_dir: DEFAULT_RUN_DIR.into(),
            start_timeout: Duration::from_secs(60),
            stop_timeout: Duration::from_secs(10),
            max_log_size: 16 << 20,
        }
    }

    /// containerd's gRPC socket.
    pub fn socket(&self) -> PathBuf {
        self.run_dir.join("containerd.sock")
    }
    fn ttrpc_socket(&self) -> PathBuf {
        self.run_dir.join("containerd.sock.ttrpc")
    }
    /// The pid of the running containerd, for the next start if the agent is killed.
    pub fn pid_file(&self) -> PathBuf {
        self.run_dir.join("containerd.pid")
    }
    /// The config file it runs with (rewritten at each start).
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.toml")
    }

    /// Creates the directories and writes the config.
    fn prepare(&self) -> Result<()> {
        let socket = self.socket();
        let ttrpc = self.ttrpc_socket();
        for path in [&socket, &ttrpc] {
            let len = path.as_os_str().len();
            if len > MAX_SOCKET_PATH {
                return Err(Error::SocketPath { path: path.clone(), len });
            }
        }
        let (root, state, opt) =
            (self.dir.join("root"), self.run_dir.join("state"), self.dir.join("opt"));
        for dir in [&self.dir, &self.run_dir, &root, &state, &opt] {
            std::fs::create_dir_all(dir)
                .map_err(|source| Error::CreateDir { path: dir.clone(), source })?;
        }
        let layout = config::Layout {
            root: &root,
            state: &state,
            opt: &opt,
            socket: &socket,
            ttrpc_socket: &ttrpc,
        };
        let text = config::render(layout).map_err(|e| Error::NotUtf8 { path: e.0.to_owned() })?;
        let path = self.config();
        std::fs::write(&path, text).map_err(|source| Error::WriteConfig { path, source })
    }
}

/// The running managed containerd. Dropping it stops containerd too (in the background;
/// SIGKILL if the runtime is shutting down); [`ManagedContainerd::stop`] stops it and
/// waits.
#[derive(Debug)]
pub struct ManagedContainerd {
    socket: PathBuf,
    pid: watch::Receiver<Option<u32>>,
    stop: DropGuard,
    supervisor: JoinHandle<()>,
}

impl ManagedContainerd {
    /// Stops a containerd a killed agent left behind, writes the config, starts
    /// containerd and returns once its socket answers; from then on it is supervised.
    pub async fn start(options: Options) -> Result<ManagedContainerd> {
        options.prepare()?;
        process::stop_stale(&options).await?;
        let child = process::launch(&options).await?;
        let socket = options.socket();
        tracing::info!(
            pid = child.id(),
            socket = %socket.display(),
            log = %options.log.display(),
            "started the managed containerd"
        );
        let (pid_tx, pid) = watch::channel(child.id());
        let cancel = CancellationToken::new();
        let supervisor = Supervisor { options, pid: pid_tx, cancel: cancel.clone() };
        let supervisor = tokio::spawn(supervisor.run(child));
        Ok(ManagedContainerd { socket, pid, stop: cancel.drop_guard(), supervisor })
    }

    /// Its gRPC socket, for [`crate::Containerd::connect`].
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The pid of the current containerd process (`None` while it is being restarted).
    pub fn pid(&self) -> Option<u32> {
        *self.pid.borrow()
    }

    /// Stops containerd: SIGTERM, and SIGKILL if it has not exited within the stop
    /// timeout; removes its sockets and pid file. Containers keep running.
    pub async fn stop(self) -> Result<()> {
        self.stop.disarm().cancel();
        self.supervisor.await.map_err(|source| Error::Supervisor { source })
    }
}

/// Watches the child; restarts it when it dies, stops it when cancelled.
struct Supervisor {
    options: Options,
    pid: watch::Sender<Option<u32>>,
    cancel: CancellationToken,
}

impl Supervisor {
    async fn run(self, mut child: Child) {
        let mut backoff = RESTART_BACKOFF;
        loop {
            let started = Instant::now();
            let pid = child.id();
            let exit = tokio::select! {
                status = child.wait() => Some(status),
                () = self.cancel.cancelled() => None,
            };
            let Some(status) = exit else {
                let status = process::terminate(&mut child, self.options.stop_timeout).await;
                tracing::info!(pid, ?status, "stopped the managed containerd");
                self.finish();
                return;
            };
            self.pid.send_replace(None);
            if started.elapsed() >= STABLE_AFTER {
                backoff.reset();
            }
            let status = status.map_or_else(|e| format!("unknown ({e})"), |s| s.to_string());
            tracing::warn!(
                pid,
                %status,
                log = %self.options.log.display(),
                tail = %process::tail(&self.options.log),
                "the managed containerd exited; restarting it (its containers keep running)"
            );
            match self.restart(&mut backoff).await {
                Some(next) => child = next,
                None => {
                    self.finish();
                    return;
                }
            }
        }
    }

    /// Launches containerd again after a backoff delay, until it answers; `None` when
    /// cancelled meanwhile.
    async fn restart(&self, backoff: &mut Backoff) -> Option<Child> {
        loop {
            let delay = backoff.next_delay(fastrand::f64());
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = self.cancel.cancelled() => return None,
            }
            let launched = tokio::select! {
                launched = process::launch(&self.options) => launched,
                () = self.cancel.cancelled() => return None,
            };
            match launched {
                Ok(child) => {
                    tracing::info!(pid = child.id(), "restarted the managed containerd");
                    self.pid.send_replace(child.id());
                    return Some(child);
                }
                Err(e) => tracing::error!(
                    error = %outpost_core::error_chain::describe(&e),
                    retry_in = ?backoff.nominal(),
                    "cannot restart the managed containerd; retrying"
                ),
            }
        }
    }

    fn finish(&self) {
        self.pid.send_replace(None);
        if let Err(e) = process::remove_runtime_files(&self.options) {
            tracing::warn!(error = %outpost_core::error_chain::describe(&e), "after stopping containerd");
        }
    }
}
