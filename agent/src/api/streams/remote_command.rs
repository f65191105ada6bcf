//! One remote command (`/exec`, `/attach`) over any transport's logical streams
//! ([`Streams`]): the process starts, the client's stdin flows to it and its stdout and
//! stderr back, the client's terminal sizes are applied, and the session ends with how
//! the process ended ([`Ended`], which the transport writes on the error stream with
//! [`status::Encoding`](super::status::Encoding)).
//!
//! One loop reads the client's streams, the resize stream first, so that a size sent
//! before some input is applied before that input reaches the process. Stdin goes to a
//! pump of its own without waiting: when the pump has no room (the process does not
//! read), the client's stdin is read no further until it has, and the loop still sees
//! the process end. While the process's outputs are open, resizes apply; once they have
//! ended its exit is awaited. A client that goes away (`gone`) ends the session at once:
//! the process is dropped unwaited, which kills an exec's command and removes it (as
//! containerd's CRI does when an exec stream ends); an attached container keeps running.

use axum::body::Bytes;
use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span, debug, info};

use super::logical::{Inbound, Outbound};
use super::status::{ResizeDecoder, TerminalSize};
use super::{Attached, Ended, Input, Output, Process, Start};
use crate::error_chain::describe;

/// The most output read at once (one frame or message to the client).
pub const OUTPUT_CHUNK: usize = 32 * 1024;
/// Chunks of stdin queued for the process; the client's stdin is read no further past
/// this.
const STDIN_CHUNKS: usize = 16;

/// The client's streams, each `None` unless it opened (or asked for) it.
#[derive(Default)]
pub struct Streams {
    pub stdin: Option<Box<dyn Inbound>>,
    pub stdout: Option<Box<dyn Outbound>>,
    pub stderr: Option<Box<dyn Outbound>>,
    pub resize: Option<Box<dyn Inbound>>,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams")
            .field("stdin", &self.stdin.is_some())
            .field("stdout", &self.stdout.is_some())
            .field("stderr", &self.stderr.is_some())
            .field("resize", &self.resize.is_some())
            .finish()
    }
}

/// Runs the command `start` starts over `streams` until it ends: how it ended, or `None`
/// when the client went away first (`gone`).
pub async fn run(streams: Streams, start: Start, gone: CancellationToken) -> Option<Ended> {
    // Not raced with `gone`: a start cut short could leave its process behind. A
    // client gone meanwhile ends the session at the loop's first turn, which kills it.
    let attached = match start().await {
        Ok(attached) => attached,
        Err(error) => {
            tracing::warn!(error = %describe(&error), "the remote command cannot start");
            return Some(Err(error));
        }
    };
    info!("remote command started");
    let Attached { stdin: pipe, stdout, stderr, process } = attached;
    let span = Span::current();
    let mut outputs = JoinSet::new();
    for (output, to) in [(stdout, streams.stdout), (stderr, streams.stderr)] {
        if let Some(output) = output {
            outputs.spawn(pump_output(output, to).instrument(span.clone()));
        }
    }
    let mut input = JoinSet::new();
    let mut stdin = pipe.map(|pipe| {
        let (tx, rx) = mpsc::channel(STDIN_CHUNKS);
        input.spawn(pump_input(rx, pipe).instrument(span.clone()));
        tx
    });
    let mut from_client = streams.stdin;
    let mut resize = streams.resize;
    let mut sizes = ResizeDecoder::default();
    // While the process's output is open, resizes apply; then its exit is awaited.
    let mut session = Some(process);
    let mut exit = None;
    // Stdin the pump has no room for: the client's is read no further until it has.
    let mut pending: Option<Bytes> = None;
    loop {
        tokio::select! {
            biased;
            () = gone.cancelled() => {
                info!("the exec client went away; the command is killed (an attached container keeps running)");
                return None;
            }
            chunk = next(&mut resize) => match chunk {
                Some(chunk) => {
                    resized(session.as_deref(), sizes.push(&chunk)).await;
                    if sizes.failed() {
                        debug!("the resize stream holds something else than terminal sizes: no longer read");
                        resize = None;
                    }
                }
                None => resize = None,
            },
            permit = reserve(&stdin), if pending.is_some() => match permit {
                Some(permit) => drop(permit.send(pending.take().unwrap_or_default())),
                None => (pending, stdin) = (None, None),
            },
            chunk = next(&mut from_client), if pending.is_none() => match chunk {
                // Without a pipe to the process (it takes no stdin), input goes nowhere.
                Some(chunk) => match stdin.as_ref().map(|tx| tx.try_send(chunk)) {
                    Some(Err(TrySendError::Full(chunk))) => pending = Some(chunk),
                    // The process closed its stdin (or ended): the rest goes nowhere.
                    Some(Err(TrySendError::Closed(_))) => stdin = None,
                    Some(Ok(())) | None => {}
                },
                None => {
                    debug!("the client closed stdin");
                    (from_client, stdin) = (None, None);
                }
            },
            ended = outputs.join_next(), if session.is_some() => {
                if ended.is_none() && let Some(session) = session.take() {
                    exit = Some(session.wait());
                }
            }
            ended = wait(&mut exit), if exit.is_some() => return Some(ended),
        }
    }
}

