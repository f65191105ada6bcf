//! kubelet's remote command over SPDY/3.1 (`/exec`, `/attach`): the client opens one
//! stream per std stream, naming it in the `streamType` header (`error`, `stdin`,
//! `stdout`, `stderr`, and `resize` with a TTY from `v3.channel.k8s.io` on). Once the
//! streams asked for are open (within kubelet's [`STREAM_CREATION_TIMEOUT`]) the session
//! runs ([`remote_command`]); then how the process ended goes on the error stream, as
//! kubelet writes it for the protocol (`v4.channel.k8s.io` a JSON `metav1.Status`, the
//! older ones the failure's message text and nothing on success: [`Encoding`]), and
//! every stream is finished.
//!
//! A client that goes away before the end drops the process without waiting for it,
//! which kills an exec's command.

use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use super::connection::{Connection, Limits, Stream};
use crate::api::streams::remote_command::{self, Streams as Logical};
use crate::api::streams::status::Encoding;
use crate::api::streams::{Start, StreamOptions};

/// kubelet's default `streamCreationTimeout`: how long the client has to open its
/// streams.
pub const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The remote command protocols kubelet serves over SPDY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    /// `channel.k8s.io`: the status as text; the server ends its half of stdin at once.
    V1,
    /// `v2.channel.k8s.io`: the status as text.
    V2,
    /// `v3.channel.k8s.io`: v2 and a resize stream with a TTY.
    V3,
    /// `v4.channel.k8s.io`: v3, the status as a JSON `metav1.Status`.
    V4,
}

impl Protocol {
    /// kubelet's order of preference.
    pub const ALL: [Protocol; 4] = [Protocol::V4, Protocol::V3, Protocol::V2, Protocol::V1];

    pub const fn name(self) -> &'static str {
        match self {
            Protocol::V1 => "channel.k8s.io",
            Protocol::V2 => "v2.channel.k8s.io",
            Protocol::V3 => "v3.channel.k8s.io",
            Protocol::V4 => "v4.channel.k8s.io",
        }
    }

    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == name)
    }

    /// How many streams the client opens for `options`: the error stream, each std
    /// stream asked for, and resize with a TTY from v3 on.
    pub fn expected_streams(self, options: StreamOptions) -> usize {
        1 + usize::from(options.stdin)
            + usize::from(options.stdout)
            + usize::from(options.stderr)
            + usize::from(options.tty && self >= Protocol::V3)
    }

    /// How the error stream carries the status.
    pub fn encoding(self) -> Encoding {
        if self == Protocol::V4 { Encoding::Json } else { Encoding::Text }
    }
}

/// The streams a client opened, by type.
#[derive(Debug, Default)]
struct Streams {
    error: Option<Stream>,
    stdin: Option<Stream>,
    stdout: Option<Stream>,
    stderr: Option<Stream>,
    resize: Option<Stream>,
}

/// Serves one remote command on `io`.
pub async fn serve<T>(
    io: T,
    protocol: Protocol,
    options: StreamOptions,
    command: Vec<String>,
    start: Start,
    limits: Limits,
) where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let mut connection = Connection::new(io, Box::new(|_| Ok(())), limits);
    let expected = protocol.expected_streams(options);
    let Some(streams) = wait_for_streams(&mut connection, expected).await else {
        connection.close().await;
        return;
    };
    if protocol == Protocol::V1
        && let Some(stdin) = &streams.stdin
    {
        let _ = stdin.sender.finish().await;
    }
    let Streams { error, stdin, stdout, stderr, resize } = streams;
    let mut senders: Vec<_> =
        [&stdin, &resize].into_iter().flatten().map(|s| s.sender.clone()).collect();
    let logical = Logical {
        stdin: stdin.map(|s| Box::new(s.inbound) as _),
        stdout: stdout.map(|s| Box::new(s.sender) as _),
        stderr: stderr.map(|s| Box::new(s.sender) as _),
        resize: resize.map(|s| Box::new(s.inbound) as _),
    };
    let Some(ended) = remote_command::run(logical, start, connection.closed()).await else {
        connection.close().await;
        return;
    };
    debug!(?ended, "remote command ended");
    if let Some(error) = error {
        if let Some(bytes) = protocol.encoding().status_bytes(&command, &ended) {
            let _ = error.sender.send(&bytes).await;
        }
        senders.push(error.sender);
    }
    for sender in senders {
        let _ = sender.finish().await;
    }
    connection.close().await;
}

/// Takes the client's streams until `expected` of them are open, for at most
/// [`STREAM_CREATION_TIMEOUT`]; `None` when they do not come.
async fn wait_for_streams(connection: &mut Connection, expected: usize) -> Option<Streams> {
    let deadline = Instant::now() + STREAM_CREATION_TIMEOUT;
    let mut streams = Streams::default();
    let mut received = 0;
    while received < expected {
        let stream = match tokio::time::timeout_at(deadline, connection.accept()).await {
            Ok(Some(stream)) => stream,
            Ok(None) => {
                debug!("the client went away while opening its streams");
                return None;
            }
            Err(_) => {
                warn!(received, expected, "timed out waiting for client to create streams");
                return None;
            }
        };
        let kind = stream.headers.get("streamType").unwrap_or_default().to_owned();
        let slot = match kind.as_str() {
            "error" => &mut streams.error,
            "stdin" => &mut streams.stdin,
            "stdout" => &mut streams.stdout,
            "stderr" => &mut streams.stderr,
            "resize" => &mut streams.resize,
            other => {
                // Reset, so that it does not count against the connection's streams.
                warn!(stream_type = other, "unexpected stream type");
                stream.sender.reset(outpost_formats::spdy::frame::rst::REFUSED_STREAM).await;
                continue;
            }
        };
        *slot = Some(stream);
        received += 1;
    }
    Some(streams)
}

#[cfg(test)]
mod tests;
