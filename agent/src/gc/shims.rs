//! Ends the runc shims left serving no task, at start and whenever containerd's event
//! stream comes back (containerd restarted). Two ways leave one:
//! - containerd 1.6 does not shut a shim down when the client that asked for its task's
//!   deletion goes away in the middle of the call (an agent killed by SIGKILL while it
//!   stopped a pod);
//! - a containerd killed between its task deletion and the shim's shutdown, or between a
//!   shim's start and the task's record, does not find that shim again when it restarts.
//!
//! The task is gone from containerd's list, so no API reaches that shim; SIGTERM ends it.
//! A shim counts as left only if it started before both this agent and the containerd
//! now serving (found by the socket's peer credentials): containerd loads the tasks of
//! the shims it knows before it serves, and a shim of a task this agent is creating now
//! is younger than both.
//!
//! A shim serves a group of containers (`--shim-grouping`): its command line names only
//! the first (`-id`), which may be long gone while the shim serves the others. Every
//! task's bundle, beside the first container's (the shim's working directory), holds the
//! `address` of the shim serving it: a shim serves a task when that address is a socket
//! the shim has bound.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use containerd_client::services::v1::ListTasksRequest;

use crate::host::{Host, Pid};
use crate::runtime::Containerd;

/// A runc shim of this containerd and namespace, as `/proc` shows it.
#[derive(Debug)]
struct Shim {
    pid: u32,
    /// `-id`: the container it was started for, the first of its group.
    id: String,
    /// The sockets it has bound.
    sockets: Vec<PathBuf>,
    /// The shim socket each task names (`<bundles>/<task id>/address`), for the tasks
    /// whose bundle is beside the shim's working directory.
    addresses: HashMap<String, String>,
}

impl Shim {
    /// Whether the shim serves one of `tasks`: it was started for one, or one's bundle
    /// names a socket it has bound.
    fn serves_any(&self, tasks: &HashSet<String>) -> bool {
        tasks.contains(&self.id)
            || tasks.iter().filter_map(|task| self.addresses.get(task)).any(|address| {
                let path = address.trim();
                let path = Path::new(path.strip_prefix("unix://").unwrap_or(path));
                self.sockets.iter().any(|socket| socket == path)
            })
    }
}

/// SIGTERMs the shims of this containerd and namespace, started before this process and
/// before the containerd now serving, that serve no task containerd lists.
pub(super) async fn end_orphaned(host: &dyn Host, containerd: &Containerd) {
    let socket = containerd.socket().to_path_buf();
    let Some(agent) = start_time(host, Pid::Own) else { return };
    let serving = containerd_pid(&socket).await.and_then(|pid| start_time(host, Pid::Id(pid)));
    let before = serving.map_or(agent, |serving| serving.max(agent));
    let request = ListTasksRequest { filter: String::new() };
    let tasks: HashSet<String> = match containerd.tasks().list(request).await {
        Ok(response) => response.into_inner().tasks.into_iter().map(|t| t.id).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list tasks to find orphaned shims");
            return;
        }
    };
    let socket = socket.to_string_lossy();
    let shims = shims(host, containerd.namespace(), &socket, &tasks);
    let mut ended = 0;
    for shim in &shims {
        let older = start_time(host, Pid::Id(shim.pid)).is_some_and(|at| at < before);
        if !older || shim.serves_any(&tasks) {
            continue;
        }
        let (pid, id) = (shim.pid, &shim.id);
        let Ok(raw) = i32::try_from(pid) else { continue };
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), nix::sys::signal::SIGTERM) {
            Ok(()) => {
                ended += 1;
                tracing::info!(pid, container_id = id, "ended a shim left serving no task");
            }
            Err(e) => {
                tracing::warn!(pid, container_id = id, error = %e, "cannot end a shim serving no task")
            }
        }
    }
    if !shims.is_empty() {
        tracing::info!(shims = shims.len(), ended, "looked for shims serving no task");
    }
}

