//! One reading of the node and its pods (IO): which pods run and their running
//! containers (the merge's snapshot and the pod workers' statuses), containerd's usage
//! of each container's writable layer, then the cgroups, `/proc` and the filesystems
//! (blocking: run off the async threads).
//!
//! - `node`: the node's own figures and kubelet's system containers.

mod node;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use containerd_client::services::v1::snapshots::UsageRequest;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use outpost_core::pod;
use outpost_core::stats::procfs;
use outpost_core::stats::rates::CpuRates;
use outpost_core::stats::summary::{
    ContainerStats, FsStats, NetworkStats, PodReference, PodStats, ProcessStats, PvcReference,
    Summary, SwapStats, VolumeStats,
};
use outpost_core::stats::{ContainerMeta, PodMeta, Reading};

use super::Sources;
use crate::host::{Host, Pid};
use crate::runtime::Containerd;
use crate::runtime::cgroups::{PodCgroups, Usage};
use crate::runtime::image::SNAPSHOTTER;
use crate::runtime::logs::pod_log_dir;

/// A pod that runs, with its running containers.
#[derive(Debug, Clone)]
pub struct Target {
    pod: Arc<Pod>,
    status: Arc<PodStatus>,
    /// Its running containers (init containers too), with their runtime IDs.
    containers: Vec<(ContainerStatus, String)>,
}

impl Target {
    pub fn pod(&self) -> &Pod {
        &self.pod
    }

    /// Its running containers (init containers too).
    pub fn containers(&self) -> impl Iterator<Item = &ContainerStatus> {
        self.containers.iter().map(|(status, _)| status)
    }
}

/// What a pod's cgroup and its running containers' use now, each `None` where the
/// cgroup is gone.
#[derive(Debug, Clone, Default)]
pub struct PodUsage {
    pub own: Option<Usage>,
    /// By running container, in the [`Target`]'s order.
    pub containers: Vec<Option<Usage>>,
}

/// Reads what `target`'s cgroups use: the one reading of a pod's cgroup usage, which the
/// Summary API, cAdvisor's series and `/metrics`' usage collector all take.
pub(super) fn usage(host: &dyn Host, cgroups: &PodCgroups, target: &Target) -> PodUsage {
    let ids = target.containers.iter().map(|(_, id)| id.as_str());
    let (own, containers) = cgroups.usage(host, &target.pod, ids);
    PodUsage { own, containers: containers.into_iter().map(|(_, usage)| usage).collect() }
}

/// The desired pods the workers report, with their running containers.
pub(super) fn targets(sources: &Sources) -> Vec<Target> {
    let snap = sources.snapshot.load();
    snap.pods
        .iter()
        .filter_map(|(_, desired)| {
            let status = sources.statuses.get(pod::uid(desired))?;
            let containers = status
                .container_statuses
                .iter()
                .chain(status.init_container_statuses.iter())
                .flatten()
                .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
                .filter_map(|c| {
                    let id = c.container_id.as_deref()?.rsplit_once("://").map(|(_, id)| id)?;
                    Some((c.clone(), id.to_owned()))
                })
                .collect();
            Some(Target { pod: desired.clone(), status, containers })
        })
        .collect()
}

/// Each running container's writable layer: (bytes, inodes), by container ID.
pub(super) async fn layers(
    containerd: &Containerd,
    targets: &[Target],
) -> HashMap<String, (u64, u64)> {
    let mut layers = HashMap::new();
    for (_, id) in targets.iter().flat_map(|t| &t.containers) {
        let request = UsageRequest { snapshotter: SNAPSHOTTER.to_owned(), key: id.clone() };
        match containerd.snapshots().usage(request).await {
            Ok(usage) => {
                let usage = usage.into_inner();
                let bytes = u64::try_from(usage.size).unwrap_or(0);
                let inodes = u64::try_from(usage.inodes).unwrap_or(0);
                layers.insert(id.clone(), (bytes, inodes));
            }
            Err(e) => tracing::debug!(container_id = id, error = %e, "stats: no snapshot usage"),
        }
    }
    layers
}

/// What a reading needs besides the targets.
pub(super) struct Context<'a> {
    pub sources: &'a Sources,
    pub rates: &'a mut CpuRates,
    /// Monotonic time of this reading (the rates').
    pub now: Duration,
    pub imagefs: Option<&'a Path>,
    pub layers: &'a HashMap<String, (u64, u64)>,
    pub scope: super::Scope,
}

