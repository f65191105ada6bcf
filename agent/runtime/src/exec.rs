//! Running a process in a running container: containerd's task exec, with the process
//! spec of the container's init (user, cwd, env, capabilities, rlimits, AppArmor/SELinux
//! labels, noNewPrivileges) and other arguments, as containerd's own clients (`ctr task
//! exec`, the CRI plugin's `ExecSync`) do. Its stdio are FIFOs under the exec directory
//! (`<run-dir>/exec/<exec id>/`; the private module `fifo` says how they are opened).
//! Two uses: [`Execs::run`] for probes and hooks (output captured, bounded in size and
//! time) and [`Execs::start`] for `outpost exec` and kubelet's `/exec` (streams, a TTY and
//! its size). [`Execs::run`] has runc run the command itself where the runc shim runs
//! runc (module `runc`): one child process instead of four containerd calls.
//!
//! Every exec process is deleted from containerd and its FIFOs removed once it is done,
//! also when it fails, times out, or the future running it is dropped (module `process`).
//!
//! A command's children that outlive it stay in the container, as with kubelet and the
//! CRI: containerd signals the exec process alone.

mod fifo;
mod process;
mod runc;
mod specs;

use std::path::{Path, PathBuf};
use std::pin::pin;
use std::time::Duration;

use containerd_client::services::v1::{
    CloseIoRequest, ExecProcessRequest, GetContainerRequest, ResizePtyRequest, StartRequest,
    WaitRequest, WaitResponse,
};
use containerd_client::types::v1::Status;
use outpost_core::pod_worker::exit_code;
use serde::Deserialize;
use tokio::net::unix::pipe::Receiver;
use tokio::time::Instant;

use self::fifo::{Collected, Output};
use self::process::Process;
use self::runc::{Ran, Runc};
use self::specs::{Kept, Specs};
use super::Containerd;
use super::container;

/// How much of a probe's or hook's output is kept (kubelet keeps 10 KiB).
pub const MAX_OUTPUT: usize = 10 * 1024;

/// After a command exited, how long its output may take to end (the shim copies the last
/// bytes; a child the command left running may hold it open for ever).
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// The type URL containerd's clients give an OCI process spec.
const PROCESS_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Process";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("container {id}: {step}")]
    Containerd {
        id: String,
        step: &'static str,
        #[source]
        source: tonic::Status,
    },
    #[error("container {id}: the command did not finish within {timeout:?}")]
    TimedOut { id: String, timeout: Duration },
    #[error("container {id}: {step}")]
    Io {
        id: String,
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// runc itself failed to run the command (run directly, module `runc`).
    #[error("container {id}: runc exec failed: {message}")]
    Runc { id: String, message: String },
    #[error("container {id}: cannot read its OCI runtime spec")]
    Spec {
        id: String,
        #[source]
        source: serde_json::Error,
    },
    /// The container does not exist, or its task is not running (stopped, paused, never
    /// started, deleted).
    #[error(
        "container {id}: {state}: a command can only run in a running container (wait for it \
         to run again)"
    )]
    NotRunning { id: String, state: &'static str },
    #[error(
        "container {id}: cannot make or open the exec FIFO {}: is the run directory writable by the agent?",
        path.display()
    )]
    Fifo {
        id: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What a finished command left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i32,
    /// stdout and stderr as they came (interleaved), the first [`MAX_OUTPUT`] bytes.
    pub output: Vec<u8>,
}

/// An interactive command: which streams, and whether it gets a TTY (stderr then goes
/// to the TTY too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// Runs processes in the containers of one containerd namespace.
#[derive(Debug, Clone)]
pub struct Execs {
    containerd: Containerd,
    /// Where each exec's FIFOs go (`<run-dir>/exec/<exec id>/`).
    dir: PathBuf,
    /// The containers' init processes, read once each (module `specs`).
    specs: Specs,
    /// runc on `PATH`, which the runc shim runs unless told another binary.
    runc: Option<PathBuf>,
}

