//! The Node object and its status as kubelet registers and reports them, built from the
//! machine's readings with no IO: capacity and allocatable, nodeInfo, addresses, the
//! kubelet endpoint and declared features, conditions ([`conditions`]), the well-known
//! labels, and when a status report is due.
//!
//! Reporting follows kubelet: the status is computed every
//! [`STATUS_UPDATE_FREQUENCY`], but sent only when it changed in a way that matters
//! (anything but the conditions' heartbeat times) or when [`STATUS_REPORT_FREQUENCY`]
//! passed since the last report.

pub mod allocatable;
pub mod conditions;
pub mod machine;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSwapStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

pub use self::allocatable::{Capacity, Reservation};
pub use self::conditions::Conditions;
pub use self::machine::MemInfo;

/// kubelet's default `nodeLeaseDurationSeconds`, and the shortest the agent takes: it
/// renews the Lease on its 10 s beat, which must be at most a quarter of the duration.
pub const NODE_LEASE_DURATION_SECONDS: i32 = 40;

/// kubelet's `nodeStatusUpdateFrequency`: how often the status is computed.
pub const STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);
/// kubelet's `nodeStatusReportFrequency`: the longest time between two reports.
pub const STATUS_REPORT_FREQUENCY: Duration = Duration::from_secs(5 * 60);
/// kubelet's default `maxPods` (K4).
pub const MAX_PODS: u32 = 110;
/// The Kubernetes release whose kubelet Outpost behaves as (the API types it is built
/// with, k8s-openapi's `latest`).
pub const KUBERNETES_VERSION: &str = "1.37.0";

/// `status.declaredFeatures` (KEP-5328, sorted): what the agent does that an API server
/// acts on. `ExtendWebSocketsToKubelet` (KEP-4006, 1.36+): the local API serves kubelet's
/// `/exec` over WebSocket (`v5.channel.k8s.io`), so an API server proxies `kubectl exec`
/// to it as WebSocket instead of translating it to SPDY, which the agent does not speak.
pub const DECLARED_FEATURES: &[&str] = &["ExtendWebSocketsToKubelet"];

pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_OS: &str = "kubernetes.io/os";
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
pub const LABEL_OS_BETA: &str = "beta.kubernetes.io/os";
pub const LABEL_ARCH_BETA: &str = "beta.kubernetes.io/arch";

/// A filesystem's size and free space (for unprivileged users), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    pub capacity: u64,
    pub available: u64,
}

/// PIDs: the limit (the lower of `pid_max` and `threads-max`) and how many are in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidStats {
    pub max: u64,
    pub running: u64,
}

/// Everything the node status is made of, as read from the machine and the agent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Readings {
    /// Online CPUs.
    pub cpus: u32,
    pub memory: Option<MemInfo>,
    /// D6: the swap the node has (`SwapTotal`, bytes): `status.nodeInfo.swap.capacity`.
    pub swap: Option<u64>,
    /// The filesystem of the agent's state dir (nodefs).
    pub nodefs: Option<FsStats>,
    pub pids: Option<PidStats>,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    pub kernel_version: String,
    pub os_image: String,
    /// Go's name of the architecture (`amd64`, `arm64`).
    pub architecture: String,
    /// status.addresses' InternalIP.
    pub node_ip: Option<IpAddr>,
    /// status.addresses' Hostname.
    pub hostname: String,
    /// Whether the container runtime is connected (the Ready condition).
    pub runtime_ready: bool,
    /// The node shuts down and its pods are being stopped (Ready is False then).
    pub shutting_down: bool,
    /// The pressure conditions as the eviction manager holds them.
    pub pressure: crate::eviction::Pressure,
    /// containerd's version, once known.
    pub runtime_version: Option<String>,
    /// The local API's port: `status.daemonEndpoints.kubeletEndpoint`, where the API
    /// server proxies `exec` to (`None`: not known, e.g. `--listen` with port 0).
    pub kubelet_port: Option<u16>,
    /// `--max-pods` (`maxPods`): the node's `pods` capacity and allocatable (K4).
    pub max_pods: u32,
    /// The certificates the node keeps (TLS bootstrapping): the `CertificateExpired`
    /// condition (J2). Empty without: no such condition.
    pub certificates: Vec<crate::certificates::Held>,
    /// When the certificates are judged: the API server's time, as the agent's
    /// certificate manager judges them (a board's clock may be off); `None`: at the
    /// conditions' own time.
    pub certificates_judged_at: Option<std::time::SystemTime>,
    /// D1: the device plugins' resources (capacity: every device; allocatable: the
    /// healthy ones).
    pub devices: crate::devices::Capacity,
}

