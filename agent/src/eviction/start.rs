//! The eviction manager as the agent starts it (E1, E2): the pods' cgroups where
//! `--cgroup-root` and `--cgroup-driver` put them, once containerd answers.

use outpost_core::eviction::Pressure;
use tokio::sync::{mpsc, watch};
use tracing::{Instrument, info_span};

use super::{Options, PodPlaces, Sources};
use crate::config::node::Node;
use crate::containerd::Connection;
use crate::gc;
use crate::podconfig::SnapshotHandle;
use crate::runtime::cgroups::{Hierarchy, Layout};
use crate::status::StatusStore;
use crate::task::Task;
use crate::worker;

/// What the eviction manager works with.
#[derive(Debug)]
pub struct Deps {
    pub snapshot: SnapshotHandle,
    pub statuses: StatusStore,
    /// Where its choices go: the pod workers (E2).
    pub evict: mpsc::UnboundedSender<worker::Eviction>,
    /// The node's pressure conditions, as it holds them.
    pub pressure: watch::Sender<Pressure>,
    pub metrics: super::metrics::Evictions,
    /// Asked to collect containers and images on disk pressure, before pods are evicted.
    pub gc: gc::Handle,
    /// The host's kernel, as the agent reads it.
    pub host: std::sync::Arc<dyn crate::host::Host>,
}

/// The `eviction_manager` task: the pods' cgroups where `--cgroup-root` and
/// `--cgroup-driver` put them, the state dir as nodefs, containerd's snapshotter root as
/// imagefs.
pub fn build(
    config: outpost_core::eviction::Config,
    node: &Node,
    layout: Layout,
    connection: Connection,
    deps: Deps,
) -> Task {
    let hierarchy = Hierarchy::detect();
    let host = deps.host.clone();
    let mut options = Options {
        config,
        sources: Sources {
            hierarchy: hierarchy.clone(),
            pods_cgroup: layout.pods().path(layout.driver),
            nodefs: node.state_dir.clone(),
            imagefs: None,
            host: host.clone(),
        },
        places: PodPlaces {
            hierarchy,
            layout,
            state_dir: node.state_dir.clone(),
            pod_log_dir: node.pod_log_dir.clone(),
            host,
        },
        snapshot: deps.snapshot,
        statuses: deps.statuses,
        evict: deps.evict,
        pressure: deps.pressure,
        metrics: deps.metrics,
        containerd: None,
        gc: Some(deps.gc),
    };
    Task::infallible("eviction_manager", async move {
        let Some(containerd) = connection.connected().await else { return };
        options.containerd = Some(containerd);
        super::run(options).instrument(info_span!("eviction")).await;
    })
}

/// What the ephemeral-storage monitor works with.
#[derive(Debug)]
pub struct StorageDeps {
    /// The desired pods: those with storage limits are measured.
    pub desired: SnapshotHandle,
    /// Where a pod past its storage limits is evicted.
    pub evictions: mpsc::UnboundedSender<worker::Eviction>,
    pub metrics: super::metrics::Evictions,
}

/// The `storage_monitor` task (E1: the pods' ephemeral-storage limits), once containerd
/// answers.
pub fn storage_monitor(node: &Node, connection: Connection, deps: StorageDeps) -> Task {
    let (pods_dir, pod_log_dir) = (node.state_dir.join("pods"), node.pod_log_dir.clone());
    Task::infallible("storage_monitor", async move {
        let Some(containerd) = connection.connected().await else { return };
        let monitor = super::storage::Monitor {
            containerd,
            pods_dir,
            pod_log_dir,
            desired: deps.desired,
            evictions: deps.evictions,
            metrics: deps.metrics,
        };
        monitor.run().await;
    })
}
