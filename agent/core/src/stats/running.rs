//! `/runningpods`: the pods with running containers as kubelet lists them from its
//! runtime: a `v1` `PodList` whose pods carry only their name, namespace and UID and
//! their running containers' names and images. Pure.

use std::collections::HashMap;
use std::sync::Arc;

use crate::pod;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
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
mod tests;