/// The pid of the process serving containerd's socket (its peer credentials).
async fn containerd_pid(socket: &Path) -> Option<u32> {
    let stream = tokio::net::UnixStream::connect(socket).await.ok()?;
    u32::try_from(stream.peer_cred().ok()?.pid()?).ok()
}

/// The runc shims serving `namespace` of the containerd at `socket` (their command line
/// says `-namespace NS -id ID -address SOCKET`), with what tells which of `tasks` each
/// serves.
fn shims(host: &dyn Host, namespace: &str, socket: &str, tasks: &HashSet<String>) -> Vec<Shim> {
    let Ok(pids) = host.proc_pids() else { return Vec::new() };
    let found: Vec<(u32, String)> = pids
        .into_iter()
        .filter_map(|pid| {
            let cmdline = host.proc_pid(Pid::Id(pid), "cmdline").ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            shim_of(&args, namespace, socket).map(|id| (pid, id))
        })
        .collect();
    if found.is_empty() {
        return Vec::new();
    }
    let bound = bound_sockets(host);
    found
        .into_iter()
        .map(|(pid, id)| {
            let bundles = bundle_dir(host, pid);
            let addresses = tasks
                .iter()
                .filter_map(|task| {
                    let file = bundles.as_ref()?.join(task).join("address");
                    Some((task.clone(), std::fs::read_to_string(file).ok()?))
                })
                .collect();
            Shim { pid, id, sockets: sockets_of(host, pid, &bound), addresses }
        })
        .collect()
}

/// The container a shim's command line serves, if it is a shim of `namespace` at `socket`.
fn shim_of(args: &[&[u8]], namespace: &str, socket: &str) -> Option<String> {
    let program = String::from_utf8_lossy(args.first()?);
    if !program.contains("containerd-shim") {
        return None;
    }
    let flag = |name: &str| {
        args.windows(2)
            .find(|w| w[0] == name.as_bytes())
            .map(|w| String::from_utf8_lossy(w[1]).into_owned())
    };
    let address = flag("-address")?;
    let address = address.strip_prefix("unix://").unwrap_or(&address);
    (flag("-namespace")? == namespace && address == socket).then(|| flag("-id")).flatten()
}

/// Where the bundles of the tasks beside shim `pid`'s first one are: the parent of its
/// working directory (that task's bundle, gone once its task is deleted).
fn bundle_dir(host: &dyn Host, pid: u32) -> Option<PathBuf> {
    let cwd = host.proc_pid_link(Pid::Id(pid), "cwd").ok()?;
    let cwd = cwd.to_str()?;
    Some(Path::new(cwd.strip_suffix(" (deleted)").unwrap_or(cwd)).parent()?.to_path_buf())
}

/// The path of every bound unix socket of this network namespace, by inode.
fn bound_sockets(host: &dyn Host) -> HashMap<u64, PathBuf> {
    host.proc("net/unix").map(|text| parse_net_unix(&text)).unwrap_or_default()
}

/// `/proc/net/unix`'s sockets that have a path: `Num RefCount Protocol Flags Type St Inode
/// Path`.
fn parse_net_unix(text: &str) -> HashMap<u64, PathBuf> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some((fields.get(6)?.parse().ok()?, PathBuf::from(fields.get(7)?)))
        })
        .collect()
}

/// The socket paths process `pid` holds open.
fn sockets_of(host: &dyn Host, pid: u32, bound: &HashMap<u64, PathBuf>) -> Vec<PathBuf> {
    let pid = Pid::Id(pid);
    let fds = host.proc_pid_fds(pid).unwrap_or_default();
    fds.into_iter()
        .filter_map(|fd| {
            let target = host.proc_pid_link(pid, &format!("fd/{fd}")).ok()?;
            let inode: u64 =
                target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()?;
            bound.get(&inode).cloned()
        })
        .collect()
}

/// When a process started, in clock ticks since boot (`/proc/<pid>/stat`'s 22nd field).
fn start_time(host: &dyn Host, pid: Pid) -> Option<u64> {
    let stat = host.proc_pid_text(pid, "stat").ok()?;
    // The command name, in parentheses, may hold spaces: count from its end.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests;
