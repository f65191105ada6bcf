//! Dead containers: listed from containerd (their labels say whose they are), chosen by
//! kubelet's policy (`outpost_core::gc::containers`), removed with their log files. What
//! the pods' published statuses name stays (read before and after the listing, so a
//! status that moved on meanwhile still protects what it named when the listing was
//! taken).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use containerd_client::types::v1::Status;
use k8s_openapi::jiff::Timestamp;
use outpost_core::container_log::named_instances;
use outpost_core::gc::containers::{Instance, Policy, plan};

use crate::error_chain::describe;
use crate::gc::metrics::GarbageCollection;
use crate::runtime::Containerd;
use crate::runtime::container::{
    self, LABEL_CONTAINER_NAME, LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID,
    LABEL_RESTART_COUNT, Listed,
};
use crate::runtime::events::timestamp;
use crate::runtime::logs;
use crate::status::StatusStore;

/// What a pass leaves for later.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Later {
    /// When a dead container too young to be chosen comes of age.
    pub revisit_at: Option<Timestamp>,
    /// A container stays only because a pod's status names it: look again when the
    /// statuses change.
    pub held: bool,
}

/// Removes the dead containers the policy chooses, with their logs, keeping those the
/// pods' `statuses` name; returns what is left for later (nothing on a failure to list:
/// the next trigger tries again).
pub(super) async fn collect(
    containerd: &Containerd,
    policy: &Policy,
    statuses: &StatusStore,
    pod_log_dir: &Path,
    metrics: &GarbageCollection,
) -> Later {
    let before = statuses.all();
    let listed = match container::list(containerd).await {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(error = %describe(&e), "container GC: cannot list containers");
            return Later::default();
        }
    };
    let after = statuses.all();
    let named: BTreeSet<&str> =
        before.values().chain(after.values()).flat_map(|s| named_instances(s)).collect();
    let instances: Vec<Instance> = listed.iter().filter_map(instance).collect();
    // Clock: the local wall clock, as containerd stamps a container's creation on this node.
    let plan = plan(&instances, &named, policy, Timestamp::now());
    for id in &plan.remove {
        let Some(listed) = listed.iter().find(|l| &l.id == id) else { continue };
        if let Err(e) = container::remove(containerd, id).await {
            tracing::warn!(container_id = id, error = %describe(&e), "container GC: cannot remove a dead container");
            continue;
        }
        metrics.container_removed();
        let log = log_path(pod_log_dir, listed);
        if let Some(log) = &log {
            remove_logs(log).await;
        }
        tracing::info!(
            pod.namespace = listed.label(LABEL_POD_NAMESPACE),
            pod.name = listed.label(LABEL_POD_NAME),
            pod.uid = listed.label(LABEL_POD_UID),
            container = listed.label(LABEL_CONTAINER_NAME),
            container_id = id,
            "removed a dead container and its logs"
        );
    }
    Later { revisit_at: plan.revisit_at, held: plan.held }
}

/// A listed container as the policy sees it (`None`: not one of a pod's containers).
fn instance(listed: &Listed) -> Option<Instance> {
    Some(Instance {
        id: listed.id.clone(),
        pod_uid: listed.label(LABEL_POD_UID)?.to_owned(),
        container: listed.label(LABEL_CONTAINER_NAME)?.to_owned(),
        restart_count: listed.label(LABEL_RESTART_COUNT).and_then(|c| c.parse().ok()).unwrap_or(0),
        // One without a creation time counts as new: it stays until it has one.
        created_at: listed.created_at.as_ref().and_then(timestamp).unwrap_or_else(Timestamp::now),
        // Anything but a stopped task (or none) may still run: not dead.
        running: listed.task.as_ref().is_some_and(|t| t.status() != Status::Stopped),
    })
}

/// The live log file of the container's run.
fn log_path(root: &Path, listed: &Listed) -> Option<PathBuf> {
    Some(logs::container_log_path(
        root,
        listed.label(LABEL_POD_NAMESPACE)?,
        listed.label(LABEL_POD_NAME)?,
        listed.label(LABEL_POD_UID)?,
        listed.label(LABEL_CONTAINER_NAME)?,
        listed.label(LABEL_RESTART_COUNT).and_then(|c| c.parse().ok()).unwrap_or(0),
    ))
}

/// Deletes the live log file `<n>.log` and its rotated files (`<n>.log.<time>[.k][.gz]`).
async fn remove_logs(live: &Path) {
    let live = live.to_owned();
    let removed = tokio::task::spawn_blocking(move || {
        let (Some(dir), Some(name)) = (live.parent(), live.file_name().and_then(|n| n.to_str()))
        else {
            return;
        };
        let rotated = format!("{name}.");
        let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
        for entry in entries {
            let file = entry.file_name();
            let Some(file) = file.to_str() else { continue };
            if file != name && !file.starts_with(&rotated) {
                continue;
            }
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %entry.path().display(), error = %e, "container GC: cannot delete a dead container's log file");
                }
            }
        }
    })
    .await;
    if let Err(e) = removed {
        tracing::warn!(error = %e, "container GC: deleting log files panicked or was cancelled");
    }
}

#[cfg(test)]
mod tests;
