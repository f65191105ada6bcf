//! The Summary API's shapes (`/stats/summary`), field for field as kubelet's
//! `stats/v1alpha1` types serialize: camelCase names, optional figures left out when not
//! known, times as RFC 3339. Pure: the values are filled in by `gather`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

/// The node and its pods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub node: NodeStats,
    pub pods: Vec<PodStats>,
}

/// The node as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    pub node_name: String,
    /// kubelet's system containers (`kubelet`, `runtime`, `pods`, `misc`) where the agent
    /// can read them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_containers: Vec<ContainerStats>,
    /// When the node's figures started counting (the boot).
    pub start_time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// The filesystem of the agent's state dir (kubelet's root dir: nodefs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
}

/// The process limits of the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RlimitStats {
    pub time: Time,
    /// The most processes the node can have.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maxpid: Option<i64>,
    /// The processes (tasks) there are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curproc: Option<i64>,
}

/// The container runtime's side of the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// The filesystem images and writable layers are on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
}

/// One pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub pod_ref: PodReference,
    pub start_time: Time,
    pub containers: Vec<ContainerStats>,
    /// The pod's cgroup, containers and overhead together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    #[serde(rename = "volume", default, skip_serializing_if = "Vec::is_empty")]
    pub volume_stats: Vec<VolumeStats>,
    /// Its containers' writable layers and logs and its emptyDir volumes on disk.
    #[serde(rename = "ephemeral-storage", skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<FsStats>,
    #[serde(rename = "process_stats", skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
}

/// The processes of a pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
}

/// One container (or one of kubelet's system containers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    pub start_time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// Its writable layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsStats>,
    /// Its log files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
}

/// Which pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodReference {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

/// One network interface's counters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_errors: Option<u64>,
}

/// A network namespace's interfaces; the default one's counters inline as well.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkStats {
    pub time: Time,
    #[serde(flatten)]
    pub default: InterfaceStats,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceStats>,
}

/// CPU time used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    pub time: Time,
    /// The rate over the window since the previous reading, in nanocores (billionths of
    /// a core); left out when there is no previous reading yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    /// Cumulative, in core-nanoseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
}

/// Memory in use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub time: Time,
    /// The limit (the machine's memory for the node) less the working set; left out
    /// without a limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    #[serde(rename = "rssBytes", skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
}

/// Swap in use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SwapStats {
    pub time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_usage_bytes: Option<u64>,
}

/// One volume of a pod: its filesystem figures and its name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStats {
    #[serde(flatten)]
    pub fs: FsStats,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pvc_ref: Option<PvcReference>,
}

/// The claim a volume comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PvcReference {
    pub name: String,
    pub namespace: String,
}

/// A filesystem, or what one thing uses of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    pub time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// What this thing uses (for a whole filesystem: what is used on it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

impl FsStats {
    /// Nothing known yet but the time.
    pub fn at(time: Time) -> FsStats {
        FsStats {
            time,
            available_bytes: None,
            capacity_bytes: None,
            used_bytes: None,
            inodes_free: None,
            inodes: None,
            inodes_used: None,
        }
    }

    /// The sum of `parts`' used bytes and inodes on one filesystem (the pod's ephemeral
    /// storage: its containers' layers and logs and its emptyDirs), with that
    /// filesystem's capacity and free space from `fs`; `None` when no part is known.
    pub fn sum<'a>(
        time: Time,
        fs: Option<&FsStats>,
        parts: impl IntoIterator<Item = &'a FsStats>,
    ) -> Option<FsStats> {
        let mut total = FsStats::at(time);
        let mut any = false;
        for part in parts {
            if let Some(used) = part.used_bytes {
                total.used_bytes = Some(total.used_bytes.unwrap_or(0).saturating_add(used));
                any = true;
            }
            if let Some(inodes) = part.inodes_used {
                total.inodes_used = Some(total.inodes_used.unwrap_or(0).saturating_add(inodes));
                any = true;
            }
        }
        if !any {
            return None;
        }
        if let Some(fs) = fs {
            total.available_bytes = fs.available_bytes;
            total.capacity_bytes = fs.capacity_bytes;
            total.inodes = fs.inodes;
            total.inodes_free = fs.inodes_free;
        }
        Some(total)
    }
}

/// The query of `/stats/summary`: `only_cpu_and_memory=true` keeps the node's and each
/// pod's and container's cpu and memory and drops the rest (what metrics-server asks for).
pub fn only_cpu_and_memory(query: Option<&str>) -> bool {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .any(|(key, value)| key == "only_cpu_and_memory" && value == "true")
}

impl Summary {
    /// The summary with only cpu and memory, as kubelet's `only_cpu_and_memory=true`
    /// answers: node and pods keep their names, start times, cpu and memory (and the node
    /// its system containers' cpu and memory); containers keep theirs.
    pub fn cpu_and_memory(self) -> Summary {
        let container =
            |c: ContainerStats| ContainerStats { rootfs: None, logs: None, swap: None, ..c };
        let node = NodeStats {
            system_containers: self.node.system_containers.into_iter().map(container).collect(),
            network: None,
            fs: None,
            runtime: None,
            rlimit: None,
            swap: None,
            ..self.node
        };
        let pods = self
            .pods
            .into_iter()
            .map(|pod| PodStats {
                containers: pod.containers.into_iter().map(container).collect(),
                network: None,
                volume_stats: Vec::new(),
                ephemeral_storage: None,
                process_stats: None,
                swap: None,
                ..pod
            })
            .collect();
        Summary { node, pods }
    }
}

#[cfg(test)]
mod tests;
