//! What `/attach` attaches to: a running container's own output, as it is written.
//!
//! The output comes from the container's CRI log file, followed as the per-container
//! logger writes it and split by stream (stdout's records to the output channel,
//! stderr's to the error channel, a partial record's content without its newline). The
//! logger is the one reader of the container's stdio the shim allows; following its file
//! leaves it the only one, and an attach then sees exactly what `kubectl logs -f` sees,
//! from the moment of the attach on. The session ends when the container's task exits
//! (containerd's `Wait`), once the logger's last lines are read, with a `Success` status
//! as kubelet's attach ends; a client that goes away leaves the container running.
//! With a TTY, resizes go to the container's task.
//!
//! Input goes to the container's stdin FIFO, which the shim keeps open for a container
//! with `stdin: true` (`runtime::stdio`), so what an attach writes reaches the container
//! whichever attach or agent wrote before. With `stdinOnce`, the end of the first
//! attach's input closes the container's stdin for good (`Tasks.CloseIO`), as the API
//! documents; later attaches with input are refused with that reason. A request with
//! `input=1` to a container without stdin is a 400 that says so.

use std::io::{self, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use containerd_client::services::v1::{ResizePtyRequest, WaitRequest};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::io::{
    AsyncReadExt, AsyncSeekExt, AsyncWrite, AsyncWriteExt, ReadHalf, SimplexStream, WriteHalf,
};
use tokio::net::unix::pipe::Sender;
use tokio::task::JoinHandle;

use super::locate::{Found, Stdin};
use super::{Named, Refusal};
use crate::api::AppState;
use crate::api::streams::{Attached, Ended, Error, Input, Output, Process, Start, StreamOptions};
use crate::error_chain::describe;
use crate::runtime::Containerd;
use crate::runtime::container;
use crate::runtime::logs::{self, cri};
use crate::runtime::stdio;

/// How often the log file is read for new lines.
const POLL: Duration = Duration::from_millis(100);
/// After the container's exit, how long the follower reads on for the logger's last lines
/// (it reads on while lines keep coming).
const EXIT_DRAIN: Duration = Duration::from_millis(300);
/// The bytes of output buffered for the transport, per stream.
const PIPE: usize = 64 * 1024;

/// What attaches to the container `found`, with the streams of `options`.
pub(super) fn start(
    state: &AppState,
    named: &Named,
    found: &Found,
    options: StreamOptions,
) -> Result<Start, Refusal> {
    if options.stdin && found.stdin == Stdin::None {
        return Err(Refusal::bad_request(format!(
            "container {:?} of pod {}/{} has no stdin to attach to (its spec has no stdin: true); attach with output and error only (kubectl attach without -i)",
            named.container, named.namespace, named.pod
        )));
    }
    let runtime = crate::api::runtime::unavailable(state.runtime_slot.as_ref())
        .map_err(|(code, reason, message)| Refusal::new(code, reason, message))?;
    let target = Target {
        containerd: runtime.containerd.clone(),
        id: found.id.clone(),
        log_dir: logs::pod_log_dir(&state.pod_log_dir, &named.namespace, &named.pod, &found.uid)
            .join(&named.container),
        io_dir: runtime.io_dir.clone(),
        stdin: found.stdin,
    };
    Ok(Box::new(move || attach(target, options).boxed()))
}

/// The container an attach is to.
struct Target {
    containerd: Containerd,
    id: String,
    /// Its CRI log directory.
    log_dir: PathBuf,
    /// `<run-dir>/io`.
    io_dir: PathBuf,
    stdin: Stdin,
}

async fn attach(target: Target, options: StreamOptions) -> Result<Attached, Error> {
    let Target { containerd, id, log_dir: dir, io_dir, stdin } = target;
    let input = if options.stdin {
        let sender = stdio::open_stdin(&io_dir, &id)?;
        let once = (stdin == Stdin::Once).then(|| (containerd.clone(), id.clone()));
        Some(Box::pin(ContainerStdin { sender, once }) as Input)
    } else {
        None
    };
    let run = container::run_of(&containerd, &id).await?.ok_or_else(|| Error::Gone(id.clone()))?;
    let path = dir.join(logs::log_file_name(run));
    let mut file = tokio::fs::File::open(&path)
        .await
        .map_err(|source| Error::OpenLog { path: path.clone(), source })?;
    file.seek(SeekFrom::End(0))
        .await
        .map_err(|source| Error::ReadLog { path: path.clone(), source })?;
    let pipe = |wanted: bool| wanted.then(|| tokio::io::simplex(PIPE));
    let (stdout, stderr) = (pipe(options.stdout), pipe(options.stderr && !options.tty));
    let (stdout_reader, stdout_writer) = split(stdout);
    let (stderr_reader, stderr_writer) = split(stderr);
    let writers = Writers { stdout: stdout_writer, stderr: stderr_writer };
    let follower = Follower { containerd: containerd.clone(), id: id.clone(), path, writers };
    let follower = tokio::spawn(follower.run(file));
    Ok(Attached {
        stdin: input,
        stdout: stdout_reader,
        stderr: stderr_reader,
        process: Box::new(Attachment { containerd, id, follower: Some(follower) }),
    })
}

type Writer = WriteHalf<SimplexStream>;

/// A pipe's two ends: the transport's and the follower's.
fn split(pipe: Option<(ReadHalf<SimplexStream>, Writer)>) -> (Option<Output>, Option<Writer>) {
    match pipe {
        None => (None, None),
        Some((reader, writer)) => (Some(Box::pin(reader) as Output), Some(writer)),
    }
}

/// The follower's ends of the output pipes (`None`: not asked for, or its reader gone).
struct Writers {
    stdout: Option<Writer>,
    stderr: Option<Writer>,
}

/// Follows the log file until the container exits.
struct Follower {
    containerd: Containerd,
    id: String,
    path: PathBuf,
    writers: Writers,
}

impl Follower {
    /// Follows, then ends the output streams (a simplex pipe's reader sees its end at
    /// the writer's shutdown, not at its drop).
    async fn run(mut self, file: tokio::fs::File) {
        self.follow(file).await;
        for writer in
            [self.writers.stdout.as_mut(), self.writers.stderr.as_mut()].into_iter().flatten()
        {
            let _ = writer.shutdown().await;
        }
    }

    async fn follow(&mut self, mut file: tokio::fs::File) {
        let mut waiter = self.containerd.tasks();
        let request = WaitRequest { container_id: self.id.clone(), exec_id: String::new() };
        let mut exited = std::pin::pin!(waiter.wait(request));
        let mut exit_seen: Option<tokio::time::Instant> = None;
        let mut pending = Vec::new();
        loop {
            let read = match self.read(&mut file, &mut pending).await {
                Ok(read) => read,
                Err(e) => {
                    tracing::debug!(error = %e, "attach stops following the container's log");
                    return;
                }
            };
            if self.writers.stdout.is_none() && self.writers.stderr.is_none() {
                return;
            }
            if read == 0 {
                // A rotated file: the rest is in the new one.
                if rotated(&self.path, &file).await {
                    match tokio::fs::File::open(&self.path).await {
                        Ok(new) => file = new,
                        Err(_) => return,
                    }
                    continue;
                }
                if let Some(seen) = exit_seen
                    && seen.elapsed() >= EXIT_DRAIN
                {
                    tracing::debug!("the attached container exited");
                    return;
                }
            } else if let Some(seen) = exit_seen.as_mut() {
                *seen = tokio::time::Instant::now();
            }
            if exit_seen.is_some() {
                tokio::time::sleep(POLL).await;
                continue;
            }
            tokio::select! {
                waited = &mut exited => {
                    if let Err(e) = waited {
                        tracing::debug!(error = %e, "attach cannot wait for the container's exit");
                    }
                    exit_seen = Some(tokio::time::Instant::now());
                }
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Reads what is new in the file and writes its complete records out; the bytes read.
    async fn read(
        &mut self,
        file: &mut tokio::fs::File,
        pending: &mut Vec<u8>,
    ) -> Result<usize, Error> {
        let mut buffer = vec![0; 32 * 1024];
        let n = file
            .read(&mut buffer)
            .await
            .map_err(|source| Error::ReadLog { path: self.path.clone(), source })?;
        pending.extend_from_slice(&buffer[..n]);
        let Some(last) = pending.iter().rposition(|&b| b == b'\n') else { return Ok(n) };
        let complete: Vec<u8> = pending.drain(..=last).collect();
        for line in complete.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(record) = cri::decode(line) else { continue };
            let writer = match record.stream {
                cri::Stream::Stdout => &mut self.writers.stdout,
                cri::Stream::Stderr => &mut self.writers.stderr,
            };
            let Some(out) = writer else { continue };
            let mut content = record.content.to_vec();
            if record.tag == cri::Tag::Full {
                content.push(b'\n');
            }
            if out.write_all(&content).await.is_err() {
                *writer = None;
            }
        }
        Ok(n)
    }
}

/// An attach's input: the container's stdin FIFO. With `stdinOnce` (`once`), its drop,
/// the end of the client's input, closes the container's stdin.
struct ContainerStdin {
    sender: Sender,
    once: Option<(Containerd, String)>,
}

impl Drop for ContainerStdin {
    fn drop(&mut self) {
        let Some((containerd, id)) = self.once.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            match container::close_stdin(&containerd, &id).await {
                Ok(()) => tracing::debug!(container_id = id, "stdinOnce: the first attach ended, the container's stdin is closed"),
                Err(e) => tracing::warn!(container_id = id, error = %describe(&e), "stdinOnce: cannot close the container's stdin"),
            }
        });
    }
}

impl AsyncWrite for ContainerStdin {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.sender).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.sender).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.sender).poll_shutdown(cx)
    }
}

