//! The pods the agent runs, as eviction candidates: each with its source and what it
//! uses, read when a pass needs to rank (blocking: cgroup files, and for disk a walk of
//! the pod's volumes and logs).
//!
//! - Memory and processes: the pod's cgroup (`Layout::pod(class, uid)`), and each
//!   container's cgroup below it for the message.
//! - Disk and inodes: the pod's emptyDir volumes on nodefs (tmpfs ones are memory) and
//!   its log directory. Writable layers are not counted (containerd's snapshot usage is
//!   the ephemeral-storage accounting's work).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use outpost_core::eviction::rank::ContainerStats;
use outpost_core::eviction::{Candidate, PodStats, Resource};
use outpost_core::pod::{self, Source};
use outpost_core::qos::{self, QosClass};

use crate::runtime::cgroups::{Driver, Hierarchy, Layout};
use crate::runtime::logs::pod_log_dir;

/// Where pods keep what they use.
#[derive(Debug, Clone)]
pub struct PodPlaces {
    pub hierarchy: Hierarchy,
    pub layout: Layout,
    /// The state dir (`<state>/pods/<uid>/volumes/…`).
    pub state_dir: PathBuf,
    pub pod_log_dir: PathBuf,
    /// The host the cgroups' usage is read through.
    pub host: Arc<dyn crate::host::Host>,
}

/// The pods that run (a status that is not terminal), with their usage for `resource`.
pub fn candidates(
    pods: &[(Source, Arc<Pod>)],
    statuses: &HashMap<String, Arc<PodStatus>>,
    places: &PodPlaces,
    resource: Resource,
) -> Vec<Candidate> {
    pods.iter()
        .filter_map(|(source, pod)| {
            let status = statuses.get(pod::uid(pod))?;
            let phase = status.phase.as_deref().unwrap_or_default();
            if matches!(phase, "Succeeded" | "Failed") {
                return None;
            }
            let stats = stats(pod, status, places, resource);
            Some(Candidate { pod: pod.clone(), source: *source, stats })
        })
        .collect()
}

fn stats(
    pod: &Pod,
    status: &PodStatus,
    places: &PodPlaces,
    resource: Resource,
) -> Option<PodStats> {
    let uid = pod::uid(pod);
    let class = status
        .qos_class
        .as_deref()
        .and_then(|c| {
            [QosClass::Guaranteed, QosClass::Burstable, QosClass::BestEffort]
                .into_iter()
                .find(|q| q.as_str() == c)
        })
        .unwrap_or_else(|| qos::qos_class(pod));
    let cgroup = [places.layout.pod(class, uid)]
        .into_iter()
        .chain(places.layout.pod_candidates(uid))
        .map(|name| name.path(places.layout.driver))
        .find(|path| places.host.cgroup_exists(&places.hierarchy.dir("memory", path)));
    let host = places.host.as_ref();
    let usage = cgroup.as_ref().and_then(|path| places.hierarchy.usage(host, path).ok());
    let on_disk = matches!(resource, Resource::EphemeralStorage | Resource::Inodes);
    // Memory and PIDs come from the cgroup only; disk from the pod's files.
    if usage.is_none() && !on_disk {
        return None;
    }
    let mut stats = PodStats {
        memory: usage.and_then(|u| u.working_set_bytes).unwrap_or(0),
        processes: usage.and_then(|u| u.pids).unwrap_or(0),
        ..PodStats::default()
    };
    let meta = &pod.metadata;
    let logs = pod_log_dir(
        &places.pod_log_dir,
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        uid,
    );
    for container in status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
    {
        let id = container
            .container_id
            .as_deref()
            .and_then(|id| id.rsplit_once("://"))
            .map(|(_, id)| id);
        let memory = id.filter(|_| places.layout.driver == Driver::Cgroupfs).and_then(|id| {
            let cgroup = cgroup.as_ref()?;
            places.hierarchy.usage(host, &format!("{cgroup}/{id}")).ok()?.working_set_bytes
        });
        let disk = on_disk.then(|| walk(&logs.join(&container.name), None).0);
        stats.containers.push(ContainerStats { name: container.name.clone(), memory, disk });
    }
    if on_disk {
        let volumes =
            places.state_dir.join("pods").join(uid).join("volumes").join("kubernetes.io~empty-dir");
        let device = std::fs::metadata(&places.state_dir).ok().map(|m| m.dev());
        let (bytes, inodes) = walk(&volumes, device);
        let (log_bytes, log_inodes) = walk(&logs, None);
        stats.disk = bytes + log_bytes;
        stats.inodes = inodes + log_inodes;
    }
    Some(stats)
}

/// The bytes (allocated blocks) and inodes below `dir`, not crossing into another
/// filesystem than `device` (when given: a tmpfs emptyDir is memory, not disk).
pub fn walk(dir: &Path, device: Option<u64>) -> (u64, u64) {
    let mut bytes = 0;
    let mut inodes = 0;
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else { continue };
            if device.is_some_and(|d| meta.dev() != d) {
                continue;
            }
            bytes += meta.blocks() * 512;
            inodes += 1;
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    (bytes, inodes)
}
