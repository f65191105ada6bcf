//! The sync as the agent starts it, with a kubeconfig: the Node it registers and keeps
//! (K4), and the `sync` task when the agent runs pods.

use std::sync::{Arc, OnceLock};

use outpost_core::eviction::Pressure;
use outpost_core::node_status;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Context, Handle, node};
use crate::apiserver::{self, ApiClient, MirrorView, Recorder};
use crate::config::node::Node;
use crate::podconfig::SnapshotHandle;
use crate::status::{RuntimeReady, StatusStore};
use crate::task::Task;

/// What the Node's task reads from the other components.
#[derive(Debug)]
pub struct NodeDeps {
    /// Whether containerd is connected.
    pub runtime: RuntimeReady,
    /// containerd's version, once connected (the Node's nodeInfo).
    pub runtime_version: Arc<OnceLock<String>>,
    /// Cancelled when the node shuts down (J3).
    pub shutdown: CancellationToken,
    /// The node's pressure conditions, as the eviction manager holds them.
    pub pressure: watch::Receiver<Pressure>,
    /// J2: the managed certificates' status (`client`, `server`).
    pub certificates: Vec<(&'static str, crate::certificates::Status)>,
    /// The host's kernel, as the agent reads it (the machine's facts).
    pub host: Arc<dyn crate::host::Host>,
    /// D1: the device plugins' resources.
    pub devices: watch::Receiver<outpost_core::devices::Capacity>,
}

/// What the Node is registered with and reports; admission's view of it (K4) starts as
/// the Node this agent would register, its allocatable read now.
pub fn node_config(
    node: &Node,
    kubelet_port: u16,
    reservation: node_status::Reservation,
    deps: NodeDeps,
) -> node::Config {
    let config = node::Config {
        labels: node.labels.clone(),
        taints: node.taints.clone(),
        node_ip: node.ip,
        kubelet_port: Some(kubelet_port).filter(|port| *port != 0),
        state_dir: node.state_dir.clone(),
        runtime: deps.runtime,
        runtime_version: deps.runtime_version,
        shutdown: deps.shutdown,
        shutdown_reported: watch::Sender::new(false),
        pressure: deps.pressure,
        reservation,
        max_pods: node.max_pods,
        admission: watch::Sender::new(outpost_core::node_admission::Node::default()),
        certificates: deps.certificates,
        host: deps.host,
        devices: deps.devices,
    };
    config.admission.send_replace(node::initial_admission_node(&config, &node.name));
    config
}

/// What the sync reads and writes besides the Node.
#[derive(Debug)]
pub struct Deps {
    pub client: ApiClient,
    pub mirrors: MirrorView,
    pub snapshot: SnapshotHandle,
    pub statuses: StatusStore,
    pub events: Recorder,
}

/// The sync to the API server (its `sync` task and handle) when the agent runs pods
/// (`node_config` is `None` in a dry run), and the API server's health, which `/status`
/// and the metrics show either way.
pub fn build(
    node: &Node,
    node_config: Option<node::Config>,
    deps: Deps,
) -> (Option<(Handle, Task)>, apiserver::Health) {
    let status_backlog = watch::Sender::<apiserver::StatusBacklog>::default();
    let health = apiserver::Health {
        connectivity: deps.client.connectivity().clone(),
        status_backlog: status_backlog.subscribe(),
    };
    let Some(node_config) = node_config else { return (None, health) };
    let context = Context {
        client: deps.client,
        node_name: node.name.clone(),
        snapshot: deps.snapshot,
        statuses: deps.statuses,
        mirrors: deps.mirrors,
        node: watch::Sender::new(None),
        events: deps.events,
        node_config,
        status_backlog,
        lease_duration_seconds: node.lease_duration_seconds,
    };
    let (handle, task) = super::build(context);
    (Some((handle, Task::infallible("sync", task))), health)
}
