//! One Event written to the API server: a POST of a new series, a merge PATCH of `count`
//! and `lastTimestamp` for a series the server has.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::Request;
use kube::core::params::{Patch, PatchParams, PostParams};
use outpost_core::event_aggregate::{EventKey, Series};
use serde_json::json;

use crate::apiserver::CallError;
use crate::apiserver::events::{count, event, namespace};
use crate::sync::Context;

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

/// Whether writing again later may succeed (else the Event is dropped). A refusal for
/// load (429) is not: Events are the first thing a loaded server is spared.
pub(super) fn retriable(error: &CallError) -> bool {
    match error {
        CallError::Status { code, .. } => *code >= 500,
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
