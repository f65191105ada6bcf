//! What kubelet's streaming endpoints carry, whatever the transport: a remote command's
//! streams ([`Attached`], for `/exec` and `/attach`) and a pod's ports ([`PortDialer`],
//! for `/portForward`). The transports take these and nothing else: the WebSocket
//! `channel.k8s.io` protocols (`exec::session`) and SPDY/3.1 (`spdy`), so that a
//! command, an attach or a forwarded port behaves the same over either.
//!
//! kubelet's query parameters name the streams `input`, `output`, `error` and `tty`
//! (core/v1's `ExecStdinParam`, `ExecStdoutParam`, `ExecStderrParam`, `ExecTTYParam`);
//! [`StreamOptions::parse`] reads them.
//!
//! The sessions themselves are written once, over the [`logical`] streams both
//! transports implement:
//! - [`remote_command`]: one exec or attach, from the start to how it ended;
//! - [`port_forward`]: one forwarded connection;
//! - [`status`]: the error stream's `metav1.Status` and the resize stream's sizes.

pub mod logical;
pub mod port_forward;
pub mod remote_command;
pub mod status;

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::runtime::{container, exec, stdio};

/// Why a stream session cannot start, resize its terminal or tell how its command ended.
/// The transports send its text ([`crate::error_chain::describe`]) in the error channel's
/// `InternalError` status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A query parameter for a stream that is neither true nor false (`input=2`).
    #[error("{key} {value:?}: expected 1 (or true) or 0 (or false)")]
    Flag { key: String, value: String },
    /// A query that asks for no stream.
    #[error(
        "you must specify at least 1 of stdin, stdout, stderr (the query parameters input=1, \
         output=1, error=1)"
    )]
    NoStream,
    /// An exec's command: starting it, resizing its terminal, waiting for it.
    #[error(transparent)]
    Exec(#[from] exec::Error),
    /// An attach's input: the container's stdin FIFO.
    #[error(transparent)]
    Stdin(#[from] stdio::Error),
    /// An attach: the container's run cannot be read from the runtime.
    #[error(transparent)]
    Container(#[from] container::Error),
    /// An attach: the container is no longer in the runtime.
    #[error("container {0} is gone from the runtime")]
    Gone(String),
    /// An attach: the container's CRI log, which its output is followed in.
    #[error("cannot open the container's log {}: {source}", path.display())]
    OpenLog {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the container's log {}: {source}", path.display())]
    ReadLog {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// An attach: the container's TTY cannot be resized.
    #[error("resizing the TTY of container {id}: {source}")]
    Resize {
        id: String,
        #[source]
        source: tonic::Status,
    },
}

/// The client's side of a command's input.
pub type Input = Pin<Box<dyn AsyncWrite + Send>>;
/// A command's output, to the client.
pub type Output = Pin<Box<dyn AsyncRead + Send>>;

/// Which streams a client asked for, and whether it wants a TTY (stderr then goes to
/// the TTY too, so it is never asked for with one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamOptions {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl StreamOptions {
    /// kubelet's stream parameters from a query (`input=1&output=1&tty=1`), and the
    /// command (`command`, once per argument; attach has none). A TTY drops `error` (as
    /// kubelet does); at least one stream must be asked for. kubelet takes `1` for true;
    /// so does this, and `true` too.
    pub fn parse(query: Option<&str>) -> Result<(StreamOptions, Vec<String>), Error> {
        let mut options = StreamOptions::default();
        let mut command = Vec::new();
        for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let flag = || match &*value {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
                "" | "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
                other => Err(Error::Flag { key: key.to_string(), value: other.to_owned() }),
            };
            match &*key {
                "command" => command.push(value.to_string()),
                "input" => options.stdin = flag()?,
                "output" => options.stdout = flag()?,
                "error" => options.stderr = flag()?,
                "tty" => options.tty = flag()?,
                // `container` (the API server's own), and anything else: not used.
                _ => {}
            }
        }
        if options.tty {
            options.stderr = false;
        }
        if !(options.stdin || options.stdout || options.stderr) {
            return Err(Error::NoStream);
        }
        Ok((options, command))
    }
}

/// The streams of a running command (exec) or container (attach), each `None` unless
/// asked for, and the process behind them.
pub struct Attached {
    /// Dropping it is the client's end of input.
    pub stdin: Option<Input>,
    pub stdout: Option<Output>,
    /// `None` with a TTY.
    pub stderr: Option<Output>,
    pub process: Box<dyn Process>,
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached")
            .field("stdin", &self.stdin.is_some())
            .field("stdout", &self.stdout.is_some())
            .field("stderr", &self.stderr.is_some())
            .finish_non_exhaustive()
    }
}

/// How a stream session ended, for the error channel: the command's exit code, or why
/// it cannot be told.
pub type Ended = Result<i32, Error>;

/// The process a stream session is attached to. Dropped without [`Process::wait`] (the
/// client went away), an exec's command is killed and removed; an attached container
/// keeps running.
pub trait Process: Send {
    /// Sets the TTY's size (nothing without a TTY).
    fn resize(&self, width: u16, height: u16) -> BoxFuture<'_, Result<(), Error>>;
    /// Waits for the end, once the output streams have ended.
    fn wait(self: Box<Self>) -> BoxFuture<'static, Ended>;
}

/// A pod's network namespace, where `/portForward` connects.
pub trait PortDialer: Send + Sync {
    /// A TCP connection to `port` on the pod's loopback (`localhost:<port>` in its netns,
    /// as kubelet's CRI runtime connects).
    fn dial(&self, port: u16) -> BoxFuture<'static, io::Result<tokio::net::TcpStream>>;

    /// The pod, in kubelet's words for a forwarding error: `<name>, uid <uid>`.
    fn pod(&self) -> String;
}

/// What a streaming endpoint serves once its connection is upgraded.
pub enum Endpoint {
    /// `/exec` and `/attach`: the streams asked for, the command (for its status; empty
    /// for an attach), and what starts the process once the transport has the streams
    /// (SPDY's client opens them before that).
    Command { options: StreamOptions, command: Vec<String>, start: Start },
    /// `/portForward`: connections into the pod's network namespace. Over WebSocket the
    /// ports come from the query (`port`, as kube-apiserver passes them); over SPDY each
    /// stream pair names its own.
    PortForward { dialer: std::sync::Arc<dyn PortDialer>, ports: Vec<u16> },
}

/// Starts an exec's command or an attach to a container.
pub type Start = Box<dyn FnOnce() -> BoxFuture<'static, Result<Attached, Error>> + Send>;

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Command { options, .. } => {
                f.debug_struct("Command").field("options", options).finish_non_exhaustive()
            }
            Endpoint::PortForward { ports, .. } => {
                f.debug_struct("PortForward").field("ports", ports).finish_non_exhaustive()
            }
        }
    }
}

/// The most streaming sessions one authenticated user holds open at once (the API
/// server, which carries every kubectl's, is one user).
pub const SESSIONS_PER_USER: usize = 16;

/// The bounds on streaming connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// kubelet's `streamingConnectionIdleTimeout`: a connection that carries no data
    /// for this long is closed.
    pub idle_timeout: Duration,
    /// Streams open at once on one SPDY connection; past it a stream is refused.
    pub streams_per_connection: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            idle_timeout: crate::config::DEFAULT_STREAMING_CONNECTION_IDLE_TIMEOUT,
            streams_per_connection: outpost_formats::spdy::session::DEFAULT_MAX_STREAMS,
        }
    }
}
