//! Kubernetes Events (issue 5, item 5).
//! PLACEHOLDER: the interface workers and sources call; written by the events helper.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};

use super::Context;

/// `Normal` or `Warning`, as `Event.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Where events are recorded: cheap to clone, never blocks, works with no API server
/// configured (events are then only kept locally).
#[derive(Debug, Clone, Default)]
pub struct Recorder {}

impl Recorder {
    /// Records an event about `object`.
    pub fn emit(
        &self,
        object: &ObjectReference,
        kind: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let _ = (object, kind, reason, message.into());
    }
}

/// The reference to a pod (or, with `container`, to one of its containers, as kubelet's
/// `spec.containers{name}` field path) that its events are about.
pub fn pod_ref(pod: &Pod, container: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        field_path: container.map(|c| format!("spec.containers{{{c}}}")),
        ..ObjectReference::default()
    }
}

pub async fn run(context: Arc<Context>) {
    let _ = context;
    std::future::pending::<()>().await;
}
