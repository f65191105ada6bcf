//! `cargo xtask containerd [start|stop|status]`: a private containerd for development and
//! tests, isolated from any system containerd. Everything it owns lives under
//! `<workspace>/target/containerd/`: its config, socket, root and state directories, log and
//! pid file. The CRI plugin is off (Outpost talks to containerd's own API), so is the debug
//! socket; the overlayfs snapshotter is the default.
//!
//! Its runc v2 shim is containerd's Go one. `start --rust-shim` (or `OUTPOST_RUST_SHIM=1`)
//! puts the Rust one (`containerd-runc-shim` 0.1.1, [`crate::shim`]) first on containerd's
//! `PATH` instead, for comparisons.
//!
//! Only the process named by our pid file, and running our config, is ever signalled.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::shim::{self, Shim};

/// How long `start` waits for the socket to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The line `start` writes to the log before each start; error messages show the log after it.
const START_MARKER: &str = "----- cargo xtask containerd start -----";
/// How long `stop` waits after SIGTERM before it sends SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// What `containerd` was asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start(Shim),
    Stop,
    Status,
}

impl Action {
    pub fn parse(args: &[String]) -> anyhow::Result<Action> {
        match args {
            [] => Ok(Action::Status),
            [one] => match one.as_str() {
                "start" => Ok(Action::Start(Shim::chosen(false))),
                "stop" => Ok(Action::Stop),
                "status" => Ok(Action::Status),
                other => bail!(
                    "`containerd`: unknown action {other:?}; usage: cargo xtask containerd [start [--rust-shim]|stop|status]"
                ),
            },
            [start, flag] if start == "start" && flag == "--rust-shim" => {
                Ok(Action::Start(Shim::chosen(true)))
            }
            _ => bail!(
                "`containerd` takes one action; usage: cargo xtask containerd [start [--rust-shim]|stop|status]"
            ),
        }
    }
}

/// Whether `start` found the private containerd running or started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    AlreadyRunning,
    Started,
}

/// The files and directories of the private containerd.
#[derive(Debug, Clone)]
pub struct Paths {
    pub dir: PathBuf,
}

impl Paths {
    /// `<workspace>/target/containerd`, whatever `CARGO_TARGET_DIR` says, so the socket path
    /// is stable for tests and developers.
    pub fn new() -> Paths {
        Paths { dir: crate::project_root().join("target").join("containerd") }
    }
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.toml")
    }
    pub fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }
    fn ttrpc_socket(&self) -> PathBuf {
        self.dir.join("containerd.sock.ttrpc")
    }
    pub fn log(&self) -> PathBuf {
        self.dir.join("containerd.log")
    }
    fn pid_file(&self) -> PathBuf {
        self.dir.join("containerd.pid")
    }
    fn root(&self) -> PathBuf {
        self.dir.join("root")
    }
    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }
    fn opt(&self) -> PathBuf {
        self.dir.join("opt")
    }
}

pub fn run(action: Action) -> anyhow::Result<()> {
    let paths = Paths::new();
    match action {
        Action::Start(shim) => start(&paths, shim).map(|_| ()),
        Action::Stop => stop(&paths),
        Action::Status => status(&paths),
    }
}

