//! Probes' and hooks' commands run by runc itself, beside containerd (B8, issue 53).
//!
//! Through containerd an exec is four round trips (`Exec`, `Start`, `Wait`, `Delete`),
//! each driving the shim and each reply waking the agent. For a container of the runc
//! shim that runs runc itself, the agent runs what the shim would: `runc exec` with the
//! exec's process spec, against the runc state the shim keeps (`--root`, by default
//! `/run/containerd/runc/<namespace>`). runc joins the container's namespaces and
//! cgroup and applies its seccomp filter, and the process spec gives the rest (user,
//! capabilities, AppArmor profile, SELinux label, noNewPrivileges, rlimits, env, cwd),
//! exactly as with the shim. The agent then waits for one child: runc exits with the
//! command's exit code (128 + the signal for a killed one) once the command and its output
//! ended, and the output comes through one pipe.
//!
//! runc's own failures (no such command, the container stopped meanwhile) are told from
//! the command's exit code by runc's log (`--log`, JSON): an `error` entry there is
//! runc's. Past the timeout the command is killed by the PID runc wrote (`--pid-file`),
//! as the shim kills it; a dropped run kills it the same way.
//!
//! containerd does not see these processes: `ctr task ps` lists them (they are in the
//! container's cgroup) but containerd's exec list does not. Any other runtime (another
//! shim, or the runc shim running crun or another OCI runtime) goes through containerd.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use containerd_client::services::v1::container::Runtime;
use serde::Deserialize;
use tokio::net::unix::pipe::Receiver;
use tokio::time::Instant;

use super::fifo::{self, Collected};
use super::{Error, ExecOutput, MAX_OUTPUT};
use crate::handler::RuncOptions;

/// Where the runc shim keeps runc's state when its options give no `Root` (containerd's
/// `process.RuncRoot`); the namespace is added to it, as the shim does.
const SHIM_RUNC_ROOT: &str = "/run/containerd/runc";

/// How long a command may run before its output is read as it comes rather than at its
/// end (a pipe holds 64 KiB; a command writing more waits until it is read).
const READ_AFTER: Duration = Duration::from_millis(100);

/// How long runc may take to end once the command was killed, before it is killed too.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// How to run a container's commands with runc directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Runc {
    binary: PathBuf,
    /// runc's state directory of the container's namespace (`--root`).
    root: PathBuf,
    systemd_cgroup: bool,
}

impl Runc {
    /// How the runc shim runs runc for a container whose record says `runtime`, in
    /// containerd namespace `namespace`; `None` unless the shim is runc's and runs runc
    /// (`runc` is where runc is, from `PATH`).
    pub(super) fn of(runtime: &Runtime, namespace: &str, runc: Option<&Path>) -> Option<Runc> {
        let options = RuncOptions::of(runtime)?;
        let binary = match options.binary_name.as_str() {
            "" => runc?.to_owned(),
            name if Path::new(name).file_name().is_some_and(|n| n == "runc") => PathBuf::from(name),
            _ => return None,
        };
        let root = if options.root.is_empty() { SHIM_RUNC_ROOT } else { &options.root };
        Some(Runc {
            binary,
            root: Path::new(root).join(namespace),
            systemd_cgroup: options.systemd_cgroup,
        })
    }

    /// Whether runc has container `id`'s state (the shim created its task and did not
    /// delete it yet); otherwise containerd says why nothing runs.
    pub(super) fn knows(&self, id: &str) -> bool {
        self.root.join(id).join("state.json").is_file()
    }