/// The stdio paths of an exec (empty: none).
struct Stdio<'a> {
    stdin: &'a str,
    stdout: &'a str,
    stderr: &'a str,
    terminal: bool,
}

impl Execs {
    pub fn new(containerd: Containerd, dir: PathBuf) -> Execs {
        Execs { containerd, dir, specs: Specs::default(), runc: outpost_host::on_path("runc") }
    }

    /// Drops what is kept of container `id` (its init's process): it was removed.
    pub fn forget(&self, id: &str) {
        self.specs.forget(id);
    }

    /// Runs `command` in container `id` to its end; past `timeout` it is killed and
    /// [`Error::TimedOut`] returned. stdout and stderr share one pipe: their output
    /// interleaves as runc or the shim copies it (each has its own pipe from the process,
    /// so lines written close together may swap). A container of the runc shim running
    /// runc has its command run by runc directly (module `runc`), any other through
    /// containerd.
    pub async fn run(
        &self,
        id: &str,
        command: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, Error> {
        let began = Instant::now();
        let kept = self.kept(id).await?;
        if let Some(runc) = kept.runc.as_ref().filter(|runc| runc.knows(id)) {
            let result = self.run_by_runc(runc, id, &kept, command, began + timeout, timeout).await;
            tracing::debug!(
                container_id = id,
                elapsed = ?began.elapsed(),
                exit_code = result.as_ref().ok().map(|o| o.exit_code),
                "exec ran (runc)"
            );
            return result;
        }
        let mut process = self.process(id);
        let result = self.run_in(&mut process, command, began + timeout, timeout).await;
        let exec_id = process.exec_id.clone();
        // A process that did not exit (failed, timed out) may still run: killed first.
        if let Err(e) = process.remove(result.is_err()).await {
            tracing::warn!(container_id = id, exec_id, error = %outpost_core::error_chain::describe(&e), "cannot remove the exec process");
        }
        tracing::debug!(
            container_id = id,
            exec_id,
            elapsed = ?began.elapsed(),
            exit_code = result.as_ref().ok().map(|o| o.exit_code),
            "exec ran"
        );
        result
    }

    async fn run_by_runc(
        &self,
        runc: &Runc,
        id: &str,
        kept: &Kept,
        command: &[String],
        deadline: Instant,
        timeout: Duration,
    ) -> Result<ExecOutput, Error> {
        let spec = exec_process(kept.process.clone(), command, false)
            .map_err(|source| Error::Spec { id: id.to_owned(), source })?;
        let (_, dir) = self.new_exec();
        match runc.run(id, &spec, &dir, deadline, timeout).await? {
            Ran::Exited(output) => Ok(output),
            Ran::RuncFailed(message) => Err(match self.not_running(id).await {
                Some(state) => Error::NotRunning { id: id.to_owned(), state },
                None => Error::Runc { id: id.to_owned(), message },
            }),
        }
    }

    async fn run_in(
        &self,
        process: &mut Process,
        command: &[String],
        deadline: Instant,
        timeout: Duration,
    ) -> Result<ExecOutput, Error> {
        let id = process.id.clone();
        let mut collected = Collected::default();
        let mut receiver = None;
        let exited = tokio::time::timeout_at(
            deadline,
            self.start_and_wait(process, command, &mut receiver, &mut collected),
        )
        .await
        .map_err(|_| Error::TimedOut { id: id.clone(), timeout })??;
        let status = match exited {
            Exited::WithOutput(status) => status,
            Exited::Before(status) => {
                // The exit came first; the output's end (the shim's copying) follows at once
                // unless a child of the command still holds it.
                if let Some(receiver) = receiver.as_mut() {
                    let drained = tokio::time::timeout(
                        DRAIN_GRACE,
                        collected.read_to_end(receiver, MAX_OUTPUT),
                    )
                    .await;
                    match drained {
                        Ok(read) => read.map_err(|source| read_failed(&id, source))?,
                        Err(_) => tracing::debug!(
                            container_id = id,
                            "the command exited but its output stays open (a child of it \
                             holds it): keeping what arrived"
                        ),
                    }
                }
                status
            }
        };
        if collected.total > MAX_OUTPUT as u64 {
            tracing::debug!(
                container_id = id,
                bytes = collected.total,
                kept = MAX_OUTPUT,
                "exec output cut"
            );
        }
        Ok(ExecOutput { exit_code: exit_code(status.exit_status), output: collected.bytes })
    }

    /// Creates and starts the exec process, then reads its output until the exit (its
    /// `Wait` in flight while it starts).
    async fn start_and_wait(
        &self,
        process: &mut Process,
        command: &[String],
        receiver: &mut Option<Receiver>,
        collected: &mut Collected,
    ) -> Result<Exited, Error> {
        let id = process.id.clone();
        let spec = self.process_spec(&id, command, false).await?;
        fifo::make_dir(&process.dir).map_err(|source| fifo_failed(&id, &process.dir, source))?;
        let path = process.dir.join("output");
        let output =
            Output::make(path.clone()).map_err(|source| fifo_failed(&id, &path, source))?;
        let fifo = utf8(&id, output.path())?;
        let stdio = Stdio { stdin: "", stdout: fifo, stderr: fifo, terminal: false };
        self.exec(process, spec, &stdio).await?;

        let mut waiter = self.containerd.tasks();
        let mut waiting = pin!(waiter.wait(wait_request(process)));
        let mut tasks = self.containerd.tasks();
        let mut starting = pin!(tasks.start(start_request(process)));
        let mut exit = None;
        let started = loop {
            tokio::select! {
                started = &mut starting => break started,
                waited = &mut waiting, if exit.is_none() => exit = Some(waited),
            }
        };
        if let Err(source) = started {
            return Err(self.failed(&id, "starting the command (runc exec)", source).await);
        }
        let receiver =
            receiver.insert(output.connected().map_err(|source| read_failed(&id, source))?);
        let waited = |waited: Result<tonic::Response<WaitResponse>, tonic::Status>| {
            waited.map(tonic::Response::into_inner).map_err(|source| Error::Containerd {
                id: id.clone(),
                step: "waiting for the command to exit",
                source,
            })
        };
        if let Some(exit) = exit {
            return Ok(Exited::Before(waited(exit)?));
        }
        tokio::select! {
            exit = &mut waiting => Ok(Exited::Before(waited(exit)?)),
            read = collected.read_to_end(receiver, MAX_OUTPUT) => {
                read.map_err(|source| read_failed(&id, source))?;
                Ok(Exited::WithOutput(waited(waiting.await)?))
            }
        }
    }

    /// Starts `request` in container `id`; the session's streams are open.
    pub async fn start(&self, id: &str, request: &Request) -> Result<Session, Error> {
        let mut process = self.process(id);
        match self.start_in(&mut process, request).await {
            Ok(streams) => Ok(Session {
                stdin: streams.stdin,
                stdout: streams.stdout,
                stderr: streams.stderr,
                process,
            }),
            Err(e) => {
                if let Err(removal) = process.remove(true).await {
                    tracing::warn!(container_id = id, error = %outpost_core::error_chain::describe(&removal), "cannot remove the exec process");
                }
                Err(e)
            }
        }
    }

    async fn start_in(&self, process: &mut Process, request: &Request) -> Result<Streams, Error> {
        let id = process.id.clone();
        let spec = self.process_spec(&id, &request.command, request.tty).await?;
        let dir = process.dir.clone();
        fifo::make_dir(&dir).map_err(|source| fifo_failed(&id, &dir, source))?;
        let output = |name: &str| {
            let path = dir.join(name);
            Output::make(path.clone()).map_err(|source| fifo_failed(&id, &path, source))
        };
        let stdin_path = dir.join("stdin");
        let stdin = if request.stdin {
            let file =
                fifo::input(&stdin_path).map_err(|source| fifo_failed(&id, &stdin_path, source))?;
            Some(file)
        } else {
            None
        };
        // The shim wants stdout (and stderr, without a TTY) even when nobody reads them:
        // those are read and dropped.
        let stdout = output("stdout")?;
        let stderr = if request.tty { None } else { Some(output("stderr")?) };
        let stdio = Stdio {
            stdin: if stdin.is_some() { utf8(&id, &stdin_path)? } else { "" },
            stdout: utf8(&id, stdout.path())?,
            stderr: match &stderr {
                Some(stderr) => utf8(&id, stderr.path())?,
                None => "",
            },
            terminal: request.tty,
        };
        self.exec(process, spec, &stdio).await?;
        if let Err(source) = self.containerd.tasks().start(start_request(process)).await {
            return Err(self.failed(&id, "starting the command (runc exec)", source).await);
        }
        if stdin.is_some() {
            // The shim holds a writer of its own on stdin (for clients that come back);
            // closed now, the agent's is the last one, and dropping it is the process's EOF.
            let request = CloseIoRequest {
                container_id: id.clone(),
                exec_id: process.exec_id.clone(),
                stdin: true,
            };
            self.containerd.tasks().close_io(request).await.map_err(|source| {
                Error::Containerd {
                    id: id.clone(),
                    step: "closing the shim's end of stdin",
                    source,
                }
            })?;
        }
        let stream = |output: Output, wanted: bool| -> Result<Option<Receiver>, Error> {
            let receiver = output.connected().map_err(|source| read_failed(&id, source))?;
            if wanted {
                return Ok(Some(receiver));
            }
            tokio::spawn(fifo::discard(receiver));
            Ok(None)
        };
        let stdout = stream(stdout, request.stdout)?;
        let stderr = match stderr {
            Some(stderr) => stream(stderr, request.stderr)?,
            None => None,
        };
        let stdin = match stdin {
            Some(file) => Some(fifo::sender(file).map_err(|source| Error::Io {
                id: id.clone(),
                step: "opening the command's stdin",
                source,
            })?),
            None => None,
        };
        Ok(Streams { stdin, stdout, stderr })
    }

    /// A new exec process of container `id` (nothing made yet).
    fn process(&self, id: &str) -> Process {
        let (exec_id, dir) = self.new_exec();
        Process::new(&self.containerd, id, exec_id, dir)
    }

    /// A new exec's ID and its directory (under the exec directory, not made yet).
    fn new_exec(&self) -> (String, PathBuf) {
        let exec_id = format!("exec-{:016x}", fastrand::u64(..));
        let dir = self.dir.join(&exec_id);
        (exec_id, dir)
    }

    /// The container's process spec with `command` as its arguments.
    async fn process_spec(
        &self,
        id: &str,
        command: &[String],
        tty: bool,
    ) -> Result<prost_types::Any, Error> {
        let kept = self.kept(id).await?;
        let value = exec_process(kept.process.clone(), command, tty)
            .map_err(|source| Error::Spec { id: id.to_owned(), source })?;
        Ok(prost_types::Any { type_url: PROCESS_TYPE_URL.to_owned(), value })
    }

    /// What is kept of container `id`, read from its record the first time.
    async fn kept(&self, id: &str) -> Result<std::sync::Arc<Kept>, Error> {
        match self.specs.get(id) {
            Some(kept) => Ok(kept),
            None => Ok(self.specs.keep(id, self.read_container(id).await?)),
        }
    }

    /// Container `id`'s init process, from its record's OCI spec, and how runc runs its
    /// commands directly, from its record's runtime.
    async fn read_container(&self, id: &str) -> Result<Kept, Error> {
        let request = GetContainerRequest { id: id.to_owned() };
        let container = match self.containerd.containers().get(request).await {
            Ok(response) => response.into_inner().container,
            Err(s) if s.code() == tonic::Code::NotFound => {
                return Err(Error::NotRunning { id: id.to_owned(), state: "no such container" });
            }
            Err(source) => {
                return Err(Error::Containerd {
                    id: id.to_owned(),
                    step: "reading the container record (for its process spec)",
                    source,
                });
            }
        };
        let container = container.unwrap_or_default();
        let runc = container.runtime.as_ref().and_then(|runtime| {
            Runc::of(runtime, self.containerd.namespace(), self.runc.as_deref())
        });
        let spec = container.spec.map(|any| any.value).unwrap_or_default();
        let process =
            init_process(&spec).map_err(|source| Error::Spec { id: id.to_owned(), source })?;
        Ok(Kept { process, runc })
    }

    /// `Tasks.Exec`: containerd (its shim) records the process; nothing runs yet.
    async fn exec(
        &self,
        process: &mut Process,
        spec: prost_types::Any,
        stdio: &Stdio<'_>,
    ) -> Result<(), Error> {
        let request = ExecProcessRequest {
            container_id: process.id.clone(),
            stdin: stdio.stdin.to_owned(),
            stdout: stdio.stdout.to_owned(),
            stderr: stdio.stderr.to_owned(),
            terminal: stdio.terminal,
            spec: Some(spec),
            exec_id: process.exec_id.clone(),
        };
        process.creating();
        if let Err(source) = self.containerd.tasks().exec(request).await {
            process.not_created();
            return Err(self.failed(&process.id, "creating the exec process", source).await);
        }
        Ok(())
    }

    /// The error for a failed `step`: [`Error::NotRunning`] when the container's task is
    /// why (containerd answers NotFound, or "cannot exec in a stopped state").
    async fn failed(&self, id: &str, step: &'static str, source: tonic::Status) -> Error {
        match self.not_running(id).await {
            Some(state) => Error::NotRunning { id: id.to_owned(), state },
            None => Error::Containerd { id: id.to_owned(), step, source },
        }
    }

    /// Why container `id` runs nothing, if its task says so.
    async fn not_running(&self, id: &str) -> Option<&'static str> {
        match container::task(&self.containerd, id).await {
            Ok(None) => Some("it has no task (not started, or exited and removed)"),
            Ok(Some(task)) => match task.status() {
                Status::Stopped => Some("its task has exited"),
                Status::Created => Some("its task is created but not started"),
                Status::Paused | Status::Pausing => Some("its task is paused"),
                Status::Running | Status::Unknown => None,
            },
            Err(_) => None,
        }
    }
}

