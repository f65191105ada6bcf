//! systemd's service notification protocol (sd_notify(3)): `READY=1` once the agent
//! serves, `STOPPING=1` at shutdown, and `WATCHDOG=1` keep-alives while its main tasks run.
//!
//! Written over a plain [`UnixDatagram`]: the protocol is one datagram per message to
//! `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::AbortHandle;
use tracing::{debug, info, warn};

pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
pub const WATCHDOG_USEC: &str = "WATCHDOG_USEC";
pub const WATCHDOG_PID: &str = "WATCHDOG_PID";

/// How often readiness is checked until it is announced.
const READY_POLL: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open a datagram socket to notify systemd")]
    Socket(#[source] io::Error),
    #[error("NOTIFY_SOCKET {addr:?} is not a usable socket address; unset it or fix the unit")]
    Address {
        addr: NotifyAddr,
        #[source]
        source: io::Error,
    },
    #[error("cannot send {message:?} to systemd's NOTIFY_SOCKET {addr:?}")]
    Send {
        message: String,
        addr: NotifyAddr,
        #[source]
        source: io::Error,
    },
}

/// Where `$NOTIFY_SOCKET` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyAddr {
    Path(PathBuf),
    /// `@name`: Linux's abstract namespace (the name without the `@`).
    Abstract(Vec<u8>),
}

/// What systemd asked of this process, read from its environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    pub notify_socket: Option<NotifyAddr>,
    /// `$WATCHDOG_USEC`, when it is meant for this process.
    pub watchdog: Option<Duration>,
}

/// A message of the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Ready { status: String },
    Stopping { status: String },
    Watchdog,
}

impl Message {
    /// The datagram: newline-separated `KEY=value` assignments. A status is one line.
    pub fn encode(&self) -> String {
        let status = |s: &str| s.replace(['\n', '\r'], " ");
        match self {
            Message::Ready { status: s } => format!("READY=1\nSTATUS={}", status(s)),
            Message::Stopping { status: s } => format!("STOPPING=1\nSTATUS={}", status(s)),
            Message::Watchdog => "WATCHDOG=1".to_owned(),
        }
    }
}

/// `$NOTIFY_SOCKET`: an absolute path or `@name`; anything else (unset, empty, relative,
/// or another address family such as `vsock:`) means no notifications.
pub fn parse_socket(value: Option<&OsStr>) -> Option<NotifyAddr> {
    let bytes = value?.as_bytes();
    match bytes.first()? {
        b'/' => Some(NotifyAddr::Path(PathBuf::from(OsStr::from_bytes(bytes)))),
        b'@' if bytes.len() > 1 => Some(NotifyAddr::Abstract(bytes[1..].to_vec())),
        _ => None,
    }
}

/// `$WATCHDOG_USEC` (a positive count of microseconds) applies when `$WATCHDOG_PID` is
/// unset or names this process (`own_pid`): a child that inherited it must not feed it.
pub fn parse_watchdog(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    let usec = usec?.trim().parse::<u64>().ok().filter(|&u| u > 0)?;
    match pid {
        Some(pid) if pid.trim().parse::<u32>().ok() != Some(own_pid) => None,
        _ => Some(Duration::from_micros(usec)),
    }
}

/// Keep-alives go out at half the watchdog interval (what sd_watchdog_enabled(3) advises).
pub fn ping_interval(watchdog: Duration) -> Duration {
    (watchdog / 2).max(Duration::from_millis(1))
}

/// Reads the notification variables and removes them from the environment, so that
/// nothing the agent starts (CNI plugins, a managed containerd and its shims) inherits
/// them and talks to systemd in the agent's name.
///
/// Call it first thing in `main`, before any thread is started: when the process already
/// has other threads, the variables are left in place (and a warning says so).
pub fn take_env() -> Env {
    let var = |name| std::env::var_os(name);
    let text = |v: Option<OsString>| v.and_then(|v| v.into_string().ok());
    let env = Env {
        notify_socket: parse_socket(var(NOTIFY_SOCKET).as_deref()),
        watchdog: parse_watchdog(
            text(var(WATCHDOG_USEC)).as_deref(),
            text(var(WATCHDOG_PID)).as_deref(),
            std::process::id(),
        ),
    };
    if !single_threaded(&crate::host::proc::own_status().unwrap_or_default()) {
        warn!("started after other threads: the agent's children inherit NOTIFY_SOCKET");
        return env;
    }
    for name in [NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID] {
        #[allow(unsafe_code)]
        // SAFETY: this is the process's only thread (checked just above, and only this
        // thread could start another), so nothing reads or writes the environment
        // concurrently.
        unsafe {
            std::env::remove_var(name)
        };
    }
    env
}