impl Context<'_> {
    /// Whether the disk and network figures are read.
    pub(super) fn all(&self) -> bool {
        self.scope == super::Scope::All
    }
}

/// Reads the node and the targets (blocking).
pub(super) fn read(context: &mut Context<'_>, targets: &[Target]) -> Reading {
    let now = Timestamp::now();
    let time = Time(now);
    let (node, memory_bytes, cpus) = node::node(context, &time);
    let nodefs = node.fs.clone();
    let imagefs = node.runtime.as_ref().and_then(|r| r.image_fs.clone());
    let host = context.sources.host.as_ref();
    let mounts = host.proc_pid_text(Pid::Own, "mounts").unwrap_or_default();
    let imagefs_device =
        context.imagefs.and_then(|root| procfs::mount_source(&mounts, &root.to_string_lossy()));
    let mut pods = Vec::new();
    let mut metas = Vec::new();
    let mut failed = node.cpu.is_none() || node.memory.is_none();
    for target in targets {
        let (stats, meta, ok) = pod(context, target, &time, nodefs.as_ref(), imagefs.as_ref());
        failed |= !ok;
        pods.push(stats);
        metas.push(meta);
    }
    Reading {
        summary: Summary { node, pods },
        pods: metas,
        time: now,
        memory_bytes,
        cpus,
        imagefs_device,
        failed,
    }
}

/// One pod's stats and cAdvisor's extras; `false` when its cgroup could not be read.
fn pod(
    context: &mut Context<'_>,
    target: &Target,
    time: &Time,
    nodefs: Option<&FsStats>,
    imagefs: Option<&FsStats>,
) -> (PodStats, PodMeta, bool) {
    let pod = target.pod.as_ref();
    let uid = pod::uid(pod);
    let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let name = pod.metadata.name.clone().unwrap_or_default();
    let _span =
        tracing::debug_span!("stats", pod.namespace = %namespace, pod.name = %name, pod.uid = uid)
            .entered();
    let start_time = target.status.start_time.clone().unwrap_or_else(|| time.clone());
    let mut meta = PodMeta::default();
    let mut containers = Vec::new();
    let mut own = None;
    let mut pids = Vec::new();
    let logs_dir = pod_log_dir(&context.sources.pod_log_dir, &namespace, &name, uid);
    let host = context.sources.host.as_ref();
    if let Some(cgroups) = context.sources.cgroups.clone() {
        let pod_cgroup = cgroups.pod_name(pod);
        meta.cgroup = cgroups.path(&pod_cgroup);
        let PodUsage { own: pod_usage, containers: by_container } = usage(host, &cgroups, target);
        own = pod_usage;
        for ((status, id), usage) in target.containers.iter().zip(by_container) {
            let cgroup = cgroups.layout().container_cgroup(&pod_cgroup, id);
            if pids.is_empty() {
                pids = cgroups.hierarchy().processes(host, &cgroup);
            }
            let usage = usage.unwrap_or_default();
            let started = status
                .state
                .as_ref()
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.clone())
                .unwrap_or_else(|| start_time.clone());
            let layer = context.layers.get(id).copied();
            let rootfs = layer.map(|(bytes, inodes)| FsStats {
                used_bytes: Some(bytes),
                inodes_used: Some(inodes),
                ..fs_of(imagefs, time)
            });
            let logs = context.all().then(|| {
                let (log_bytes, log_inodes) =
                    crate::eviction::walk(&logs_dir.join(&status.name), None);
                FsStats {
                    used_bytes: Some(log_bytes),
                    inodes_used: Some(log_inodes),
                    ..fs_of(nodefs, time)
                }
            });
            containers.push(ContainerStats {
                name: status.name.clone(),
                start_time: started,
                cpu: usage.cpu_ns.map(|ns| context.cpu(&cgroup, ns, time)),
                memory: Some(node::memory(&usage, time)),
                rootfs,
                logs,
                swap: swap(&usage, time),
            });
            meta.containers.push(container_meta(pod, status, id, cgroup));
        }
    }
    let ok = context.sources.cgroups.is_none() || own.is_some();
    let network = pids.first().filter(|_| context.all()).and_then(|pid| {
        let text = host.proc_pid_text(Pid::Id(*pid), "net/dev").ok()?;
        let interfaces = procfs::net_dev(&text, false);
        (!interfaces.is_empty()).then(|| NetworkStats {
            time: time.clone(),
            default: procfs::default_interface(&interfaces),
            interfaces,
        })
    });
    let volume_stats = if context.all() { volumes(context.sources, pod, time) } else { Vec::new() };
    let ephemeral_parts = containers
        .iter()
        .flat_map(|c| c.rootfs.iter().chain(c.logs.iter()))
        .chain(volume_stats.iter().filter(|v| is_ephemeral(pod, &v.name)).map(|v| &v.fs));
    let ephemeral_storage = FsStats::sum(time.clone(), nodefs, ephemeral_parts);
    let stats = PodStats {
        pod_ref: PodReference { name, namespace, uid: uid.to_owned() },
        start_time,
        containers,
        cpu: own.and_then(|u| u.cpu_ns).map(|ns| context.cpu(&meta.cgroup, ns, time)),
        memory: own.map(|u| node::memory(&u, time)),
        network,
        volume_stats,
        ephemeral_storage,
        process_stats: own.and_then(|u| u.pids).map(|n| ProcessStats { process_count: Some(n) }),
        swap: own.as_ref().and_then(|u| swap(u, time)),
    };
    (stats, meta, ok)
}