/// The next chunk of a stream, or never when there is none.
async fn next(stream: &mut Option<Box<dyn Inbound>>) -> Option<Bytes> {
    match stream {
        Some(stream) => stream.recv().await,
        None => std::future::pending().await,
    }
}

/// The process's exit, once it is awaited.
async fn wait<F: Future + Unpin>(exit: &mut Option<F>) -> F::Output {
    match exit {
        Some(exit) => exit.await,
        None => std::future::pending().await,
    }
}

/// Room for one chunk of stdin; `None` when the process no longer takes any. (It holds a
/// sender of its own, so the loop may drop `stdin` meanwhile.)
fn reserve(
    stdin: &Option<mpsc::Sender<Bytes>>,
) -> impl Future<Output = Option<mpsc::OwnedPermit<Bytes>>> + use<> {
    let stdin = stdin.clone();
    async move { stdin?.reserve_owned().await.ok() }
}

/// Applies the client's terminal sizes. (Not an `async fn`: the session's future must
/// not hold a `&dyn Process` across an await, which is not `Send`; only the resizes'
/// futures are held.)
fn resized(process: Option<&dyn Process>, sizes: Vec<TerminalSize>) -> BoxFuture<'_, ()> {
    use futures::FutureExt;
    let Some(process) = process else {
        if !sizes.is_empty() {
            debug!("a resize after the command's output ended is ignored");
        }
        return async {}.boxed();
    };
    let resizes: Vec<_> = sizes.into_iter().map(|s| process.resize(s.width, s.height)).collect();
    async move {
        for resize in resizes {
            if let Err(e) = resize.await {
                debug!(error = %describe(&e), "the terminal cannot be resized");
            }
        }
    }
    .boxed()
}

/// The client's stdin to the process; its end closes the process's input.
async fn pump_input(mut chunks: mpsc::Receiver<Bytes>, mut pipe: Input) {
    while let Some(chunk) = chunks.recv().await {
        if let Err(e) = pipe.write_all(&chunk).await {
            debug!(error = %e, "the process no longer reads its stdin");
            return;
        }
    }
    let _ = pipe.shutdown().await;
}

/// One output to the client, then its end. Output the client cannot take (it did not
/// open that stream, or reset it) is read and dropped, so that the process never blocks
/// on it.
async fn pump_output(mut output: Output, mut to: Option<Box<dyn Outbound>>) {
    let mut buffer = vec![0u8; OUTPUT_CHUNK];
    loop {
        let n = match output.read(&mut buffer).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                debug!(error = %e, "the process's output cannot be read");
                break;
            }
        };
        if let Some(stream) = &to
            && stream.send(&buffer[..n]).await.is_err()
        {
            to = None;
        }
    }
    if let Some(stream) = to {
        stream.finish().await;
    }
}