/// `v1.37.0+outpost-0.1.0` for Outpost 0.1.0: the Kubernetes version whose kubelet it
/// mimics (version skew checks and `kubectl get nodes` read it as such), with Outpost's
/// own version as semver build metadata, as k3s does (`v1.29.3+k3s1`).
pub fn kubelet_version(outpost_version: &str) -> String {
    format!("v{KUBERNETES_VERSION}+outpost-{outpost_version}")
}

/// The node's capacity as the readings give it.
pub fn capacity(readings: &Readings) -> Capacity {
    Capacity {
        cpu_milli: u64::from(readings.cpus) * 1000,
        memory: readings.memory.map(|m| m.total),
        ephemeral_storage: readings.nodefs.map(|fs| fs.capacity),
        pids: readings.pids.map(|p| p.max),
    }
}

/// The status of the node, with the conditions already computed; allocatable is the
/// capacity less `reservation` ([`allocatable`]).
pub fn status(
    readings: &Readings,
    conditions: Vec<NodeCondition>,
    reservation: &Reservation,
    kubelet_version: &str,
) -> NodeStatus {
    let ki = |bytes: u64| Quantity(format!("{}Ki", bytes / 1024));
    let cpu = |milli: u64| {
        Quantity(if milli.is_multiple_of(1000) {
            (milli / 1000).to_string()
        } else {
            format!("{milli}m")
        })
    };
    let node = capacity(readings);
    let free = reservation.allocatable(&node);
    let mut capacity = BTreeMap::new();
    let mut allocatable = BTreeMap::new();
    capacity.insert("cpu".to_owned(), cpu(node.cpu_milli));
    allocatable.insert("cpu".to_owned(), cpu(free.cpu_milli));
    if let (Some(total), Some(free)) = (node.memory, free.memory) {
        capacity.insert("memory".to_owned(), ki(total));
        allocatable.insert("memory".to_owned(), ki(free));
    }
    if let (Some(size), Some(free)) = (node.ephemeral_storage, free.ephemeral_storage) {
        capacity.insert("ephemeral-storage".to_owned(), ki(size));
        allocatable.insert("ephemeral-storage".to_owned(), Quantity(free.to_string()));
    }
    capacity.insert("pods".to_owned(), Quantity(readings.max_pods.to_string()));
    allocatable.insert("pods".to_owned(), Quantity(readings.max_pods.to_string()));
    for (name, count) in &readings.devices.capacity {
        capacity.insert(name.clone(), Quantity(count.to_string()));
    }
    for (name, count) in &readings.devices.allocatable {
        allocatable.insert(name.clone(), Quantity(count.to_string()));
    }
    let mut addresses = Vec::new();
    if let Some(ip) = readings.node_ip {
        addresses.push(NodeAddress { type_: "InternalIP".to_owned(), address: ip.to_string() });
    }
    addresses
        .push(NodeAddress { type_: "Hostname".to_owned(), address: readings.hostname.clone() });
    NodeStatus {
        addresses: Some(addresses),
        daemon_endpoints: readings.kubelet_port.map(|port| NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port: i32::from(port) }),
        }),
        declared_features: Some(DECLARED_FEATURES.iter().map(|f| (*f).to_owned()).collect()),
        capacity: Some(capacity),
        allocatable: Some(allocatable),
        conditions: Some(conditions),
        node_info: Some(NodeSystemInfo {
            architecture: readings.architecture.clone(),
            boot_id: readings.boot_id.clone(),
            container_runtime_version: readings
                .runtime_version
                .as_ref()
                .map(|v| format!("containerd://{v}"))
                .unwrap_or_default(),
            kernel_version: readings.kernel_version.clone(),
            // Deprecated and left empty by kubelet since 1.31.
            kube_proxy_version: String::new(),
            kubelet_version: kubelet_version.to_owned(),
            machine_id: readings.machine_id.clone(),
            operating_system: "linux".to_owned(),
            os_image: readings.os_image.clone(),
            system_uuid: readings.system_uuid.clone(),
            swap: readings.swap.map(|bytes| NodeSwapStatus {
                capacity: Some(i64::try_from(bytes).unwrap_or(i64::MAX)),
            }),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

/// The labels kubelet sets on its Node itself.
pub fn well_known_labels(node_name: &str, architecture: &str) -> BTreeMap<String, String> {
    [
        (LABEL_HOSTNAME, node_name),
        (LABEL_OS, "linux"),
        (LABEL_ARCH, architecture),
        (LABEL_OS_BETA, "linux"),
        (LABEL_ARCH_BETA, architecture),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The Node to register: `--node-labels` with the well-known labels over them,
/// `--register-with-taints`, and the status.
pub fn node(
    name: &str,
    node_labels: &BTreeMap<String, String>,
    taints: &[Taint],
    status: NodeStatus,
) -> Node {
    let architecture = status.node_info.as_ref().map(|i| i.architecture.as_str()).unwrap_or("");
    let mut labels = node_labels.clone();
    labels.extend(well_known_labels(name, architecture));
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: (!taints.is_empty()).then(|| taints.to_vec()),
            ..NodeSpec::default()
        }),
        status: Some(status),
    }
}

/// What kubelet's `updateDefaultLabels` changes on a Node that already exists: the
/// well-known labels whose value differs from `wanted`'s (`None`: nothing to change).
pub fn default_labels_patch(
    wanted: &BTreeMap<String, String>,
    existing: Option<&BTreeMap<String, String>>,
) -> Option<Value> {
    let changed: serde_json::Map<String, Value> =
        [LABEL_HOSTNAME, LABEL_OS, LABEL_ARCH, LABEL_OS_BETA, LABEL_ARCH_BETA]
            .into_iter()
            .filter_map(|key| {
                let value = wanted.get(key)?;
                (existing.and_then(|e| e.get(key)) != Some(value))
                    .then(|| (key.to_owned(), Value::String(value.clone())))
            })
            .collect();
    (!changed.is_empty()).then(|| json!({ "metadata": { "labels": changed } }))
}

/// Whether two statuses differ in anything but the conditions' heartbeat times
/// (kubelet's `nodeStatusHasChanged`).
pub fn changed(reported: &NodeStatus, current: &NodeStatus) -> bool {
    let without_heartbeats = |status: &NodeStatus| {
        let mut status = status.clone();
        for condition in status.conditions.iter_mut().flatten() {
            condition.last_heartbeat_time = None;
        }
        status
    };
    without_heartbeats(reported) != without_heartbeats(current)
}

/// Whether to send `current` now, given the last report (the status sent and when).
pub fn report_due(
    last: Option<(&NodeStatus, Timestamp)>,
    current: &NodeStatus,
    now: Timestamp,
) -> bool {
    let Some((reported, at)) = last else { return true };
    let period = SignedDuration::try_from(STATUS_REPORT_FREQUENCY).unwrap_or_default();
    changed(reported, current) || now.duration_since(at) >= period
}

/// The strategic merge patch of `nodes/{name}/status` that makes the server's status
/// `status`: conditions and addresses merge by type, so addresses the server has and
/// `status` has not are deleted explicitly.
pub fn status_patch(server: Option<&NodeStatus>, status: &NodeStatus) -> Value {
    let mut patch = json!({ "status": status });
    let keep: Vec<&str> = status.addresses.iter().flatten().map(|a| a.type_.as_str()).collect();
    let gone = server
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| !keep.contains(&a.type_.as_str()))
        .map(|a| json!({ "type": a.type_, "$patch": "delete" }));
    if let Some(Value::Array(addresses)) = patch.pointer_mut("/status/addresses") {
        addresses.extend(gone);
    }
    patch
}
