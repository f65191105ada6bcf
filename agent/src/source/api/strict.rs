//! API pods read with the keys Outpost's Pod type does not know kept in view (S12).
//!
//! The API server may be newer than this Outpost: a pod can carry a field the Pod type
//! here lacks, and reading it into a `Pod` drops the field without a word. Outside a
//! `securityContext` that is kubelet's habit too; inside one, running without a setting
//! could weaken isolation. So each pod is read as JSON first, the unknown keys inside a
//! `securityContext` are listed in the [`UNKNOWN_SECURITY_FIELDS`] annotation, and the
//! pod workers' admission refuses the pod with their paths.

use std::fmt::Debug;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::core::ObjectList;
use outpost_core::admission::UNKNOWN_SECURITY_FIELDS;
use outpost_core::manifest;
use serde::{Deserialize, Deserializer};

use crate::apiserver::watcher::{ListWatch, WatchStream};

/// A pod as the API server sent it, with its unknown security fields annotated.
#[derive(Debug, Clone)]
pub(crate) struct ApiPod(pub(crate) Pod);

impl<'de> Deserialize<'de> for ApiPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ApiPod, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        let unknown: Vec<String> = manifest::unknown_fields(&value)
            .into_iter()
            .filter(|field| manifest::in_security_context(field))
            .collect();
        let mut pod: Pod = serde_json::from_value(value).map_err(serde::de::Error::custom)?;
        if !unknown.is_empty() {
            let annotations = pod.metadata.annotations.get_or_insert_default();
            annotations.insert(UNKNOWN_SECURITY_FIELDS.to_owned(), unknown.join(","));
        }
        Ok(ApiPod(pod))
    }
}

impl k8s_openapi::Resource for ApiPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for ApiPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// The list and watch of pods through [`ApiPod`]: what the API source runs on.
pub(crate) struct StrictPods(pub(crate) Api<ApiPod>);

impl ListWatch<Pod> for StrictPods {
    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<Pod>, kube::Error>> {
        let list = ListWatch::<ApiPod>::list(&self.0, params);
        Box::pin(async move {
            let ObjectList { types, metadata, items } = list.await?;
            Ok(ObjectList { types, metadata, items: items.into_iter().map(|p| p.0).collect() })
        })
    }

    fn watch(
        &self,
        params: &WatchParams,
        version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<Pod>, kube::Error>> {
        let watch = ListWatch::<ApiPod>::watch(&self.0, params, version);
        Box::pin(async move {
            let events = watch.await?;
            Ok(events.map(|event| event.map(pod_event)).boxed())
        })
    }
}

fn pod_event(event: WatchEvent<ApiPod>) -> WatchEvent<Pod> {
    match event {
        WatchEvent::Added(pod) => WatchEvent::Added(pod.0),
        WatchEvent::Modified(pod) => WatchEvent::Modified(pod.0),
        WatchEvent::Deleted(pod) => WatchEvent::Deleted(pod.0),
        WatchEvent::Bookmark(bookmark) => WatchEvent::Bookmark(bookmark),
        WatchEvent::Error(status) => WatchEvent::Error(status),
    }
}

#[cfg(test)]
mod tests;
