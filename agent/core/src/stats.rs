//! The node's stats and metrics as kubelet serves them (N2), from a [`Reading`] the agent
//! takes (`outpost::stats`: the cgroups, `/proc`, the filesystems, containerd): the
//! shapes, the rates and the text formats, with no IO.
//!
//! - [`summary`]: the Summary API's shapes.
//! - [`rates`]: `usageNanoCores` from two readings, in a bounded cache.
//! - [`procfs`]: the `/proc` files parsed.
//! - [`exposition`]: the Prometheus text format kubelet writes, with timestamps.
//! - [`resource`]: `/metrics/resource` from a summary.
//! - [`cadvisor`]: `/metrics/cadvisor` from a reading.
//! - [`running`]: the pods with running containers, as `/runningpods` lists them.

pub mod cadvisor;
pub mod exposition;
pub mod procfs;
pub mod rates;
pub mod resource;
pub mod running;
pub mod summary;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use self::summary::{NodeStats, Summary};

/// A reading: the Summary, and what cAdvisor's series add about each pod and container.
#[derive(Debug, Clone)]
pub struct Reading {
    pub summary: Summary,
    /// The pods in `summary.pods`' order.
    pub pods: Vec<PodMeta>,
    /// When the reading was taken.
    pub time: Timestamp,
    /// The machine's memory and CPUs.
    pub memory_bytes: u64,
    pub cpus: usize,
    /// The device imagefs is on (`container_fs_*`'s `device`).
    pub imagefs_device: Option<String>,
    /// Whether some figure that should have been read could not be (`scrape_error`).
    pub failed: bool,
}

impl Reading {
    /// A reading that could not be taken at `time`: the node's name, nothing else, failed.
    pub fn failed(node_name: &str, time: Timestamp) -> Reading {
        Reading {
            summary: Summary {
                node: NodeStats {
                    node_name: node_name.to_owned(),
                    system_containers: Vec::new(),
                    start_time: Time(time),
                    cpu: None,
                    memory: None,
                    network: None,
                    fs: None,
                    runtime: None,
                    rlimit: None,
                    swap: None,
                },
                pods: Vec::new(),
            },
            pods: Vec::new(),
            time,
            memory_bytes: 0,
            cpus: 0,
            imagefs_device: None,
            failed: true,
        }
    }
}

/// What cAdvisor's series say of a pod besides its stats.
#[derive(Debug, Clone, Default)]
pub struct PodMeta {
    /// The pod's cgroup path (cAdvisor's `id`).
    pub cgroup: String,
    /// Its containers, in its stats' order.
    pub containers: Vec<ContainerMeta>,
}

/// What cAdvisor's series say of a container besides its stats.
#[derive(Debug, Clone, Default)]
pub struct ContainerMeta {
    pub image: String,
    /// The runtime's container ID (cAdvisor's `name`).
    pub id: String,
    /// Its cgroup path (cAdvisor's `id`).
    pub cgroup: String,
    /// Its limits as its cgroup was given them (kubelet's per-container config).
    pub cpu_shares: u64,
    pub cpu_period: u64,
    pub cpu_quota: Option<i64>,
    pub memory_limit: Option<i64>,
}
