//! `outpost exec NAMESPACE/POD [-c C] [-i] [-t] -- COMMAND...`: runs a command in a running
//! container through the agent's local API, as `kubectl exec` does: kubelet's `/exec`
//! over a WebSocket (`v5.channel.k8s.io`), with the operator client's server and
//! credentials ([`super::client`]). The container defaults to the pod's
//! `kubectl.kubernetes.io/default-container` annotation, else its first container. `-i`
//! sends stdin and closes the remote stdin at end of file; `-t` asks for a terminal,
//! puts the local one in raw mode (restored on every way out) and sends its size at the
//! start and on each SIGWINCH. The process exits with the command's exit code.
//!
//! - `connect`: the TCP/TLS connection and the WebSocket upgrade.
//! - `terminal`: raw mode and the window size.

pub(super) mod connect;
pub(super) mod terminal;

use std::io::{self, Read, Write};
use std::process::ExitCode;

use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{self, Message};

use self::connect::Socket;
use super::client::{self, Client, split_pod};
use crate::api::exec::channel;
use crate::api::streams::status::Status;
use crate::cli::ExecArgs;

/// The annotation `kubectl exec` (and `logs`, `attach`) take the default container from.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";
/// The most stdin read at once into one message.
const STDIN_CHUNK: usize = 32 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("{0}: not a URL a WebSocket can be opened to")]
    Url(String),
    #[error("cannot open the exec stream to {url}")]
    Upgrade {
        url: String,
        #[source]
        source: Box<tungstenite::Error>,
    },
    #[error("pod {pod} has no containers")]
    NoContainers { pod: String },
    #[error("the connection to the agent broke while the command ran")]
    Connection(#[source] tungstenite::Error),
    #[error(
        "the connection to the agent ended before the command's exit status came; the command may still be running"
    )]
    NoStatus,
    /// The command could not be run: the agent's message.
    #[error(transparent)]
    Failed(crate::api::streams::status::Failed),
    #[error("the agent's exit status is not a metav1.Status")]
    BadStatus(#[source] serde_json::Error),
    #[error("cannot put the terminal in raw mode")]
    Terminal(#[source] io::Error),
    #[error("cannot read stdin")]
    Stdin(#[source] io::Error),
    #[error("cannot write the command's output")]
    Output(#[source] io::Error),
    #[error("cannot watch for signals")]
    Signal(#[source] io::Error),
    #[error("stopped by {0}; the command may still be running")]
    Stopped(&'static str),
}

/// Runs `outpost exec`; the command's exit code is the process's.
pub fn exec(args: &ExecArgs) -> Result<ExitCode, Error> {
    let client = Client::new(&args.client)?;
    let tty = tty_if_terminal(args.tty);
    let code = client::runtime()?.block_on(run(&client, args, tty))?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX)))
}

/// Whether a terminal asked for (`-t`) can be had: stdin must be one (said when not).
pub(super) fn tty_if_terminal(asked: bool) -> bool {
    let tty = asked && terminal::stdin_is_terminal();
    if asked && !tty {
        eprintln!("outpost: unable to use a TTY: stdin is not a terminal; running without one");
    }
    tty
}

async fn run(client: &Client, args: &ExecArgs, tty: bool) -> Result<i32, Error> {
    let (namespace, name) = split_pod(&args.pod);
    let container = match &args.container {
        Some(container) => container.clone(),
        None => {
            let pod: Pod = client.get_json(client.url(&["pods", namespace, name], &[])).await?;
            let shown = format!("{namespace}/{name}");
            let (container, others) = default_container(&pod)
                .ok_or_else(|| Error::NoContainers { pod: shown.clone() })?;
            if let Some(all) = others {
                eprintln!("Defaulted container {container:?} out of: {}", all.join(", "));
            }
            container
        }
    };
    let url = client.url(&["exec", namespace, name, &container], &query(args, tty));
    let socket = connect::connect(client, &url).await?;
    // Raw only once connected, so that errors until then print as usual.
    let _raw = match tty && args.stdin {
        true => Some(terminal::RawMode::enter().map_err(Error::Terminal)?),
        false => None,
    };
    stream(socket, args.stdin, tty).await
}

/// kubelet's query parameters for `args`: the command, one `command` per argument, and
/// the streams by kubelet's names (`output`, `error`, `input`, `tty`), each `1` when asked
/// for and left out otherwise, as the API server passes them on (stderr goes to the
/// terminal with a TTY).
pub fn query(args: &ExecArgs, tty: bool) -> Vec<(&'static str, String)> {
    let mut query: Vec<(&str, String)> =
        args.command.iter().map(|arg| ("command", arg.clone())).collect();
    let streams = [("output", true), ("error", !tty), ("input", args.stdin), ("tty", tty)];
    query.extend(streams.into_iter().filter(|(_, on)| *on).map(|(name, _)| (name, "1".into())));
    query
}

/// The container `kubectl exec` picks: the annotated default if the pod has it, else the
/// first; with the names of all of them when there are several to choose from (and no
/// annotation chose).
pub fn default_container(pod: &Pod) -> Option<(String, Option<Vec<String>>)> {
    let names: Vec<String> =
        pod.spec.iter().flat_map(|s| &s.containers).map(|c| c.name.clone()).collect();
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CONTAINER_ANNOTATION))
        .filter(|name| names.contains(name));
    match (annotated, names.first()) {
        (Some(name), _) => Some((name.clone(), None)),
        (None, Some(first)) => Some((first.clone(), (names.len() > 1).then(|| names.clone()))),
        (None, None) => None,
    }
}

