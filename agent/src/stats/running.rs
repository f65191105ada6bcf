//! `/runningpods`: the pods with running containers as kubelet lists them from its
//! runtime: a `v1` `PodList` whose pods carry only their name, namespace and UID and
//! their running containers' names and images. Pure.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use outpost_core::pod;
use serde::Serialize;

/// A `PodList` as kubelet encodes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodList {
    pub kind: &'static str,
    pub api_version: &'static str,
    pub metadata: ObjectMeta,
    pub items: Vec<Pod>,
}

/// The pods of `desired` with at least one running container, by their statuses.
pub fn pod_list<'p>(
    desired: impl IntoIterator<Item = &'p Pod>,
    statuses: &HashMap<String, Arc<PodStatus>>,
) -> PodList {
    let items = desired
        .into_iter()
        .filter_map(|pod| {
            let status = statuses.get(pod::uid(pod))?;
            let containers: Vec<Container> = status
                .container_statuses
                .iter()
                .chain(status.init_container_statuses.iter())
                .flatten()
                .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
                .map(|c| Container {
                    name: c.name.clone(),
                    image: Some(c.image.clone()),
                    ..Container::default()
                })
                .collect();
            (!containers.is_empty()).then(|| Pod {
                metadata: ObjectMeta {
                    name: pod.metadata.name.clone(),
                    namespace: Some(
                        pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
                    ),
                    uid: Some(pod::uid(pod).to_owned()),
                    ..ObjectMeta::default()
                },
                spec: Some(PodSpec { containers, ..PodSpec::default() }),
                status: None,
            })
        })
        .collect();
    PodList { kind: "PodList", api_version: "v1", metadata: ObjectMeta::default(), items }
}

#[cfg(test)]
mod tests {
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
}