/// How [`Execs::start_and_wait`] ended: the output ended first (all of it arrived), or
/// the exit came first (the output's end may follow).
enum Exited {
    WithOutput(WaitResponse),
    Before(WaitResponse),
}

/// The streams of a started session.
struct Streams {
    stdin: Option<tokio::net::unix::pipe::Sender>,
    stdout: Option<Receiver>,
    stderr: Option<Receiver>,
}

/// A started interactive command. Its streams are `None` unless asked for.
///
/// Dropped without [`Session::wait`], the command is killed and removed (in a task of its
/// own).
#[derive(Debug)]
pub struct Session {
    /// Dropping it is the command's end of input (EOF). A write after the command ended
    /// does not fail: once the FIFO is full it waits for ever, so stop writing when the
    /// command has ended (its output's end, [`Session::wait`]).
    pub stdin: Option<tokio::net::unix::pipe::Sender>,
    pub stdout: Option<tokio::net::unix::pipe::Receiver>,
    /// `None` with a TTY.
    pub stderr: Option<tokio::net::unix::pipe::Receiver>,
    process: Process,
}

impl Session {
    /// The exec process's ID in containerd (`ctr task ps` shows it).
    pub fn exec_id(&self) -> &str {
        &self.process.exec_id
    }

    /// Sets the TTY's size (nothing without a TTY).
    pub async fn resize(&self, width: u16, height: u16) -> Result<(), Error> {
        let request = ResizePtyRequest {
            container_id: self.process.id.clone(),
            exec_id: self.process.exec_id.clone(),
            width: width.into(),
            height: height.into(),
        };
        self.process.containerd.tasks().resize_pty(request).await.map_err(|source| {
            Error::Containerd { id: self.process.id.clone(), step: "resizing the TTY", source }
        })?;
        Ok(())
    }

