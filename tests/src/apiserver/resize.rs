//! `pods/resize` (K6), as kube-apiserver 1.33 serves it: GET gives the pod; PUT and
//! PATCH (JSON, merge, strategic merge) take only the containers' `resources` and
//! `resizePolicy` from what they are sent, matched by name (`dropNonResizeUpdates`; a
//! sidecar's too, a plain init container's are kept as they were), and the result is
//! checked as `ValidatePodResize` does, in its words:
//! - a mirror pod, or one with pod-level resources, is not resized;
//! - the QoS class may not change;
//! - a pod whose running container reports no `resources` runs on a node without resize;
//! - requests and limits may not be removed, and a memory limit may not be lowered or
//!   added unless the container's memory `resizePolicy` is `RestartContainer`;
//! - only cpu and memory may change; a plain init container's resources not at all.
//!
//! A change bumps `metadata.generation`, as any spec change does.

use k8s_openapi::api::core::v1::Pod;
use outpost_core::qos::qos_class;
use outpost_core::quantity::Quantity;
use serde_json::{Map, Value, json};

use super::error::{Cause, Result};
use super::resource::PODS;
use super::strategy::{check_type, invalid, meta};

/// The subresource's name.
pub const SUBRESOURCE: &str = "resize";

/// The resources a resize may change.
const RESIZABLE: [&str; 2] = ["cpu", "memory"];

/// The pod `old` with the container resources and resize policies of `new`, validated.
pub fn prepare_update(old: &Value, mut new: Value) -> Result<Value> {
    check_type(&PODS, &mut new)?;
    let name = meta(old, "name").unwrap_or_default();
    let updated = take_resize_fields(old, &new);
    if let Some(refusal) = refused_pod(old, &updated) {
        return Err(invalid(&PODS, name, vec![Cause::forbidden("", refusal)]));
    }
    let causes = resize_causes(old, &updated);
    if !causes.is_empty() {
        return Err(invalid(&PODS, name, causes));
    }
    let mut updated = updated;
    if updated != *old {
        let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        updated["metadata"]["generation"] = json!(generation + 1);
    }
    Ok(updated)
}

/// `dropNonResizeUpdates`: `old`, with each container's `resources` and `resizePolicy`
/// from the container of the same name in `new`.
fn take_resize_fields(old: &Value, new: &Value) -> Value {
    let mut updated = old.clone();
    for list in ["containers", "initContainers"] {
        let sent = new.pointer(&format!("/spec/{list}")).and_then(Value::as_array);
        let Some(kept) =
            updated.pointer_mut(&format!("/spec/{list}")).and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in kept.iter_mut().filter_map(Value::as_object_mut) {
            let from = sent.into_iter().flatten().find(|c| c.get("name") == container.get("name"));
            let Some(from) = from else { continue };
            for field in ["resources", "resizePolicy"] {
                match from.get(field) {
                    Some(value) => container.insert(field.to_string(), value.clone()),
                    None => container.remove(field),
                };
            }
        }
    }
    updated
}

/// Why the pod as a whole may not be resized, in kube-apiserver's words.
fn refused_pod(old: &Value, new: &Value) -> Option<&'static str> {
    let pod_level = |pod: &Value| {
        ["requests", "limits"].iter().any(|kind| {
            pod.pointer(&format!("/spec/resources/{kind}"))
                .and_then(Value::as_object)
                .is_some_and(|list| !list.is_empty())
        })
    };
    if pod_level(old) || pod_level(new) {
        return Some("Forbidden: pods with pod-level resources cannot be resized");
    }
    if old.pointer("/metadata/annotations/kubernetes.io~1config.mirror").is_some() {
        return Some("Forbidden: static pods cannot be resized");
    }
    if old.pointer("/spec/os/name").and_then(Value::as_str) == Some("windows") {
        return Some("Forbidden: windows pods cannot be resized");
    }
    None
}

/// `ValidatePodResize`'s checks of the containers, on `new` made by
/// [`take_resize_fields`] from `old`.
fn resize_causes(old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let (old_class, new_class) = (pod_qos(old), qos_class(&as_pod(new)).as_str().to_string());
    if old_class != new_class {
        let value = new.pointer("/status/qosClass").and_then(Value::as_str).unwrap_or_default();
        let message = format!(
            "Invalid value: {value:?}: Pod QOS Class may not change as a result of resizing"
        );
        causes.push(Cause::invalid("spec", message));
    }
    if !resize_supported(old) {
        causes.push(Cause::forbidden(
            "spec",
            "Forbidden: Pod running on node without support for resize",
        ));
    }
    let mut other_changes = Vec::new();
    for list in ["initContainers", "containers"] {
        let pairs = containers(old, list).into_iter().zip(containers(new, list));
        for (i, (before, after)) in pairs.enumerate() {
            let at = format!("spec.{list}[{i}].resources");
            let sidecar = before.get("restartPolicy").and_then(Value::as_str) == Some("Always");
            if list == "initContainers" && !sidecar {
                if before != after {
                    other_changes.push("resources for non-sidecar init containers are immutable");
                }
                continue;
            }
            causes.extend(container_causes(before, after, &at));
            if !same_except_cpu_and_memory(before, after) {
                other_changes.push(if sidecar {
                    "only cpu and memory resources for sidecar containers are mutable"
                } else {
                    "only cpu and memory resources are mutable"
                });
            }
        }
    }
    causes.extend(
        other_changes.into_iter().map(|m| Cause::forbidden("spec", format!("Forbidden: {m}"))),
    );
    causes
}

