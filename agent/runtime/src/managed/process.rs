//! The containerd process: launching it and waiting until it answers, signalling it, and
//! finding the instance a previous agent left behind.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use outpost_host::proc;
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep};

use super::{Error, Options, Result};
use crate::Containerd;

/// The line written to the log before each start; a log tail shows what follows it.
pub(super) const START_MARKER: &str = "----- outpost: starting containerd -----";
/// How many lines of containerd's log an error or warning quotes.
const TAIL_LINES: usize = 20;
/// How much of the end of the log is read to find them.
const TAIL_BYTES: u64 = 64 << 10;
/// How often a starting containerd is asked whether it answers.
const POLL: Duration = Duration::from_millis(100);
/// How long a process may take to go after SIGKILL.
const KILL_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts containerd and waits until its socket answers the Version call. Dropping the
/// future or the child kills it (SIGKILL; its shims stay).
pub(super) async fn launch(options: &Options) -> Result<Child> {
    remove_runtime_files(options)?;
    let log = open_log(options)?;
    let log_err =
        log.try_clone().map_err(|source| Error::Log { path: options.log.clone(), source })?;
    let mut child = Command::new(&options.binary)
        .arg("--config")
        .arg(options.config())
        .current_dir(&options.dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        // Its own process group: a Ctrl-C at the agent's terminal is the agent's to
        // handle (it stops containerd itself). The shims containerd starts are in
        // groups of their own, and nothing here ever signals a group.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| Error::Spawn { binary: options.binary.clone(), source })?;
    let Some(pid) = child.id() else {
        return Err(exited(options, &mut child).await);
    };
    let pid_file = options.pid_file();
    std::fs::write(&pid_file, format!("{pid}\n"))
        .map_err(|source| Error::PidFile { path: pid_file, source })?;

    let deadline = Instant::now() + options.start_timeout;
    let socket = options.socket();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::Exited {
                status,
                log: options.log.clone(),
                tail: tail(&options.log),
            });
        }
        if socket.exists() && Containerd::connect(&socket).await.is_ok() {
            return Ok(child);
        }
        if Instant::now() >= deadline {
            terminate(&mut child, options.stop_timeout).await;
            return Err(Error::Timeout {
                socket,
                timeout: options.start_timeout,
                log: options.log.clone(),
                tail: tail(&options.log),
            });
        }
        sleep(POLL).await;
    }
}

async fn exited(options: &Options, child: &mut Child) -> Error {
    match child.wait().await {
        Ok(status) => Error::Exited { status, log: options.log.clone(), tail: tail(&options.log) },
        Err(source) => Error::Wait { source },
    }
}

/// SIGTERM, then SIGKILL if it is still there after `timeout`; returns how it ended.
pub(super) async fn terminate(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
        // Only this process: its shims (and so the containers) must live on.
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        if let Ok(Ok(status)) = tokio::time::timeout(timeout, child.wait()).await {
            return Some(status);
        }
        tracing::warn!(pid, ?timeout, "containerd did not exit after SIGTERM; sending SIGKILL");
    }
    let _ = child.start_kill();
    tokio::time::timeout(KILL_TIMEOUT, child.wait()).await.ok().and_then(Result::ok)
}

/// Stops the containerd a previous agent started and could not stop (it was killed):
/// the one named by the pid file, if it still runs our config. It holds the metadata
/// database's lock, so a new one could not start while it runs. Only that process is
/// signalled; its shims and containers stay.
pub(super) async fn stop_stale(options: &Options) -> Result<()> {
    let pid_file = options.pid_file();
    let Ok(text) = std::fs::read_to_string(&pid_file) else {
        return Ok(());
    };
    let Some(pid) = text.trim().parse::<i32>().ok().filter(|pid| *pid > 0) else {
        return Ok(());
    };
    let cmdline = proc::cmdline(pid).unwrap_or_default();
    if !proc::alive(pid) || !is_ours(&cmdline, &options.binary, &options.config()) {
        return Ok(());
    }
    tracing::warn!(
        pid,
        pid_file = %pid_file.display(),
        "a containerd from a previous run of the agent is still running; stopping it (its containers keep running)"
    );
    for (signal, timeout) in
        [(Signal::SIGTERM, options.stop_timeout), (Signal::SIGKILL, KILL_TIMEOUT)]
    {
        match kill(Pid::from_raw(pid), signal) {
            Ok(()) => {}
            Err(nix::errno::Errno::ESRCH) => return Ok(()),
            Err(source) => return Err(Error::Stale { pid, source }),
        }
        let deadline = Instant::now() + timeout;
        while proc::alive(pid) && Instant::now() < deadline {
            sleep(POLL).await;
        }
        if !proc::alive(pid) {
            return Ok(());
        }
    }
    Err(Error::StaleSurvived { pid })
}

/// Whether a `/proc/<pid>/cmdline` is `<binary> --config <config>` (a reused pid is never
/// taken for our containerd).
pub(super) fn is_ours(cmdline: &[u8], binary: &Path, config: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let Some(arg0) = args.first() else {
        return false;
    };
    let same_program = Path::new(std::ffi::OsStr::from_bytes(arg0)).file_name()
        == binary.file_name()
        && binary.file_name().is_some();
    let config = config.as_os_str().as_bytes();
    same_program && args.windows(2).any(|pair| pair[0] == b"--config" && pair[1] == config)
}

/// Removes the sockets and pid file of a containerd that no longer runs.
pub(super) fn remove_runtime_files(options: &Options) -> Result<()> {
    for path in [options.socket(), options.ttrpc_socket(), options.pid_file()] {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(Error::Remove { path, source }),
        }
    }
    Ok(())
}

/// Opens the log for appending (rotating it to `<log>.1` once it is large) and marks
/// the start.
fn open_log(options: &Options) -> Result<std::fs::File> {
    let path = &options.log;
    let error = |source| Error::Log { path: path.clone(), source };
    if std::fs::metadata(path).is_ok_and(|m| m.len() > options.max_log_size) {
        let mut rotated = path.clone().into_os_string();
        rotated.push(".1");
        std::fs::rename(path, rotated).map_err(error)?;
    }
    let mut log =
        std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(error)?;
    writeln!(log, "{START_MARKER}").map_err(error)?;
    Ok(log)
}

/// The last lines containerd logged since its last start (empty if the log is unreadable).
pub(super) fn tail(log: &Path) -> String {
    let mut text = Vec::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)));
        let _ = file.take(TAIL_BYTES).read_to_end(&mut text);
    }
    tail_of(&String::from_utf8_lossy(&text))
}

/// The last [`TAIL_LINES`] non-empty lines after the last start marker.
pub(super) fn tail_of(text: &str) -> String {
    let since_start = text.rsplit_once(START_MARKER).map_or(text, |(_, after)| after);
    let lines: Vec<&str> = since_start.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}