    /// Waits for the command's end (closing stdin first is the caller's: drop it);
    /// its exit code. Removes the process from containerd and its FIFOs. Streams still in
    /// the session are closed (stdin) or read to their end and dropped (stdout, stderr).
    pub async fn wait(self) -> Result<i32, Error> {
        let Session { stdin, stdout, stderr, process } = self;
        drop(stdin);
        for output in [stdout, stderr].into_iter().flatten() {
            tokio::spawn(fifo::discard(output));
        }
        let waited = process.containerd.tasks().wait(wait_request(&process)).await;
        let id = process.id.clone();
        let exec_id = process.exec_id.clone();
        let (result, kill) = match waited {
            Ok(response) => (Ok(exit_code(response.into_inner().exit_status)), false),
            Err(source) => (
                Err(Error::Containerd {
                    id: id.clone(),
                    step: "waiting for the command to exit",
                    source,
                }),
                true,
            ),
        };
        if let Err(e) = process.remove(kill).await {
            tracing::warn!(container_id = id, exec_id, error = %outpost_core::error_chain::describe(&e), "cannot remove the exec process");
        }
        result
    }
}

/// The process part of the container's OCI spec (`spec`, JSON) with `command` as its
/// arguments and a TTY or not: everything else (user, cwd, env, capabilities, rlimits,
/// AppArmor profile, SELinux label, noNewPrivileges, OOM score) is the container's.
/// The `process` of an OCI runtime spec (the rest of the spec is skipped).
fn init_process(spec: &[u8]) -> Result<oci_spec::runtime::Process, serde_json::Error> {
    #[derive(Deserialize)]
    struct Spec {
        process: Option<oci_spec::runtime::Process>,
    }
    let spec: Spec = serde_json::from_slice(spec)?;
    spec.process
        .ok_or_else(|| <serde_json::Error as serde::de::Error>::custom("the spec has no process"))
}

