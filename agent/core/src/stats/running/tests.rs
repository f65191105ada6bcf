use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateWaiting, ContainerStatus,
};

use super::*;

fn pod(name: &str, uid: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("edge".into()),
            uid: Some(uid.into()),
            labels: Some([("app".to_owned(), "x".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

fn status(running: bool) -> Arc<PodStatus> {
    let state = if running {
        ContainerState { running: Some(ContainerStateRunning::default()), ..Default::default() }
    } else {
        ContainerState { waiting: Some(ContainerStateWaiting::default()), ..Default::default() }
    };
    Arc::new(PodStatus {
        phase: Some("Running".into()),
        container_statuses: Some(vec![ContainerStatus {
            name: "c".into(),
            image: "busybox:1".into(),
            state: Some(state),
            ..ContainerStatus::default()
        }]),
        ..PodStatus::default()
    })
}

#[test]
fn n2_runningpods_lists_only_pods_with_running_containers_with_minimal_fields() {
    let pods = [pod("up", "u1"), pod("waiting", "u2"), pod("unknown", "u3")];
    let statuses: HashMap<_, _> =
        [("u1".to_owned(), status(true)), ("u2".to_owned(), status(false))].into();
    let list = pod_list(&pods, &statuses);
    let json = serde_json::to_value(&list).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {},
            "items": [{
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "up", "namespace": "edge", "uid": "u1"},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
            }],
        })
    );
}
