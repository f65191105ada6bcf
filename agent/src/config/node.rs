//! The node as the agent is configured to be it: what every component may need to know
//! of it (its name, its address, its directories) and what it registers with (K4).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Taint;

/// The node this agent is.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The Node's name (lowercased, as kubelet's).
    pub name: String,
    /// Its address: given, or the default route's interface's.
    pub ip: Option<IpAddr>,
    /// Checkpoints, the pods' directories, the managed containerd's data, the PKI.
    pub state_dir: PathBuf,
    /// Sockets and per-boot files (absolute: containerd's shims get paths under it).
    pub run_dir: PathBuf,
    /// The pods' CRI log files (kubelet's `podLogsDir`).
    pub pod_log_dir: PathBuf,
    /// Labels the Node is registered with (besides the well-known ones).
    pub labels: BTreeMap<String, String>,
    /// Taints the Node is registered with.
    pub taints: Vec<Taint>,
    /// `--max-pods` (`maxPods`): the Node's `pods` capacity and allocatable (K4).
    pub max_pods: u32,
    /// `--node-lease-duration-seconds` (`nodeLeaseDurationSeconds`): the node Lease's
    /// duration; it is renewed every quarter of it or sooner.
    pub lease_duration_seconds: i32,
}
