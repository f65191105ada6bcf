//! The pod resources API (D4) read by a real client, Python's grpcio with stubs generated
//! from the repository's proto (`support/podresources-client.py`), on the socket
//! `outpost::devices::podresources::start` serves. The API reads the pods and their
//! devices from a `Source` filled here with the data structures the device manager and
//! the pod workers hold.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use outpost::devices::podresources::{self, Source};
use outpost::task::Tasks;
use outpost_kubelet_api::podresources::v1;
use outpost_tests::needs;
use outpost_tests::pod_resources::client;
use serde_json::json;

/// Pods, which are active, and each container's devices.
struct Node {
    pods: Vec<Arc<Pod>>,
    active: Vec<String>,
    given: Vec<(String, String, v1::ContainerDevices)>,
    allocatable: Vec<v1::ContainerDevices>,
}

impl Source for Node {
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        let uid = |p: &&Arc<Pod>| p.metadata.uid.clone().unwrap_or_default();
        self.pods.iter().filter(|p| self.active.contains(&uid(p))).cloned().collect()
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        let matches = |p: &&Arc<Pod>| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        };
        self.pods.iter().find(matches).cloned()
    }

    fn container_devices(&self, pod_uid: &str, container: &str) -> Vec<v1::ContainerDevices> {
        self.given
            .iter()
            .filter(|(uid, name, _)| uid == pod_uid && name == container)
            .map(|(_, _, devices)| devices.clone())
            .collect()
    }

    fn allocatable_devices(&self) -> Vec<v1::ContainerDevices> {
        self.allocatable.clone()
    }
}

fn devices(resource: &str, ids: &[&str], numa: Option<i64>) -> v1::ContainerDevices {
    v1::ContainerDevices {
        resource_name: resource.to_owned(),
        device_ids: ids.iter().map(|id| (*id).to_owned()).collect(),
        topology: numa.map(|id| v1::TopologyInfo { nodes: vec![v1::NumaNode { id }] }),
    }
}

fn manifest(yaml: &str) -> Arc<Pod> {
    Arc::new(serde_saphyr::from_str(yaml).unwrap())
}

fn node() -> Node {
    let gateway = manifest(
        "metadata: {name: gateway, namespace: edge, uid: 0b7c-gateway}
spec:
  initContainers:
  - {name: setup, image: busybox}
  - {name: modem, image: busybox, restartPolicy: Always}
  containers:
  - {name: main, image: busybox}
  - {name: ui, image: busybox}
",
    );
    let finished = manifest(
        "metadata: {name: flash, namespace: edge, uid: 0b7c-flash}
spec:
  containers:
  - {name: flasher, image: busybox}
",
    );
    let serial = "example.com/serial";
    Node {
        pods: vec![gateway, finished],
        active: vec!["0b7c-gateway".to_owned()],
        given: vec![
            ("0b7c-gateway".into(), "modem".into(), devices(serial, &["ttyUSB1"], None)),
            ("0b7c-gateway".into(), "main".into(), devices(serial, &["ttyUSB0"], Some(1))),
            ("0b7c-gateway".into(), "main".into(), devices("example.com/gpio", &["chip0"], None)),
            ("0b7c-flash".into(), "flasher".into(), devices(serial, &["ttyUSB1"], None)),
        ],
        allocatable: vec![
            devices(serial, &["ttyUSB0"], Some(1)),
            devices(serial, &["ttyUSB1"], None),
            devices("example.com/gpio", &["chip0"], None),
        ],
    }
}

/// D4: `List`, `Get` and `GetAllocatableResources` as a Python grpcio client reads them:
/// the active pods with their restartable init containers and containers, each
/// container's devices (topology included), no CPUs or memory; any known pod by name;
/// kubelet's error for an unknown one; the node's devices.
#[needs(python_grpc)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d4_a_python_grpc_client_reads_the_pod_resources_api() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("pod-resources/kubelet.sock");
    let task = podresources::start(socket.clone(), Arc::new(node())).unwrap();
    let tasks = Tasks::spawn(vec![task]);
    let gateway = json!({
        "name": "gateway",
        "namespace": "edge",
        "containers": [
            {
                "name": "modem",
                "devices": [{"resource_name": "example.com/serial", "device_ids": ["ttyUSB1"]}],
            },
            {
                "name": "main",
                "devices": [
                    {
                        "resource_name": "example.com/serial",
                        "device_ids": ["ttyUSB0"],
                        "topology": {"nodes": [{"ID": "1"}]},
                    },
                    {"resource_name": "example.com/gpio", "device_ids": ["chip0"]},
                ],
            },
            {"name": "ui"},
        ],
    });
    assert_eq!(client(&socket, &["list"]), json!({"pod_resources": [gateway]}));
    assert_eq!(client(&socket, &["get", "edge", "gateway"]), json!({"pod_resources": gateway}));
    assert_eq!(
        client(&socket, &["get", "edge", "flash"]),
        json!({"pod_resources": {
            "name": "flash",
            "namespace": "edge",
            "containers": [{
                "name": "flasher",
                "devices": [{"resource_name": "example.com/serial", "device_ids": ["ttyUSB1"]}],
            }],
        }})
    );
    assert_eq!(
        client(&socket, &["get", "edge", "missing"]),
        json!({"error": {"code": "UNKNOWN", "details": "pod missing in namespace edge not found"}})
    );
    assert_eq!(
        client(&socket, &["allocatable"]),
        json!({"devices": [
            {
                "resource_name": "example.com/serial",
                "device_ids": ["ttyUSB0"],
                "topology": {"nodes": [{"ID": "1"}]},
            },
            {"resource_name": "example.com/serial", "device_ids": ["ttyUSB1"]},
            {"resource_name": "example.com/gpio", "device_ids": ["chip0"]},
        ]})
    );
    tasks.stop().await;
    assert!(!socket.exists(), "the socket is removed when the API stops");
}
