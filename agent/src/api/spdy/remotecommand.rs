//! kubelet's remote command over SPDY/3.1 (`/exec`, `/attach`): the client opens one
//! stream per std stream, naming it in the `streamType` header (`error`, `stdin`,
//! `stdout`, `stderr`, and `resize` with a TTY from `v3.channel.k8s.io` on). Once the
//! streams asked for are open (within kubelet's [`STREAM_CREATION_TIMEOUT`]) the process
//! starts; stdin flows to it, stdout and stderr back, resizes (a sequence of JSON
//! `{"Width":..,"Height":..}`) are applied; when the output streams end and the process
//! has ended, its status goes on the error stream, as kubelet writes it for the
//! protocol: `v4.channel.k8s.io` a JSON `metav1.Status` (`Success`, or `NonZeroExitCode`
//! with the code as the `ExitCode` cause), the older ones the failure's message text and
//! nothing on success.
//!
//! A client that goes away before the end drops the process without waiting for it,
//! which kills an exec's command.

use std::time::Duration;

use axum::body::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{Instrument, Span, debug, info, warn};

use super::connection::{Connection, Receiver, Sender, Stream};
use crate::api::exec::channel::{Status, TerminalSize};
use crate::api::streams::{Ended, Input, Output, Start, StreamOptions};
use crate::error_chain::describe;

/// kubelet's default `streamCreationTimeout`: how long the client has to open its
/// streams.
pub const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// The most output read at once.
const OUTPUT_CHUNK: usize = 32 * 1024;

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

    /// What the error stream carries at the end, if anything.
    pub fn status_bytes(self, ended: &Ended) -> Option<Vec<u8>> {
        let status = match ended {
            Ok(code) => {
                let mut status = Status::exited(&[], *code);
                if *code != 0 {
                    status.message =
                        format!("command terminated with non-zero exit code: exit status {code}");
                }
                status
            }
            Err(error) => Status::internal_error(&describe(error)),
        };
        if self == Protocol::V4 {
            // Strings and numbers only: serializing cannot fail.
            return Some(serde_json::to_vec(&status).unwrap_or_default());
        }
        (status.status != "Success").then(|| status.message.into_bytes())
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
pub async fn serve<T>(io: T, protocol: Protocol, options: StreamOptions, start: Start)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let mut connection =
        Connection::new(io, Box::new(|_| Ok(())), super::connection::Limits::default());
    let expected = protocol.expected_streams(options);
    let Some(mut streams) = wait_for_streams(&mut connection, expected).await else {
        connection.close().await;
        return;
    };
    if protocol == Protocol::V1
        && let Some(stdin) = &streams.stdin
    {
        let _ = stdin.sender.finish().await;
    }
    let error = streams.error.take();
    let ended = match start().await {
        Ok(attached) => {
            info!(tty = options.tty, stdin = options.stdin, "remote command started over SPDY");
            let closed = connection.closed();
            let pumps =
                Pumps::start(&mut streams, attached.stdin, attached.stdout, attached.stderr);
            let process = attached.process;
            let resize = streams.resize.take().map(|s| s.inbound);
            let ended = tokio::select! {
                ended = run(pumps, resize, process) => ended,
                () = closed.cancelled() => {
                    info!("the client went away before the end: the process is dropped");
                    connection.close().await;
                    return;
                }
            };
            ended
        }
        Err(error) => {
            warn!(error = %describe(&error), "the remote command cannot start");
            Err(error)
        }
    };
    debug!(?ended, "remote command ended");
    if let Some(error) = error {
        if let Some(bytes) = protocol.status_bytes(&ended) {
            let _ = error.sender.send(&bytes).await;
        }
        let _ = error.sender.finish().await;
    }
    for stream in
        [streams.stdin, streams.stdout, streams.stderr, streams.resize].into_iter().flatten()
    {
        let _ = stream.sender.finish().await;
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
                warn!(stream_type = other, "unexpected stream type");
                continue;
            }
        };
        *slot = Some(stream);
        received += 1;
    }
    Some(streams)
}

/// The tasks that move the std streams.
struct Pumps {
    /// Stdout and stderr, to the client; the session waits for them.
    outputs: JoinSet<()>,
    /// Stdin, to the process; it ends with the session.
    _input: JoinSet<()>,
}

