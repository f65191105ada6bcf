//! What an earlier run left in containerd that containerd's own garbage collector does not
//! take (soon). containerd 1.6 collects content and snapshots that nothing references once
//! no lease holds them, and deletes a lease past its `containerd.io/gc.expire` label; it
//! does not know that a lease of a pull or import cut short by a crash is dead (Outpost's
//! expire after an hour, holding their content until then), and its collector runs only
//! after deletions or many changes. At start, the agent deletes its own leases
//! (`outpost-*`) created before this run, and removes the active snapshots no container
//! references that were made before this run (a container create cut short between its
//! snapshot and its record), then has containerd collect at once.
//!
//! It also ends the shims left serving no task, at start and whenever containerd's event
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

use std::collections::HashSet;
use std::path::Path;

use containerd_client::services::v1::ListRequest as ListLeases;
use containerd_client::services::v1::ListTasksRequest;
use containerd_client::services::v1::snapshots::{
    Kind, ListSnapshotsRequest, RemoveSnapshotRequest,
};
use containerd_client::services::v1::{DeleteRequest as DeleteLease, ListContainersRequest};
use futures::StreamExt as _;
use k8s_openapi::jiff::Timestamp;

use crate::runtime::Containerd;
use crate::runtime::events::timestamp;
use crate::runtime::image::SNAPSHOTTER;

/// The prefix of the leases Outpost's pulls and imports take.
const LEASE_PREFIX: &str = "outpost-";

/// Removes the earlier run's leases and orphaned snapshots (see the module's comment);
/// failures are logged.
pub(super) async fn remove(containerd: &Containerd, started: Timestamp) {
    end_orphaned_shims(containerd).await;
    let leases = stale_leases(containerd, started).await;
    let snapshots = orphaned_snapshots(containerd, started).await;
    let last = leases.len() + snapshots.len();
    let mut done = 0;
    for id in leases {
        done += 1;
        // The last deletion waits for containerd's collection (what the lease held goes).
        let request = DeleteLease { id: id.clone(), sync: done == last };
        match containerd.leases().delete(request).await {
            Ok(_) => tracing::info!(lease = id, "removed a lease an earlier run left"),
            Err(e) => {
                tracing::warn!(lease = id, error = %e, "cannot remove a lease an earlier run left")
            }
        }
    }
    for key in snapshots {
        let request =
            RemoveSnapshotRequest { snapshotter: SNAPSHOTTER.to_owned(), key: key.clone() };
        match containerd.snapshots().remove(request).await {
            Ok(_) => tracing::info!(snapshot = key, "removed a snapshot no container uses"),
            Err(e) => {
                tracing::warn!(snapshot = key, error = %e, "cannot remove a snapshot no container uses")
            }
        }
    }
}

/// Outpost's leases created before `started`.
async fn stale_leases(containerd: &Containerd, started: Timestamp) -> Vec<String> {
    let leases = match containerd.leases().list(ListLeases { filters: vec![] }).await {
        Ok(response) => response.into_inner().leases,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list containerd leases");
            return Vec::new();
        }
    };
    leases
        .into_iter()
        .filter(|l| l.id.starts_with(LEASE_PREFIX))
        .filter(|l| l.created_at.as_ref().and_then(timestamp).is_some_and(|at| at < started))
        .map(|l| l.id)
        .collect()
}

/// Active snapshots made before `started` that no container of the namespace uses.
async fn orphaned_snapshots(containerd: &Containerd, started: Timestamp) -> Vec<String> {
    let containers =
        match containerd.containers().list(ListContainersRequest { filters: vec![] }).await {
            Ok(response) => response.into_inner().containers,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list containers to find orphaned snapshots");
                return Vec::new();
            }
        };
    let used: HashSet<String> = containers.into_iter().map(|c| c.snapshot_key).collect();
    let request = ListSnapshotsRequest { snapshotter: SNAPSHOTTER.to_owned(), filters: vec![] };
    let mut stream = match containerd.snapshots().list(request).await {
        Ok(response) => response.into_inner(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list snapshots");
            return Vec::new();
        }
    };
    let mut orphaned = Vec::new();
    while let Some(page) = stream.next().await {
        let Ok(page) = page else { break };
        for info in page.info {
            let before =
                info.created_at.as_ref().and_then(timestamp).is_some_and(|at| at < started);
            if info.kind == Kind::Active as i32 && before && !used.contains(&info.name) {
                orphaned.push(info.name);
            }
        }
    }
    orphaned
}

/// SIGTERMs the shims of this containerd and namespace, started before this process and
/// before the containerd now serving, that serve a container containerd lists no task for.
pub(super) async fn end_orphaned_shims(containerd: &Containerd) {
    let socket = containerd.socket().to_path_buf();
    let Some(agent) = start_time("self") else { return };
    let serving = containerd_pid(&socket).await.and_then(|pid| start_time(&pid.to_string()));
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
    for (pid, id) in shims(containerd.namespace(), &socket) {
        let older = start_time(&pid.to_string()).is_some_and(|at| at < before);
        if tasks.contains(&id) || !older {
            continue;
        }
        let Ok(raw) = i32::try_from(pid) else { continue };
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), nix::sys::signal::SIGTERM) {
            Ok(()) => tracing::info!(pid, container_id = id, "ended a shim left serving no task"),
            Err(e) => {
                tracing::warn!(pid, container_id = id, error = %e, "cannot end a shim serving no task")
            }
        }
    }
}

/// The pid of the process serving containerd's socket (its peer credentials).
async fn containerd_pid(socket: &Path) -> Option<i32> {
    let stream = tokio::net::UnixStream::connect(socket).await.ok()?;
    stream.peer_cred().ok()?.pid()
}

/// `(pid, container id)` of the runc shims serving `namespace` of the containerd at
/// `socket` (their command line says `-namespace NS -id ID -address SOCKET`).
fn shims(namespace: &str, socket: &str) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            shim_of(&args, namespace, socket).map(|id| (pid, id))
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

/// When a process started, in clock ticks since boot (`/proc/<pid>/stat`'s 22nd field).
fn start_time(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: count from its end.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<&[u8]> {
        line.split(' ').map(str::as_bytes).collect()
    }

    #[test]
    fn a_shim_is_known_by_its_namespace_and_containerd() {
        let line =
            "/usr/bin/containerd-shim-runc-v2 -namespace outpost -id abc -address /run/c.sock";
        assert_eq!(shim_of(&args(line), "outpost", "/run/c.sock").as_deref(), Some("abc"));
        assert_eq!(shim_of(&args(line), "other", "/run/c.sock"), None);
        assert_eq!(shim_of(&args(line), "outpost", "/run/other.sock"), None);
        let unix = "containerd-shim-runc-v2 -namespace outpost -id x -address unix:///run/c.sock";
        assert_eq!(shim_of(&args(unix), "outpost", "/run/c.sock").as_deref(), Some("x"));
        let not_a_shim = "/usr/bin/sleep -namespace outpost -id abc -address /run/c.sock";
        assert_eq!(shim_of(&args(not_a_shim), "outpost", "/run/c.sock"), None);
        assert_eq!(
            shim_of(&args("containerd-shim-runc-v2 -namespace outpost"), "outpost", ""),
            None
        );
    }

    #[test]
    fn this_process_started_after_its_parent() {
        let me = start_time("self").unwrap();
        let parent = std::os::unix::process::parent_id().to_string();
        assert!(start_time(&parent).unwrap() <= me);
        assert_eq!(start_time("not-a-pid"), None);
    }
}
