//! One Event written to the API server: a POST of a new series, a merge PATCH of `count`
//! and `lastTimestamp` for a series the server has.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::core::Request;
use kube::core::params::{Patch, PatchParams, PostParams};
use outpost_core::event_aggregate::{EventKey, Series};
use serde_json::json;

use super::{REPORTING_COMPONENT, SOURCE_COMPONENT};
use crate::sync::{CallError, Context};

/// Writes `series` and returns the count the server now has.
pub(super) async fn write(
    context: &Context,
    key: &EventKey,
    series: &Series,
) -> Result<u32, CallError> {
    let namespace = namespace(key);
    if series.sent.is_some() {
        patch(context, namespace, series).await?;
        return Ok(series.count);
    }
    let event = event(key, series, &context.node_name);
    // An Event of plain strings and times always serializes.
    let body = serde_json::to_vec(&event).unwrap_or_default();
    let created = context.client.send(collection(namespace).create(&PostParams::default(), body));
    match created.await {
        Ok(_) => Ok(series.count),
        // An earlier POST arrived but its answer did not: the Event is there.
        Err(e) if e.is_already_exists() => {
            patch(context, namespace, series).await?;
            Ok(series.count)
        }
        Err(e) => Err(e),
    }
}

/// Whether writing again later may succeed (else the Event is dropped).
pub(super) fn retriable(error: &CallError) -> bool {
    match error {
        CallError::Status { code, .. } => *code == 429 || *code >= 500,
        CallError::Request(_) => false,
        CallError::Unreachable { .. } | CallError::Body(_) | CallError::Decode(_) => true,
    }
}

async fn patch(context: &Context, namespace: &str, series: &Series) -> Result<(), CallError> {
    let patch = Patch::Merge(json!({
        "count": count(series),
        "lastTimestamp": Time(series.last),
    }));
    let request = collection(namespace).patch(&series.name, &PatchParams::default(), &patch);
    context.client.send(request).await.map(drop)
}

fn collection(namespace: &str) -> Request {
    Request::new(format!("/api/v1/namespaces/{namespace}/events"))
}

/// Events about cluster-scoped objects (the node) go to `default`, as kubelet's do.
fn namespace(key: &EventKey) -> &str {
    match key.object.namespace.as_str() {
        "" => "default",
        namespace => namespace,
    }
}

fn count(series: &Series) -> i32 {
    i32::try_from(series.count).unwrap_or(i32::MAX)
}

/// The core/v1 Event of a series.
pub fn event(key: &EventKey, series: &Series, node_name: &str) -> Event {
    let object = &key.object;
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Event {
        metadata: ObjectMeta {
            name: Some(series.name.clone()),
            namespace: Some(namespace(key).to_owned()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: some(&object.kind),
            namespace: some(&object.namespace),
            name: some(&object.name),
            uid: some(&object.uid),
            field_path: some(&key.field_path),
            ..ObjectReference::default()
        },
        type_: Some(key.kind.as_str().to_owned()),
        reason: Some(key.reason.clone()),
        message: Some(key.message.clone()),
        count: Some(count(series)),
        first_timestamp: Some(Time(series.first)),
        last_timestamp: Some(Time(series.last)),
        source: Some(EventSource {
            component: Some(SOURCE_COMPONENT.to_owned()),
            host: Some(node_name.to_owned()),
        }),
        reporting_component: Some(REPORTING_COMPONENT.to_owned()),
        reporting_instance: Some(node_name.to_owned()),
        ..Event::default()
    }
}
