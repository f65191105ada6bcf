//! Ephemeral-storage limits lead to eviction, as kubelet's local storage eviction: every
//! [`CHECK_PERIOD`] (kubelet's eviction monitoring interval), the desired pods that set a
//! limit (`limits.ephemeral-storage` or an emptyDir `sizeLimit`) are measured and checked
//! (`outpost_core::gc::storage`); a pod past one is evicted through the pod workers'
//! eviction path with kubelet's message and a 1 s grace period (kubelet's
//! `immediateEvictionGracePeriodSeconds`). Static, mirror and system-critical pods are
//! never evicted (kubelet's `IsCriticalPod`): that is logged once instead.
//!
//! What is measured (bytes on disk, as `du` counts them): a container's writable layer
//! (containerd's usage of its active snapshot) plus its log directory; each emptyDir's
//! directory; the pod's own files (hosts file, resolv.conf) and configMap and
//! downwardAPI volumes. Only pods with limits are measured; with none, the monitor sleeps
//! until the desired pods change.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use containerd_client::services::v1::snapshots::UsageRequest;
use containerd_client::types::v1::Status;
use k8s_openapi::api::core::v1::Pod;
use outpost_core::gc::storage::{Usage, check, is_critical, is_limited};
use outpost_core::pod::{self, FullName};
use tokio::sync::mpsc::UnboundedSender;

use crate::error_chain::describe;
use crate::podconfig::SnapshotHandle;
use crate::runtime::Containerd;
use crate::runtime::container::{self, LABEL_CONTAINER_NAME, LABEL_POD_UID, Listed};
use crate::runtime::image::SNAPSHOTTER;
use crate::runtime::logs;
use crate::worker::Eviction;

/// How often pods with limits are measured (kubelet's `--housekeeping-interval`).
pub const CHECK_PERIOD: Duration = Duration::from_secs(10);
/// kubelet's `immediateEvictionGracePeriodSeconds`.
pub const EVICTION_GRACE: Duration = Duration::from_secs(1);

/// The ephemeral-storage monitor.
#[derive(Debug)]
pub struct Monitor {
    pub containerd: Containerd,
    /// `<state-dir>/pods`: each pod's files and volumes, by UID.
    pub pods_dir: PathBuf,
    pub pod_log_dir: PathBuf,
    pub desired: SnapshotHandle,
    /// The pod workers' eviction path.
    pub evictions: UnboundedSender<Eviction>,
    /// `outpost_evictions_total{signal}`.
    pub metrics: crate::eviction::metrics::Evictions,
}

impl Monitor {
    /// Checks every [`CHECK_PERIOD`] while a pod sets a limit, until the task is aborted;
    /// with none, it sleeps until the desired pods change (no timer wakes an idle agent).
    pub async fn run(self) {
        // Pods already evicted, or critical ones already reported, by UID.
        let mut done: HashSet<String> = HashSet::new();
        let mut changes = self.desired.subscribe();
        let mut measured = false;
        loop {
            if measured {
                tokio::time::sleep(CHECK_PERIOD).await;
            }
            measured = false;
            let snapshot = self.desired.load();
            let pods: Vec<&Arc<Pod>> = snapshot
                .pods
                .iter()
                .map(|(_, pod)| pod)
                .filter(|pod| is_limited(pod) && !done.contains(pod::uid(pod)))
                .collect();
            if pods.is_empty() {
                done.retain(|uid| snapshot.pods.iter().any(|(_, p)| pod::uid(p) == uid));
                if changes.changed().await.is_err() {
                    return;
                }
                continue;
            }
            measured = true;
            let listed = match container::list(&self.containerd).await {
                Ok(listed) => listed,
                Err(e) => {
                    tracing::warn!(error = %describe(&e), "ephemeral storage: cannot list containers");
                    continue;
                }
            };
            for pod in pods {
                let uid = pod::uid(pod);
                let usage = self.measure(pod, &listed).await;
                let Some(exceeded) = check(pod, &usage) else { continue };
                let name = FullName::of(pod);
                done.insert(uid.to_owned());
                if is_critical(pod) {
                    tracing::warn!(pod.namespace = %name.namespace, pod.name = %name.name, pod.uid = uid, message = exceeded.message, "a critical (static, mirror or system-critical) pod is past its local storage limit; it is not evicted");
                    continue;
                }
                tracing::warn!(pod.namespace = %name.namespace, pod.name = %name.name, pod.uid = uid, signal = exceeded.signal.as_str(), message = exceeded.message, "evicting a pod past its local storage limit");
                let eviction = Eviction {
                    pod: name,
                    uid: uid.to_owned(),
                    message: exceeded.message,
                    grace: EVICTION_GRACE,
                };
                if self.evictions.send(eviction).is_err() {
                    return;
                }
                self.metrics.evicted_for(exceeded.signal.as_str());
            }
            done.retain(|uid| snapshot.pods.iter().any(|(_, p)| pod::uid(p) == uid));
        }
    }