/// The container's init `process` with `command` as its arguments, as JSON.
fn exec_process(
    mut process: oci_spec::runtime::Process,
    command: &[String],
    tty: bool,
) -> Result<Vec<u8>, serde_json::Error> {
    process.set_args(Some(command.to_vec()));
    process.set_terminal(Some(tty));
    process.set_console_size(None);
    if tty {
        // As the CRI plugin does: a TTY without TERM is a dumb one to most programs.
        let env = process.env_mut().get_or_insert_with(Vec::new);
        if !env.iter().any(|e| e.starts_with("TERM=")) {
            env.push("TERM=xterm".to_owned());
        }
    }
    serde_json::to_vec(&process)
}

fn start_request(process: &Process) -> StartRequest {
    StartRequest { container_id: process.id.clone(), exec_id: process.exec_id.clone() }
}

fn wait_request(process: &Process) -> WaitRequest {
    WaitRequest { container_id: process.id.clone(), exec_id: process.exec_id.clone() }
}

fn fifo_failed(id: &str, path: &Path, source: std::io::Error) -> Error {
    Error::Fifo { id: id.to_owned(), path: path.to_owned(), source }
}

fn read_failed(id: &str, source: std::io::Error) -> Error {
    Error::Io { id: id.to_owned(), step: "reading the command's output", source }
}

/// containerd takes FIFO paths as strings.
fn utf8<'a>(id: &str, path: &'a Path) -> Result<&'a str, Error> {
    path.to_str().ok_or_else(|| {
        fifo_failed(
            id,
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path is not UTF-8"),
        )
    })
}

#[cfg(test)]
mod tests;