/// Streams until the agent closes: stdout and stderr to ours, stdin (with `-i`) and the
/// window's size (with `-t`) to the command; the exit code from the error channel.
pub(super) async fn stream(socket: Socket, stdin: bool, tty: bool) -> Result<i32, Error> {
    let (mut sink, mut source) = socket.split();
    let mut input = if stdin { Some(read_stdin()?) } else { None };
    let mut window = if tty { Some(watch(SignalKind::window_change())?) } else { None };
    // Ours to handle while the terminal is raw, so that it is restored.
    let mut terminate = watch(SignalKind::terminate())?;
    let mut hangup = watch(SignalKind::hangup())?;
    let mut connected = true;
    if tty && let Some(size) = terminal::size() {
        connected = sink.send(Message::Binary(channel::resize(size).into())).await.is_ok();
    }
    let mut status = Vec::new();
    loop {
        tokio::select! {
            message = source.next() => match message {
                None | Some(Ok(Message::Close(_))) => break,
                Some(Err(e)) if status.is_empty() => return Err(Error::Connection(e)),
                Some(Err(_)) => break,
                Some(Ok(Message::Binary(data))) => match data.split_first() {
                    Some((&channel::STDOUT, bytes)) => write(&mut io::stdout(), bytes)?,
                    Some((&channel::STDERR, bytes)) => write(&mut io::stderr(), bytes)?,
                    Some((&channel::ERROR, bytes)) => status.extend_from_slice(bytes),
                    _ => {}
                },
                Some(Ok(_)) => {}
            },
            chunk = next(&mut input), if input.is_some() && connected => {
                let message = match chunk {
                    Some(bytes) => channel::frame(channel::STDIN, &bytes),
                    None => {
                        input = None;
                        vec![channel::CLOSE, channel::STDIN]
                    }
                };
                // A failed send means the agent closed: the reads say how it ended.
                connected = sink.send(Message::Binary(message.into())).await.is_ok();
            },
            _ = next_signal(&mut window), if window.is_some() && connected => {
                if let Some(size) = terminal::size() {
                    connected = sink.send(Message::Binary(channel::resize(size).into())).await.is_ok();
                }
            },
            _ = terminate.recv() => return Err(Error::Stopped("SIGTERM")),
            _ = hangup.recv() => return Err(Error::Stopped("SIGHUP")),
        }
    }
    if status.is_empty() {
        return Err(Error::NoStatus);
    }
    let status: Status = serde_json::from_slice(&status).map_err(Error::BadStatus)?;
    status.exit_code().map_err(Error::Failed)
}

fn write(out: &mut impl Write, bytes: &[u8]) -> Result<(), Error> {
    out.write_all(bytes).and_then(|()| out.flush()).map_err(Error::Output)
}

fn watch(kind: SignalKind) -> Result<Signal, Error> {
    signal(kind).map_err(Error::Signal)
}

/// The next chunk of stdin (`None`: end of file); pending forever without stdin.
async fn next(input: &mut Option<mpsc::Receiver<Vec<u8>>>) -> Option<Vec<u8>> {
    match input {
        Some(chunks) => chunks.recv().await,
        None => std::future::pending().await,
    }
}

async fn next_signal(signal: &mut Option<Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Reads stdin on a thread of its own (a blocking read, as a terminal needs), in chunks;
/// the channel closes at end of file. The thread ends with the process.
fn read_stdin() -> Result<mpsc::Receiver<Vec<u8>>, Error> {
    let (tx, rx) = mpsc::channel(4);
    std::thread::Builder::new()
        .name("exec-stdin".into())
        .spawn(move || {
            let mut stdin = io::stdin().lock();
            let mut buffer = vec![0; STDIN_CHUNK];
            loop {
                match stdin.read(&mut buffer) {
                    Ok(0) => return,
                    Ok(n) => {
                        if tx.blocking_send(buffer[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        })
        .map_err(Error::Stdin)?;
    Ok(rx)
}

#[cfg(test)]
mod tests;
