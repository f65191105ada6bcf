//! What the pod resources API (D4) reads on a running node: the pods from the merge's
//! snapshot with their statuses, and the devices from the device manager.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use outpost_core::devices::NO_NUMA_NODE;
use outpost_kubelet_api::podresources::v1;

use crate::devices::Manager;
use crate::devices::podresources::Source;
use crate::podconfig::SnapshotHandle;
use crate::status::StatusStore;

/// The node's pods and devices, as the pod resources API reads them.
#[derive(Debug, Clone)]
pub(super) struct NodePods {
    pub(super) snapshot: SnapshotHandle,
    pub(super) statuses: StatusStore,
    pub(super) devices: Manager,
}

impl Source for NodePods {
    /// The desired pods not finished: a pod the node refused (A1, K4) has the `Failed`
    /// phase, so what is left was admitted (kubelet's `GetActivePods`).
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        let finished = |pod: &Pod| {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            let status = self.statuses.get(uid);
            status.is_some_and(|s| matches!(s.phase.as_deref(), Some("Succeeded" | "Failed")))
        };
        let snapshot = self.snapshot.load();
        snapshot.pods.iter().map(|(_, pod)| pod).filter(|p| !finished(p)).cloned().collect()
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        let snapshot = self.snapshot.load();
        let named = |pod: &&Arc<Pod>| {
            pod.metadata.namespace.as_deref() == Some(namespace)
                && pod.metadata.name.as_deref() == Some(name)
        };
        snapshot.pods.iter().map(|(_, pod)| pod).find(named).cloned()
    }

    fn container_devices(&self, pod_uid: &str, container: &str) -> Vec<v1::ContainerDevices> {
        let held = self.devices.container_allocations(pod_uid, container);
        held.iter()
            .flat_map(|(resource, allocation)| {
                allocation.devices.iter().flat_map(move |(numa, ids)| {
                    let numa = (*numa != NO_NUMA_NODE).then_some(*numa);
                    ids.iter().map(move |id| one_device(resource, id, numa))
                })
            })
            .collect()
    }

    fn allocatable_devices(&self) -> Vec<v1::ContainerDevices> {
        let devices = self.devices.allocatable_devices();
        devices
            .iter()
            .flat_map(|(resource, device)| {
                let numa: Vec<Option<i64>> = match device.numa.as_slice() {
                    [] => vec![None],
                    nodes => nodes.iter().copied().map(Some).collect(),
                };
                numa.into_iter().map(move |numa| one_device(resource, &device.id, numa))
            })
            .collect()
    }
}

/// One device of `resource`, on NUMA node `numa` if the plugin said: kubelet reports each
/// device (and each of its NUMA nodes) as an entry of its own.
fn one_device(resource: &str, id: &str, numa: Option<i64>) -> v1::ContainerDevices {
    v1::ContainerDevices {
        resource_name: resource.to_owned(),
        device_ids: vec![id.to_owned()],
        topology: numa.map(|id| v1::TopologyInfo { nodes: vec![v1::NumaNode { id }] }),
    }
}
