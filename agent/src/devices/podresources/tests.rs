use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use outpost_core::pace::TokenBucket;
use outpost_kubelet_api::podresources::v1;
use outpost_kubelet_api::podresources::v1::pod_resources_lister_client::PodResourcesListerClient;
use tonic::Code;
use tonic::transport::Channel;

use super::{BURST, QPS, Source, admit, start};
use crate::task::Tasks;

/// Pods and devices as the manager would hold them.
struct Table {
    pods: Vec<Arc<Pod>>,
    active: Vec<&'static str>,
    devices: HashMap<(&'static str, &'static str), Vec<v1::ContainerDevices>>,
}

impl Source for Table {
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        let uid = |p: &Arc<Pod>| p.metadata.uid.clone().unwrap_or_default();
        self.pods.iter().filter(|p| self.active.contains(&uid(p).as_str())).cloned().collect()
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods
            .iter()
            .find(|p| {
                p.metadata.namespace.as_deref() == Some(namespace)
                    && p.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }

    fn container_devices(&self, pod_uid: &str, container: &str) -> Vec<v1::ContainerDevices> {
        self.devices
            .iter()
            .find(|((uid, name), _)| *uid == pod_uid && *name == container)
            .map(|(_, devices)| devices.clone())
            .unwrap_or_default()
    }

    fn allocatable_devices(&self) -> Vec<v1::ContainerDevices> {
        vec![
            devices("example.com/serial", &["serial0"]),
            devices("example.com/serial", &["serial1"]),
        ]
    }
}

fn devices(resource: &str, ids: &[&str]) -> v1::ContainerDevices {
    v1::ContainerDevices {
        resource_name: resource.to_owned(),
        device_ids: ids.iter().map(|id| (*id).to_owned()).collect(),
        topology: None,
    }
}

fn pod(namespace: &str, name: &str, uid: &str, spec: serde_json::Value) -> Arc<Pod> {
    let pod = serde_json::json!({
        "metadata": { "namespace": namespace, "name": name, "uid": uid },
        "spec": spec,
    });
    Arc::new(serde_json::from_value(pod).unwrap())
}

fn table() -> Table {
    let gateway = pod(
        "default",
        "gateway",
        "uid-gateway",
        serde_json::json!({
            "initContainers": [
                { "name": "setup", "image": "busybox" },
                { "name": "proxy", "image": "busybox", "restartPolicy": "Always" },
            ],
            "containers": [
                { "name": "main", "image": "busybox" },
                { "name": "metrics", "image": "busybox" },
            ],
        }),
    );
    let done = pod(
        "default",
        "done",
        "uid-done",
        serde_json::json!({ "containers": [{ "name": "job", "image": "busybox" }] }),
    );
    Table {
        pods: vec![gateway, done],
        active: vec!["uid-gateway"],
        devices: HashMap::from([
            (("uid-gateway", "main"), vec![devices("example.com/serial", &["serial0"])]),
            (("uid-gateway", "proxy"), vec![devices("example.com/serial", &["serial1"])]),
            (("uid-gateway", "setup"), vec![devices("example.com/serial", &["serial1"])]),
            (("uid-done", "job"), vec![devices("example.com/serial", &["serial1"])]),
        ]),
    }
}

async fn serve(socket: &Path, source: Table) -> (Tasks, PodResourcesListerClient<Channel>) {
    let tasks = Tasks::spawn(vec![start(socket.to_owned(), Arc::new(source)).unwrap()]);
    let channel = containerd_client::connect(socket).await.unwrap();
    (tasks, PodResourcesListerClient::new(channel))
}

fn names(resources: &v1::PodResources) -> Vec<(&str, Vec<&str>)> {
    resources
        .containers
        .iter()
        .map(|c| {
            let ids = c.devices.iter().flat_map(|d| d.device_ids.iter().map(String::as_str));
            (c.name.as_str(), ids.collect())
        })
        .collect()
}

/// D4: `List` answers the active pods only, each with its restartable init containers
/// (not the others) then its containers, their devices, and no CPUs or memory.
#[tokio::test]
async fn d4_list_answers_active_pods_with_sidecars_and_devices() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("pod-resources/kubelet.sock");
    let (tasks, mut client) = serve(&socket, table()).await;
    let list = client.list(v1::ListPodResourcesRequest {}).await.unwrap().into_inner();
    assert_eq!(list.pod_resources.len(), 1, "{list:?}");
    let gateway = &list.pod_resources[0];
    assert_eq!((gateway.namespace.as_str(), gateway.name.as_str()), ("default", "gateway"));
    assert_eq!(
        names(gateway),
        [("proxy", vec!["serial1"]), ("main", vec!["serial0"]), ("metrics", vec![])]
    );
    assert!(gateway.containers.iter().all(|c| c.cpu_ids.is_empty() && c.memory.is_empty()));
    tasks.stop().await;
}

