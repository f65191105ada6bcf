//! A pod's shared pid namespace (`shareProcessNamespace`), held by a tiny init process.
//!
//! kubelet has the pause container be pid 1 of the pod's pid namespace. A pid namespace,
//! unlike the others, cannot be held by a bind mount alone: once its pid 1 exits, the
//! kernel kills everything in it and no process can enter it again. So the agent starts
//! its own binary as that pid 1 ([`INIT_SUBCOMMAND`], hidden): it reaps the orphans that
//! the containers' processes leave (as pause does) and exits on `SIGTERM`/`SIGINT`.
//!
//! - Created from a dedicated thread that `unshare`s `CLONE_NEWPID` and spawns the init:
//!   the child is pid 1 of the new namespace, no other thread of the agent is affected.
//!   The init calls `setsid`, so it has no controlling terminal nor the agent's session;
//!   it survives an agent restart (the unit's `KillMode=process` only stops the agent).
//! - Held: `/proc/<init>/ns/pid` is bind-mounted onto `<ns dir>/pid` (the containers join
//!   it by that path) and the init's pid is written to `<ns dir>/pid-init`.
//! - Adopted: after an agent restart, [`ensure`] finds the file and the init, checking
//!   that the pid in `pid-init` is still in that very namespace (same nsfs inode), so a
//!   reused pid is never taken for it. A namespace whose init is gone (its containers
//!   went with it) is replaced by a new one.
//! - Removed at tear-down ([`remove`], also from [`super::PodNamespaces::remove`]): the
//!   init is killed (`SIGKILL`, which takes any process left in the namespace with it)
//!   and reaped when it is the agent's child, then the files go.
//!
//! The init stays in the agent's cgroup rather than the pod's: cgroup v2 forbids a
//! process in a cgroup whose children (the containers') have controllers enabled, and it
//! uses no resources worth accounting.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use outpost_host::{Host, Namespace};

use super::{Error, Result, delete, holds_namespace, share_dir, unmount_all};

/// The hidden subcommand that runs as a pod's pid 1: `outpost pod-init <ns dir>` (the
/// directory only names the pod, for `ps`).
pub const INIT_SUBCOMMAND: &str = "pod-init";

/// The file holding the namespace, under the pod's namespace directory.
const FILE: &str = "pid";
/// The init's pid (in the agent's pid namespace), under the same directory.
const PID_FILE: &str = "pid-init";

/// The pod's pid namespace file under `dir`, made (with its init, `exe`
/// [`INIT_SUBCOMMAND`]) unless a live one is there already (its init found through
/// `host`).
pub fn ensure(host: &dyn Host, dir: &Path, exe: &Path) -> Result<PathBuf> {
    let file = dir.join(FILE);
    if holds_namespace(&file)? && live_init(host, dir)?.is_some() {
        return Ok(file);
    }
    // A namespace whose init died (or a set-up cut short): start again.
    remove(host, dir)?;
    fs::create_dir_all(dir)
        .map_err(|source| Error::CreateDir { dir: dir.to_path_buf(), source })?;
    share_dir(dir)?;
    fs::File::create(&file).map_err(|source| Error::CreateFile { file: file.clone(), source })?;
    let init = spawn_init(dir, exe)?;
    let own = proc_pid(init).path("ns/pid");
    let mounted = mount(Some(&own), &file, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|source| Error::MountPid { file: file.clone(), source });
    let recorded = mounted.and_then(|()| {
        fs::write(dir.join(PID_FILE), init.to_string())
            .map_err(|source| Error::WritePid { file: dir.join(PID_FILE), source })
    });
    if let Err(error) = recorded {
        stop(init);
        return Err(error);
    }
    tracing::debug!(init = init.as_raw(), file = %file.display(), "created pod pid namespace");
    Ok(file)
}