/// Whether `/proc/self/status` (its text) says the process has exactly one thread.
pub fn single_threaded(proc_status: &str) -> bool {
    proc_status.lines().find_map(|l| l.strip_prefix("Threads:")).is_some_and(|n| n.trim() == "1")
}

/// A connection to systemd's notification socket; cheap to clone.
#[derive(Debug, Clone)]
pub struct Notifier {
    socket: Arc<UnixDatagram>,
    addr: SocketAddr,
    target: NotifyAddr,
}

impl Notifier {
    /// `None` when systemd did not ask for notifications.
    pub fn open(env: &Env) -> Result<Option<Notifier>, Error> {
        let Some(target) = env.notify_socket.clone() else { return Ok(None) };
        let addr = match &target {
            NotifyAddr::Path(path) => SocketAddr::from_pathname(path),
            NotifyAddr::Abstract(name) => SocketAddr::from_abstract_name(name),
        }
        .map_err(|source| Error::Address { addr: target.clone(), source })?;
        let socket = UnixDatagram::unbound().map_err(Error::Socket)?;
        // systemd reads promptly; a full queue must never stall the agent.
        socket.set_nonblocking(true).map_err(Error::Socket)?;
        Ok(Some(Notifier { socket: Arc::new(socket), addr, target }))
    }

    pub fn notify(&self, message: &Message) -> Result<(), Error> {
        let text = message.encode();
        self.socket
            .send_to_addr(text.as_bytes(), &self.addr)
            .map(drop)
            .map_err(|source| Error::Send { message: text, addr: self.target.clone(), source })
    }

    /// Sends, and logs a failure (systemd being gone is no reason to stop the pods).
    pub fn notify_or_warn(&self, message: &Message) {
        match self.notify(message) {
            Ok(()) => debug!(message = %message.encode(), "notified systemd"),
            Err(e) => warn!(error = %crate::error_chain::describe(&e), "cannot notify systemd"),
        }
    }
}

/// What [`spawn`] watches.
pub struct Watch {
    /// `Some(status)` once the agent is ready (announced once).
    pub ready: Box<dyn Fn() -> Option<String> + Send>,
    /// The main tasks, by name: the watchdog is fed only while none of them has ended.
    pub alive: Vec<(&'static str, AbortHandle)>,
    pub watchdog: Option<Duration>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let alive: Vec<&str> = self.alive.iter().map(|(name, _)| *name).collect();
        f.debug_struct("Watch")
            .field("alive", &alive)
            .field("watchdog", &self.watchdog)
            .finish_non_exhaustive()
    }
}

/// Announces readiness, then feeds the watchdog while every task in `watch.alive` runs.
pub async fn run(notifier: Notifier, watch: Watch) {
    let mut poll = tokio::time::interval(READY_POLL);
    let mut ping = watch.watchdog.map(|w| tokio::time::interval(ping_interval(w)));
    let mut ready = false;
    loop {
        tokio::select! {
            _ = poll.tick(), if !ready => {
                if let Some(status) = (watch.ready)() {
                    info!(status, "ready; notifying systemd");
                    notifier.notify_or_warn(&Message::Ready { status });
                    ready = true;
                }
            }
            Some(_) = tick(&mut ping) => {
                if let Some((task, _)) = watch.alive.iter().find(|(_, t)| t.is_finished()) {
                    warn!(task, "a main task ended; no longer feeding systemd's watchdog");
                    return;
                }
                notifier.notify_or_warn(&Message::Watchdog);
            }
            else => return,
        }
    }
}

async fn tick(interval: &mut Option<tokio::time::Interval>) -> Option<()> {
    match interval {
        Some(interval) => {
            interval.tick().await;
            Some(())
        }
        None => None,
    }
}

#[cfg(test)]
mod tests;
