//! What an earlier run left in containerd that containerd's own garbage collector does not
//! take (soon). containerd 1.6 collects content and snapshots that nothing references once
//! no lease holds them, and deletes a lease past its `containerd.io/gc.expire` label; it
//! does not know that a lease of a pull or import cut short by a crash is dead (Outpost's
//! expire after an hour, holding their content until then), and its collector runs only
//! after deletions or many changes. At start, the agent deletes its own leases
//! (`outpost-*`) created before this run whose holder (a label: pid and boot) no longer
//! runs, and removes the active snapshots no container
//! references that were made before this run (a container create cut short between its
//! snapshot and its record), then has containerd collect at once.

use std::collections::HashSet;

use containerd_client::services::v1::ListRequest as ListLeases;
use containerd_client::services::v1::snapshots::{
    Kind, ListSnapshotsRequest, RemoveSnapshotRequest,
};
use containerd_client::services::v1::{DeleteRequest as DeleteLease, ListContainersRequest};
use futures::StreamExt as _;
use k8s_openapi::jiff::Timestamp;

use crate::host::Host;
use crate::runtime::Containerd;
use crate::runtime::events::timestamp;
use crate::runtime::image::{SNAPSHOTTER, store};

/// The prefix of the leases Outpost's pulls and imports take.
const LEASE_PREFIX: &str = "outpost-";

/// Ends the shims left serving no task ([`super::shims`]), and removes the earlier run's
/// leases and orphaned snapshots (see the module's comment); failures are logged.
pub(super) async fn remove(host: &dyn Host, containerd: &Containerd, started: Timestamp) {
    super::shims::end_orphaned(host, containerd).await;
    let leases = stale_leases(host, containerd, started).await;
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

/// Outpost's leases created before `started` whose holder no longer runs on `host`.
async fn stale_leases(host: &dyn Host, containerd: &Containerd, started: Timestamp) -> Vec<String> {
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
        // Another live process's pull or import (the CLI's, another agent's) is not ours.
        .filter(|l| {
            let holder = l.labels.get(store::HOLDER_LABEL);
            !holder.is_some_and(|holder| store::holder_runs(host, holder))
        })
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