/// Whether `path` is now another file than `file` (the logger rotated it).
async fn rotated(path: &Path, file: &tokio::fs::File) -> bool {
    let (Ok(now), Ok(open)) = (tokio::fs::metadata(path).await, file.metadata().await) else {
        return false;
    };
    (now.dev(), now.ino()) != (open.dev(), open.ino())
}

/// An attach to a container: its output's follower. Dropped, it stops following; the
/// container runs on.
struct Attachment {
    containerd: Containerd,
    id: String,
    follower: Option<JoinHandle<()>>,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if let Some(follower) = self.follower.take() {
            follower.abort();
        }
    }
}

impl Process for Attachment {
    fn resize(&self, width: u16, height: u16) -> BoxFuture<'_, Result<(), Error>> {
        let request = ResizePtyRequest {
            container_id: self.id.clone(),
            exec_id: String::new(),
            width: width.into(),
            height: height.into(),
        };
        async move {
            self.containerd
                .tasks()
                .resize_pty(request)
                .await
                .map(drop)
                .map_err(|source| Error::Resize { id: self.id.clone(), source })
        }
        .boxed()
    }

    fn wait(mut self: Box<Self>) -> BoxFuture<'static, Ended> {
        let follower = self.follower.take();
        async move {
            if let Some(follower) = follower {
                let _ = follower.await;
            }
            // kubelet's attach ends with Success whatever the container's exit code.
            Ok(0)
        }
        .boxed()
    }
}