/// D4: `Get` answers a pod the node knows, active or not, and kubelet's error for one
/// it does not.
#[tokio::test]
async fn d4_get_answers_a_known_pod_and_kubelet_s_error_for_an_unknown_one() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("kubelet.sock");
    let (tasks, mut client) = serve(&socket, table()).await;
    let get = |namespace: &str, name: &str| v1::GetPodResourcesRequest {
        pod_namespace: namespace.to_owned(),
        pod_name: name.to_owned(),
    };
    let answer = client.get(get("default", "done")).await.unwrap().into_inner();
    let done = answer.pod_resources.unwrap();
    assert_eq!(names(&done), [("job", vec!["serial1"])]);
    let error = client.get(get("default", "missing")).await.unwrap_err();
    assert_eq!(error.code(), Code::Unknown);
    assert_eq!(error.message(), "pod missing in namespace default not found");
    let error = client.get(get("kube-system", "gateway")).await.unwrap_err();
    assert_eq!(error.message(), "pod gateway in namespace kube-system not found");
    tasks.stop().await;
}

/// D4: `GetAllocatableResources` answers the manager's devices, no CPUs or memory.
#[tokio::test]
async fn d4_allocatable_resources_are_the_devices() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("kubelet.sock");
    let (tasks, mut client) = serve(&socket, table()).await;
    let request = v1::AllocatableResourcesRequest {};
    let answer = client.get_allocatable_resources(request).await.unwrap().into_inner();
    assert_eq!(
        answer.devices,
        [devices("example.com/serial", &["serial0"]), devices("example.com/serial", &["serial1"])]
    );
    assert!(answer.cpu_ids.is_empty() && answer.memory.is_empty());
    tasks.stop().await;
}

/// D4: kubelet's rate limit, 10 calls at once and 100 a second, refused past it with
/// `ResourceExhausted`.
#[test]
fn d4_calls_are_rate_limited_as_kubelet_s() {
    let mut bucket = TokenBucket::new(QPS, BURST, Duration::ZERO);
    for _ in 0..10 {
        admit(&mut bucket, Duration::ZERO).unwrap();
    }
    let refused = admit(&mut bucket, Duration::ZERO).unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(refused.message(), "rejected by rate limit");
    admit(&mut bucket, Duration::from_millis(10)).unwrap();
    assert!(admit(&mut bucket, Duration::from_millis(10)).is_err());
    for _ in 0..10 {
        admit(&mut bucket, Duration::from_secs(5)).unwrap();
    }
    assert!(admit(&mut bucket, Duration::from_secs(5)).is_err());
}

/// D4: the socket's directory is made (0750), a stale socket file replaced, and the
/// socket removed once the task stops.
#[tokio::test]
async fn d4_the_socket_is_made_in_place_and_removed_at_the_end() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("pod-resources/kubelet.sock");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    std::fs::write(&socket, "stale").unwrap();
    let fresh = dir.path().join("fresh/pod-resources/kubelet.sock");
    let (tasks, mut client) = serve(&fresh, table()).await;
    let mode = std::fs::metadata(fresh.parent().unwrap()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o750);
    client.list(v1::ListPodResourcesRequest {}).await.unwrap();
    tasks.stop().await;
    let (tasks, mut client) = serve(&socket, table()).await;
    assert!(std::fs::symlink_metadata(&socket).unwrap().file_type().is_socket());
    client.list(v1::ListPodResourcesRequest {}).await.unwrap();
    tasks.stop().await;
    assert!(!socket.exists() && !fresh.exists(), "the sockets are removed once the tasks stop");
}