/// Starts the private containerd with `shim` unless it already runs; returns once its
/// socket answers.
pub fn start(paths: &Paths, shim: Shim) -> anyhow::Result<Started> {
    require_root("start")?;
    if let Some(pid) = running_pid(paths) {
        if answers(&paths.socket()) {
            let running = shim::of_process(pid).unwrap_or(Shim::Go);
            println!(
                "containerd: already running (pid {pid}) with the {}, socket {}",
                running.name(),
                paths.socket().display()
            );
            if running != shim {
                eprintln!(
                    "containerd: the {} was asked for; `cargo xtask containerd stop` and start it again to switch",
                    shim.name()
                );
            }
            return Ok(Started::AlreadyRunning);
        }
        bail!(
            "containerd (pid {pid}) runs but its socket {} does not answer; \
             `cargo xtask containerd stop` and start it again (log: {})",
            paths.socket().display(),
            paths.log().display()
        );
    }
    for (tool, package) in [
        ("containerd", "containerd"),
        ("ctr", "containerd"),
        ("runc", "runc"),
        ("setsid", "util-linux"),
    ] {
        if !on_path(tool) {
            bail!(
                "`{tool}` is not on PATH; install the Debian package `{package}` (cargo xtask deps)"
            );
        }
    }
    let path = shim::containerd_path(shim)?;
    remove_stale(paths)?;
    for dir in [&paths.dir, &paths.root(), &paths.state(), &paths.opt()] {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    fs::write(paths.config(), config(paths))
        .with_context(|| format!("cannot write {}", paths.config().display()))?;

    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(paths.log())
        .with_context(|| format!("cannot open {}", paths.log().display()))?;
    writeln!(&log, "{START_MARKER}").context("cannot write to containerd's log")?;
    let log_err = log.try_clone().context("cannot duplicate the log file handle")?;
    // `setsid` execs containerd in place (a spawned child is never a process-group leader),
    // so the child's pid is containerd's; the new session keeps it out of our terminal's
    // signals.
    let mut command = Command::new("setsid");
    command
        .arg("containerd")
        .arg("--config")
        .arg(paths.config())
        .current_dir(&paths.dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    let child = command.spawn().context("cannot start `setsid containerd`")?;
    let pid = child.id();
    fs::write(paths.pid_file(), format!("{pid}\n"))
        .with_context(|| format!("cannot write {}", paths.pid_file().display()))?;
    // The child handle is dropped: containerd outlives this process; nobody waits for it
    // here (`alive` treats a zombie as dead).
    drop(child);

    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if answers(&paths.socket()) {
            break;
        }
        if !alive(pid) {
            let _ = fs::remove_file(paths.pid_file());
            bail!(
                "containerd exited during start; the end of {}:\n{}",
                paths.log().display(),
                tail(&paths.log())
            );
        }
        if Instant::now() >= deadline {
            let _ = terminate(paths, pid);
            bail!(
                "containerd's socket {} did not answer within {}s; the end of {}:\n{}",
                paths.socket().display(),
                START_TIMEOUT.as_secs(),
                paths.log().display(),
                tail(&paths.log())
            );
        }
        sleep(Duration::from_millis(100));
    }
    println!(
        "containerd: started (pid {pid}) with the {}, socket {}, log {}",
        shim.name(),
        paths.socket().display(),
        paths.log().display()
    );
    Ok(Started::Started)
}

/// Stops the private containerd if it runs (SIGTERM, then SIGKILL after 10 s) and removes
/// its pid file and socket. Containers' shims keep running, as with any containerd restart.
pub fn stop(paths: &Paths) -> anyhow::Result<()> {
    let Some(pid) = running_pid(paths) else {
        remove_stale(paths)?;
        println!("containerd: not running");
        return Ok(());
    };
    require_root("stop")?;
    terminate(paths, pid)?;
    println!("containerd: stopped (pid {pid})");
    Ok(())
}

fn status(paths: &Paths) -> anyhow::Result<()> {
    match running_pid(paths) {
        Some(pid) if answers(&paths.socket()) => println!(
            "containerd: running (pid {pid}) with the {}, socket {}",
            shim::of_process(pid).unwrap_or(Shim::Go).name(),
            paths.socket().display()
        ),
        Some(pid) => println!(
            "containerd: pid {pid} runs but the socket {} does not answer{}",
            paths.socket().display(),
            if crate::is_root() { "" } else { " (not root: the socket is root's)" }
        ),
        None => println!("containerd: not running (start it with `cargo xtask containerd start`)"),
    }
    Ok(())
}

/// Whether containerd answers on `socket` (`ctr version` succeeds).
pub fn answers(socket: &Path) -> bool {
    socket.exists()
        && Command::new("ctr")
            .arg("--address")
            .arg(socket)
            .args(["--connect-timeout", "2s", "--timeout", "5s", "version"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// The pid in our pid file, if that process is alive and is containerd running our config
/// (a reused pid or another containerd is never taken for ours).
fn running_pid(paths: &Paths) -> Option<u32> {
    let text = fs::read_to_string(paths.pid_file()).ok()?;
    let pid: u32 = text.trim().parse().ok()?;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let config = paths.config();
    let ours =
        cmdline.split(|&b| b == 0).any(|arg| Path::new(&*String::from_utf8_lossy(arg)) == config)
            && cmdline.split(|&b| b == 0).next().is_some_and(|arg0| arg0.ends_with(b"containerd"));
    (ours && alive(pid)).then_some(pid)
}

/// Whether `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // "pid (comm) S ...": the state follows the last ')'.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// SIGTERM, wait up to [`STOP_TIMEOUT`], SIGKILL; then removes the pid file and sockets.
fn terminate(paths: &Paths, pid: u32) -> anyhow::Result<()> {
    signal(pid, "TERM")?;
    let deadline = Instant::now() + STOP_TIMEOUT;
    while alive(pid) && Instant::now() < deadline {
        sleep(Duration::from_millis(100));
    }
    if alive(pid) {
        eprintln!(
            "containerd: pid {pid} still runs {}s after SIGTERM; sending SIGKILL",
            STOP_TIMEOUT.as_secs()
        );
        signal(pid, "KILL")?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(pid) && Instant::now() < deadline {
            sleep(Duration::from_millis(50));
        }
        if alive(pid) {
            bail!("containerd (pid {pid}) survived SIGKILL");
        }
    }
    remove_stale(paths)
}

fn signal(pid: u32, name: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()
        .context("cannot run `kill`")?;
    // A process that exited in between is not an error.
    if !status.success() && alive(pid) {
        bail!("`kill -{name} {pid}` failed: {status}");
    }
    Ok(())
}

/// Removes a pid file and sockets left behind by a containerd that no longer runs.
fn remove_stale(paths: &Paths) -> anyhow::Result<()> {
    for file in [paths.pid_file(), paths.socket(), paths.ttrpc_socket()] {
        match fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot remove stale {}", file.display()));
            }
        }
    }
    Ok(())
}

fn require_root(action: &str) -> anyhow::Result<()> {
    if !crate::is_root() {
        bail!(
            "the private containerd needs root (mounts, cgroups, namespaces); \
             run `sudo -E cargo xtask containerd {action}`"
        );
    }
    Ok(())
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// The last lines of a log file written since the last start, for error messages.
fn tail(path: &Path) -> String {
    let text = fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let since_start = text.rsplit_once(START_MARKER).map_or(text.as_str(), |(_, after)| after);
    let lines: Vec<&str> = since_start.lines().filter(|l| !l.is_empty()).collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// containerd 1.6's configuration (format version 2) for the private instance.
/// The test containerd's config: the managed containerd's template (one template for
/// both), with this containerd's directories.
fn config(paths: &Paths) -> String {
    let quote = |p: PathBuf| format!("{:?}", p.to_string_lossy());
    include_str!("../../agent/runtime/src/managed/containerd.toml")
        .replace("{root}", &quote(paths.root()))
        .replace("{state}", &quote(paths.state()))
        .replace("{socket}", &quote(paths.socket()))
        .replace("{ttrpc}", &quote(paths.ttrpc_socket()))
        .replace("{opt}", &quote(paths.opt()))
}