    /// Runs `process` (the exec's process spec, JSON) in container `id`, its files in
    /// `dir` (made here, removed at the end also when the future is dropped); killed past
    /// `deadline`.
    pub(super) async fn run(
        &self,
        id: &str,
        process: &[u8],
        dir: &Path,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Ran, Error> {
        let io = |step: &'static str| move |source| Error::Io { id: id.to_owned(), step, source };
        fifo::make_dir(dir).map_err(|source| Error::Fifo {
            id: id.to_owned(),
            path: dir.to_owned(),
            source,
        })?;
        let mut guard = Guard { dir: dir.to_owned(), command_may_run: true };
        let spec = dir.join("process.json");
        std::fs::write(&spec, process).map_err(io("writing the exec's process spec"))?;
        let (reader, writer) = output_pipe().map_err(io("making the output pipe"))?;
        let mut command = tokio::process::Command::new(&self.binary);
        command.arg("--root").arg(&self.root);
        command.arg("--log").arg(dir.join("log")).args(["--log-format", "json"]);
        if self.systemd_cgroup {
            command.arg("--systemd-cgroup");
        }
        command.arg("exec").arg("--process").arg(&spec);
        command.arg("--pid-file").arg(dir.join("pid")).arg(id);
        let stderr = writer.try_clone().map_err(io("making the output pipe"))?;
        command.stdin(Stdio::null()).stdout(writer).stderr(stderr).kill_on_drop(true);
        let mut child = command.spawn().map_err(|source| Error::Io {
            id: id.to_owned(),
            step: "starting runc exec",
            source,
        })?;
        // The pipe's write ends are runc's alone now: its end is runc's.
        drop(command);
        let mut collected = Collected::default();
        let ran = async {
            // A command that ends soon (a probe's, most) has its output read once runc
            // exited: its output waits in the pipe and does not wake the agent. One that
            // runs on has it read as it comes, so that it never waits on a full pipe.
            tokio::select! {
                status = child.wait() => {
                    let status = status.map_err(io("waiting for runc exec"))?;
                    // runc exited: the pipe's write ends are closed.
                    collected
                        .read_ended(reader, MAX_OUTPUT)
                        .map_err(io("reading the command's output"))?;
                    return Ok(status);
                }
                () = tokio::time::sleep(READ_AFTER) => {}
            }
            let mut receiver =
                Receiver::from_owned_fd(reader).map_err(io("reading the command's output"))?;
            let (read, status) =
                tokio::join!(collected.read_to_end(&mut receiver, MAX_OUTPUT), child.wait());
            read.map_err(io("reading the command's output"))?;
            status.map_err(io("waiting for runc exec"))
        };
        let status = match tokio::time::timeout_at(deadline, ran).await {
            Ok(status) => status?,
            Err(_) => {
                kill_command(dir);
                let runc_ended = tokio::time::timeout(KILL_WAIT, child.wait()).await.is_ok();
                if !runc_ended {
                    // Not even started (no PID yet): runc itself goes.
                    let _ = child.start_kill();
                }
                // Once runc ended it reaped the command: its PID may be another's now.
                guard.command_may_run = !runc_ended;
                return Err(Error::TimedOut { id: id.to_owned(), timeout });
            }
        };
        guard.command_may_run = false;
        let ran = match status.code() {
            Some(0) => Ran::Exited(ExecOutput { exit_code: 0, output: collected.bytes }),
            Some(code) => match runc_error(&dir.join("log")) {
                Some(message) => Ran::RuncFailed(message),
                None => Ran::Exited(ExecOutput { exit_code: code, output: collected.bytes }),
            },
            None => Ran::RuncFailed(killed(status)),
        };
        if collected.total > MAX_OUTPUT as u64 {
            tracing::debug!(container_id = id, bytes = collected.total, "exec output cut");
        }
        Ok(ran)
    }
}

/// How a run ended: the command's exit, or runc's failure (its message).
#[derive(Debug)]
pub(super) enum Ran {
    Exited(ExecOutput),
    RuncFailed(String),
}

/// A pipe for the command's stdout and stderr: the agent's read end (non-blocking) and
/// runc's write end.
fn output_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let (reader, writer) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    fcntl(&reader, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    Ok((reader, writer))
}

/// SIGKILL to the command, by the PID runc wrote once it started it (nothing when it has
/// not yet).
fn kill_command(dir: &Path) {
    let pid = std::fs::read_to_string(dir.join("pid")).ok().and_then(|p| p.trim().parse().ok());
    if let Some(pid) = pid.filter(|&pid: &i32| pid > 0) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
}

/// runc's own error in its JSON log (the last one), if it wrote one.
fn runc_error(log: &Path) -> Option<String> {
    parse_runc_error(&std::fs::read_to_string(log).ok()?)
}

/// The last `error` (or `fatal`) entry's message in runc's JSON log lines.
fn parse_runc_error(log: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Entry {
        level: String,
        msg: String,
    }
    log.lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Entry>(line).ok())
        .find(|e| matches!(e.level.as_str(), "error" | "fatal"))
        .map(|e| e.msg)
}

fn killed(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match status.signal() {
        Some(signal) => format!("runc exec was killed by signal {signal}"),
        None => format!("runc exec ended with {status}"),
    }
}

/// Removes the run's directory when the run ends, however it ends; first kills its
/// command while it may still run (a run dropped half-way, or timed out before runc
/// ended).
struct Guard {
    dir: PathBuf,
    command_may_run: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.command_may_run {
            kill_command(&self.dir);
        }
        if let Err(error) = fifo::remove_dir(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), %error, "cannot remove an exec's directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::Handler;

    #[test]
    fn b8_runc_is_run_directly_only_where_the_runc_shim_runs_runc() {
        let runc = Path::new("/usr/sbin/runc");
        let direct = Runc::of(&Handler::runc(None).runtime(false), "k8s.io", Some(runc)).unwrap();
        assert_eq!(
            direct,
            Runc {
                binary: runc.to_owned(),
                root: PathBuf::from("/run/containerd/runc/k8s.io"),
                systemd_cgroup: false
            }
        );
        let systemd = Runc::of(&Handler::runc(None).runtime(true), "ns", Some(runc)).unwrap();
        assert!(systemd.systemd_cgroup);
        // runc not on PATH: containerd's way.
        assert_eq!(Runc::of(&Handler::runc(None).runtime(false), "ns", None), None);
        // Another OCI runtime under the runc shim, or another shim: containerd's way.
        let crun = Handler::runc(Some("/usr/bin/crun".into())).runtime(false);
        assert_eq!(Runc::of(&crun, "ns", Some(runc)), None);
        let kata = Runtime { name: "io.containerd.kata.v2".into(), options: None };
        assert_eq!(Runc::of(&kata, "ns", Some(runc)), None);
        // runc named by path, and a root of its own.
        let options = RuncOptions {
            binary_name: "/opt/bin/runc".into(),
            root: "/run/my-runc".into(),
            ..RuncOptions::default()
        };
        let handler = Handler {
            runtime_type: crate::handler::RUNC_V2.into(),
            options: crate::handler::Options::Runc(options),
        };
        let own = Runc::of(&handler.runtime(false), "ns", None).unwrap();
        assert_eq!(own.binary, PathBuf::from("/opt/bin/runc"));
        assert_eq!(own.root, PathBuf::from("/run/my-runc/ns"));
    }

    #[test]
    fn b8_runcs_own_failure_is_its_last_error_entry() {
        let log = r#"{"level":"warning","msg":"a warning","time":"2026-11-29T06:00:00Z"}
{"level":"error","msg":"exec failed: unable to start container process: exec: \"nope\": executable file not found in $PATH","time":"2026-11-29T06:00:00Z"}
not json
"#;
        let message = parse_runc_error(log).unwrap();
        assert!(message.contains("executable file not found"), "{message}");
        assert_eq!(parse_runc_error(r#"{"level":"warning","msg":"w"}"#), None);
        assert_eq!(parse_runc_error(""), None);
    }
}