/// `validateContainerResize`: nothing removed; a memory limit lowered or added only with
/// the `RestartContainer` policy for memory.
fn container_causes(before: &Value, after: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for kind in ["requests", "limits"] {
        let (was, is) = (resource_list(before, kind), resource_list(after, kind));
        if was.keys().any(|name| !is.contains_key(name)) {
            let message = format!("Forbidden: resource {kind} cannot be removed");
            causes.push(Cause::forbidden(&format!("{at}.{kind}"), message));
        }
    }
    let memory_policy = after
        .get("resizePolicy")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|policy| policy.get("resourceName").and_then(Value::as_str) == Some("memory"))
        .and_then(|policy| policy.get("restartPolicy").and_then(Value::as_str))
        .unwrap_or_default();
    if memory_policy == "RestartContainer" {
        return causes;
    }
    let limit = |container: &Value| {
        resource_list(container, "limits").get("memory").and_then(Value::as_str).and_then(nanos)
    };
    let field = format!("{at}.limits[memory]");
    match (limit(before), limit(after)) {
        (Some(was), Some(is)) if is < was => causes.push(Cause::forbidden(
            &field,
            "Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer",
        )),
        (None, Some(_)) => causes.push(Cause::forbidden(
            &field,
            "Forbidden: memory limits cannot be added unless resizePolicy is RestartContainer",
        )),
        _ => {}
    }
    causes
}

/// `dropCPUMemoryResourcesFromContainer`, then semantic equality: `after`, with the cpu
/// and memory of each of `before`'s resource lists, equals `before`.
fn same_except_cpu_and_memory(before: &Value, after: &Value) -> bool {
    let mut munged = after.clone();
    let mut resources = Map::new();
    for kind in ["limits", "requests"] {
        let Some(old_list) =
            before.pointer(&format!("/resources/{kind}")).and_then(Value::as_object)
        else {
            continue;
        };
        let mut list = resource_list(after, kind);
        for name in RESIZABLE {
            list.remove(name);
            if let Some(amount) = old_list.get(name) {
                list.insert(name.to_string(), amount.clone());
            }
        }
        resources.insert(kind.to_string(), Value::Object(list));
    }
    munged["resources"] = Value::Object(resources);
    semantic(before) == semantic(&munged)
}

/// A container as `apiequality.Semantic` compares it: empty resource lists as absent,
/// quantities by value (`1Gi` and `1024Mi` are the same).
fn semantic(container: &Value) -> Value {
    let mut container = container.clone();
    let Some(object) = container.as_object_mut() else { return container };
    let mut resources = Map::new();
    for (kind, list) in
        object.remove("resources").as_ref().and_then(Value::as_object).into_iter().flatten()
    {
        let amounts: Map<String, Value> = list
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, amount)| {
                let value = amount
                    .as_str()
                    .and_then(nanos)
                    .map_or(amount.clone(), |n| json!(n.to_string()));
                (name.clone(), value)
            })
            .collect();
        if !amounts.is_empty() {
            resources.insert(kind.clone(), Value::Object(amounts));
        }
    }
    if !resources.is_empty() {
        object.insert("resources".to_string(), Value::Object(resources));
    }
    container
}

fn containers<'a>(pod: &'a Value, list: &str) -> Vec<&'a Value> {
    pod.pointer(&format!("/spec/{list}")).and_then(Value::as_array).into_iter().flatten().collect()
}

fn resource_list(container: &Value, kind: &str) -> Map<String, Value> {
    container
        .pointer(&format!("/resources/{kind}"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn nanos(text: &str) -> Option<u128> {
    Quantity::parse(text).ok()?.ceil_scaled(9).ok()
}

fn as_pod(pod: &Value) -> Pod {
    serde_json::from_value(pod.clone()).unwrap_or_default()
}

/// `GetPodQOS`: the class in the status, else computed.
fn pod_qos(pod: &Value) -> String {
    match pod.pointer("/status/qosClass").and_then(Value::as_str) {
        Some(class) if !class.is_empty() => class.to_string(),
        _ => qos_class(&as_pod(pod)).as_str().to_string(),
    }
}

/// `isPodResizeRequestSupported`: the first running container reports its resources
/// (a node without resize does not); with none running, assumed.
fn resize_supported(pod: &Value) -> bool {
    let statuses = pod.pointer("/status/containerStatuses").and_then(Value::as_array);
    statuses
        .into_iter()
        .flatten()
        .find(|status| status.pointer("/state/running").is_some())
        .is_none_or(|status| status.get("resources").is_some())
}