impl Pumps {
    fn start(
        streams: &mut Streams,
        stdin: Option<Input>,
        stdout: Option<Output>,
        stderr: Option<Output>,
    ) -> Pumps {
        let span = Span::current();
        let mut outputs = JoinSet::new();
        let mut input = JoinSet::new();
        if let Some(stdin) = stdin {
            // A client that did not open stdin gives none: the input ends at once.
            if let Some(stream) = streams.stdin.as_mut() {
                let (_, receiver) = take_inbound(stream);
                input.spawn(pump_input(receiver, stdin).instrument(span.clone()));
            }
        }
        for (output, stream) in [(stdout, &streams.stdout), (stderr, &streams.stderr)] {
            let Some(output) = output else { continue };
            let sender = stream.as_ref().map(|s| s.sender.clone());
            outputs.spawn(pump_output(output, sender).instrument(span.clone()));
        }
        Pumps { outputs, _input: input }
    }
}

/// Swaps a stream's receiver out (the stream keeps a closed one).
fn take_inbound(stream: &mut Stream) -> (u32, Receiver) {
    (stream.id, std::mem::replace(&mut stream.inbound, Receiver::closed()))
}

/// Runs until the outputs have ended and the process has: resizes are applied meanwhile.
async fn run(
    mut pumps: Pumps,
    mut resize: Option<Receiver>,
    process: Box<dyn crate::api::streams::Process>,
) -> Ended {
    let mut sizes = ResizeDecoder::default();
    loop {
        tokio::select! {
            // Sizes sent before the output ended apply first.
            biased;
            chunk = next_chunk(&mut resize) => match chunk {
                Some(chunk) => {
                    for size in sizes.push(&chunk) {
                        if let Err(e) = process.resize(size.width, size.height).await {
                            debug!(error = %describe(&e), "resize not applied");
                        }
                    }
                    if sizes.failed() {
                        resize = None;
                    }
                }
                None => resize = None,
            },
            done = pumps.outputs.join_next() => if done.is_none() { break },
        }
    }
    process.wait().await
}

async fn next_chunk(receiver: &mut Option<Receiver>) -> Option<Bytes> {
    match receiver {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// The client's stdin to the process; its end (FIN or reset) closes the process's input.
async fn pump_input(mut receiver: Receiver, mut stdin: Input) {
    while let Some(chunk) = receiver.recv().await {
        if stdin.write_all(&chunk).await.is_err() {
            return;
        }
    }
    let _ = stdin.shutdown().await;
}

/// One output to the client, then FIN. Output the client cannot take (it has no such
/// stream, or reset it) is read and dropped, so that the process never blocks on it.
async fn pump_output(mut output: Output, sender: Option<Sender>) {
    let mut buffer = vec![0u8; OUTPUT_CHUNK];
    let mut sender = sender;
    loop {
        let n = match output.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(to) = &sender
            && to.send(&buffer[..n]).await.is_err()
        {
            sender = None;
        }
    }
    if let Some(sender) = sender {
        let _ = sender.finish().await;
    }
}

/// The resize stream's JSON objects, as they arrive in pieces. A stream that is not
/// JSON terminal sizes stops being read, as kubelet's decoder stops.
#[derive(Debug, Default)]
pub struct ResizeDecoder {
    buffer: Vec<u8>,
    failed: bool,
}

impl ResizeDecoder {
    /// The sizes complete with `chunk`.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<TerminalSize> {
        if self.failed {
            return Vec::new();
        }
        self.buffer.extend_from_slice(chunk);
        let mut sizes = Vec::new();
        let mut objects =
            serde_json::Deserializer::from_slice(&self.buffer).into_iter::<TerminalSize>();
        let mut used = 0;
        loop {
            match objects.next() {
                Some(Ok(size)) => {
                    sizes.push(size);
                    used = objects.byte_offset();
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(_)) => {
                    self.failed = true;
                    break;
                }
                None => {
                    used = objects.byte_offset();
                    break;
                }
            }
        }
        self.buffer.drain(..used);
        sizes
    }

    /// Whether the stream held something else than terminal sizes.
    pub fn failed(&self) -> bool {
        self.failed
    }
}

#[cfg(test)]
mod tests;