/// Kills the pod's init (if it is still the one holding the namespace under `dir`, as
/// `host` shows it) and removes the namespace's files. Idempotent; a missing `dir` is fine.
pub fn remove(host: &dyn Host, dir: &Path) -> Result<()> {
    if let Some(init) = live_init(host, dir)? {
        stop(init);
    }
    let file = dir.join(FILE);
    unmount_all(&file)?;
    delete(&file, fs::remove_file(&file))?;
    let pid_file = dir.join(PID_FILE);
    delete(&pid_file, fs::remove_file(&pid_file))
}

/// The init recorded under `dir`, when it is alive and still in the namespace the file
/// holds.
fn live_init(host: &dyn Host, dir: &Path) -> Result<Option<Pid>> {
    let pid_file = dir.join(PID_FILE);
    let recorded = match fs::read_to_string(&pid_file) {
        Ok(text) => text.trim().parse::<i32>().ok().filter(|pid| *pid > 1),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(source) => return Err(Error::ReadPid { file: pid_file, source }),
    };
    let Some(pid) = recorded.map(Pid::from_raw) else { return Ok(None) };
    let held = fs::metadata(dir.join(FILE)).ok().map(|m| Namespace::of(&m));
    let current = host.proc_pid_ns(proc_pid(pid), "pid").ok();
    Ok((held.is_some() && held == current).then_some(pid))
}

/// `/proc`'s name of process `pid` (a positive pid).
fn proc_pid(pid: Pid) -> outpost_host::Pid {
    outpost_host::Pid::Id(pid.as_raw().unsigned_abs())
}

/// Starts `exe pod-init <dir>` as pid 1 of a new pid namespace; its pid here.
fn spawn_init(dir: &Path, exe: &Path) -> Result<Pid> {
    let (dir_owned, exe) = (dir.to_path_buf(), exe.to_path_buf());
    let thread = std::thread::Builder::new()
        .name("outpost-pod-pid".to_owned())
        .spawn(move || -> Result<Pid> {
            unshare(CloneFlags::CLONE_NEWPID)
                .map_err(|source| Error::Unshare { kinds: "pid".to_owned(), source })?;
            let child = Command::new(&exe)
                .arg(INIT_SUBCOMMAND)
                .arg(&dir_owned)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|source| Error::SpawnInit { exe: exe.clone(), source })?;
            let pid = i32::try_from(child.id()).map_err(|_| Error::SpawnInit {
                exe,
                source: io::Error::other("pid out of range"),
            })?;
            Ok(Pid::from_raw(pid))
        })
        .map_err(|source| Error::Thread { dir: dir.to_path_buf(), source })?;
    thread.join().map_err(|_| Error::ThreadPanicked { dir: dir.to_path_buf() })?
}

/// Kills the init and reaps it when it is the agent's child (one adopted after a
/// restart is not: its new parent reaps it).
fn stop(init: Pid) {
    match kill(init, Signal::SIGKILL) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(error) => {
            tracing::warn!(init = init.as_raw(), %error, "cannot kill the pod's pid namespace init");
        }
    }
    match waitpid(init, None) {
        Ok(_) | Err(Errno::ECHILD) => {}
        Err(error) => tracing::warn!(init = init.as_raw(), %error, "cannot reap the pod's init"),
    }
}

/// The init's life: a session of its own, then reaping children until `SIGTERM` or
/// `SIGINT`. Only returns on those signals (or when it cannot wait for signals).
pub fn run_init() -> io::Result<()> {
    use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
    // Already a process group leader only if started so; either way it is detached.
    let _ = nix::unistd::setsid();
    let mut signals = SigSet::empty();
    for signal in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGINT] {
        signals.add(signal);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&signals), None).map_err(io::Error::from)?;
    loop {
        match signals.wait().map_err(io::Error::from)? {
            Signal::SIGCHLD => reap_all(),
            _ => return Ok(()),
        }
    }
}

/// Reaps every child that has exited.
fn reap_all() {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests;