    /// What the pod uses now: its running containers' writable layers and logs, its
    /// emptyDirs, its other files.
    async fn measure(&self, pod: &Pod, listed: &[Listed]) -> Usage {
        let uid = pod::uid(pod);
        let mut layers: HashMap<String, u64> = HashMap::new();
        for container in listed.iter().filter(|c| c.label(LABEL_POD_UID) == Some(uid)) {
            let running = container.task.as_ref().is_some_and(|t| t.status() == Status::Running);
            let Some(name) = container.label(LABEL_CONTAINER_NAME).filter(|_| running) else {
                continue;
            };
            let request =
                UsageRequest { snapshotter: SNAPSHOTTER.to_owned(), key: container.id.clone() };
            match self.containerd.snapshots().usage(request).await {
                Ok(usage) => {
                    let size = u64::try_from(usage.into_inner().size).unwrap_or(0);
                    *layers.entry(name.to_owned()).or_default() += size;
                }
                Err(e) => {
                    tracing::debug!(container_id = container.id, error = %e, "ephemeral storage: no snapshot usage")
                }
            }
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let log_dir = logs::pod_log_dir(&self.pod_log_dir, namespace, name, uid);
        let pod_dir = self.pods_dir.join(uid);
        let spec = pod.spec.clone().unwrap_or_default();
        let pod = pod.clone();
        let measured = tokio::task::spawn_blocking(move || {
            let names = spec.containers.iter().chain(spec.init_containers.iter().flatten());
            let containers = names
                .map(|c| {
                    let layer = layers.get(&c.name).copied().unwrap_or(0);
                    (c.name.clone(), layer.saturating_add(disk_usage(&log_dir.join(&c.name))))
                })
                .collect();
            let empty_dirs = spec
                .volumes
                .iter()
                .flatten()
                .filter(|v| v.empty_dir.is_some())
                .filter_map(|v| {
                    let path =
                        crate::runtime::spec::layout::source_path(&pod_dir, &pod, &v.name).ok()?;
                    Some((v.name.clone(), disk_usage(&path)))
                })
                .collect();
            Usage { containers, empty_dirs, other: other_files(&pod_dir) }
        })
        .await;
        measured.unwrap_or_default()
    }
}

/// The pod's own files (hosts file, resolv.conf) and its configMap and downwardAPI
/// volumes (kubelet counts those as local ephemeral volumes).
fn other_files(pod_dir: &Path) -> u64 {
    let files: u64 = std::fs::read_dir(pod_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok().filter(std::fs::Metadata::is_file))
        .map(|m| m.blocks().saturating_mul(512))
        .sum();
    let volumes = ["kubernetes.io~configmap", "kubernetes.io~downward-api"]
        .iter()
        .map(|kind| disk_usage(&pod_dir.join("volumes").join(kind)))
        .sum::<u64>();
    files.saturating_add(volumes)
}

/// What a file tree takes on disk (blocks, as `du` counts them), not following symlinks
/// nor crossing into other filesystems; 0 if it is not there.
pub fn disk_usage(path: &Path) -> u64 {
    let Ok(root) = std::fs::symlink_metadata(path) else { return 0 };
    let mut total = root.blocks().saturating_mul(512);
    if !root.is_dir() {
        return total;
    }
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.dev() != root.dev() {
                continue;
            }
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests;