/// A part of filesystem `fs`: its capacity and free space, nothing used yet.
fn fs_of(fs: Option<&FsStats>, time: &Time) -> FsStats {
    FsStats {
        used_bytes: None,
        inodes_used: None,
        ..fs.cloned().unwrap_or_else(|| FsStats::at(time.clone()))
    }
}

fn swap(usage: &Usage, time: &Time) -> Option<SwapStats> {
    usage.swap_bytes.map(|bytes| SwapStats {
        time: time.clone(),
        swap_available_bytes: None,
        swap_usage_bytes: Some(bytes),
    })
}

/// A container's cAdvisor extras: its image, ID, cgroup and the limits kubelet gives its
/// cgroup.
fn container_meta(pod: &Pod, status: &ContainerStatus, id: &str, cgroup: String) -> ContainerMeta {
    let spec = pod.spec.as_ref();
    let container = spec.and_then(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .find(|c| c.name == status.name)
    });
    // The limits of a pod of this container alone are the container's own.
    let alone = Pod {
        spec: container.map(|c| k8s_openapi::api::core::v1::PodSpec {
            containers: vec![c.clone()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let config = outpost_core::resource_config::for_pod(&alone, None);
    ContainerMeta {
        image: status.image.clone(),
        id: id.to_owned(),
        cgroup,
        cpu_shares: config.cpu_shares,
        cpu_period: config.cpu_period,
        cpu_quota: config.cpu_quota,
        memory_limit: config.memory_limit,
    }
}

/// Whether volume `name` counts towards the pod's ephemeral storage (the kinds kubelet
/// counts: emptyDir on disk, configMap, secret, downwardAPI, projected).
fn is_ephemeral(pod: &Pod, name: &str) -> bool {
    let volume = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .and_then(|v| v.iter().find(|v| v.name == name));
    volume.is_some_and(|v| {
        v.empty_dir.as_ref().is_some_and(|e| e.medium.as_deref() != Some("Memory"))
            || v.config_map.is_some()
            || v.secret.is_some()
            || v.downward_api.is_some()
            || v.projected.is_some()
    })
}

/// The pod's volumes the agent keeps on the node (emptyDir and the projections; not
/// hostPath, which kubelet does not measure), each measured.
fn volumes(sources: &Sources, pod: &Pod, time: &Time) -> Vec<VolumeStats> {
    let pod_dir = sources.state_dir.join("pods").join(pod::uid(pod));
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let declared = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    declared
        .iter()
        .filter(|v| v.host_path.is_none())
        .filter_map(|volume| {
            let path =
                crate::runtime::spec::layout::source_path(&pod_dir, pod, &volume.name).ok()?;
            if !path.exists() {
                return None;
            }
            let (bytes, inodes) = crate::eviction::walk(&path, None);
            let fs = FsStats {
                used_bytes: Some(bytes),
                inodes_used: Some(inodes),
                ..node::filesystem(&path, time).unwrap_or_else(|| FsStats::at(time.clone()))
            };
            let pvc_ref = volume.persistent_volume_claim.as_ref().map(|claim| PvcReference {
                name: claim.claim_name.clone(),
                namespace: namespace.to_owned(),
            });
            Some(VolumeStats { fs, name: volume.name.clone(), pvc_ref })
        })
        .collect()
}
