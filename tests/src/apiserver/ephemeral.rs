//! `pods/ephemeralcontainers` (X1), as kube-apiserver serves it: GET gives the pod; PUT
//! and PATCH (JSON, merge, strategic merge) take only `spec.ephemeralContainers` from
//! what they are sent (`dropNonEphemeralContainerUpdates`), which may only add
//! containers: existing ones may not be removed or changed. The new ones are validated
//! in the API server's words (`validateEphemeralContainers`: name and image required,
//! names unique across the pod's containers, the target an existing container, the
//! fields only ephemeral containers may not set), and a mirror pod is refused ("static
//! pods do not support ephemeral containers").

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::error::{Cause, Result};
use super::resource::PODS;
use super::strategy::{check_type, invalid, meta};

/// The subresource's name.
pub const SUBRESOURCE: &str = "ephemeralcontainers";

/// The pod `old` with the ephemeral containers of `new`, validated.
pub fn prepare_update(old: &Value, mut new: Value) -> Result<Value> {
    check_type(&PODS, &mut new)?;
    let name = meta(old, "name").unwrap_or_default();
    let mirror = old.pointer("/metadata/annotations/kubernetes.io~1config.mirror").is_some();
    if mirror {
        let cause =
            Cause::forbidden("", "Forbidden: static pods do not support ephemeral containers");
        return Err(invalid(&PODS, name, vec![cause]));
    }
    let list = |pod: &Value| -> Vec<Value> {
        pod.pointer("/spec/ephemeralContainers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (before, after) = (list(old), list(&new));
    let mut causes = Vec::new();
    let path = "spec.ephemeralContainers";
    for container in &before {
        let name = container.get("name").and_then(Value::as_str).unwrap_or_default();
        let message = match after.iter().find(|c| c.get("name") == container.get("name")) {
            None => {
                format!("Forbidden: existing ephemeral containers {name:?} may not be removed\n")
            }
            Some(now) if now != container => {
                format!("Forbidden: existing ephemeral containers {name:?} may not be changed\n")
            }
            Some(_) => continue,
        };
        causes.push(Cause::forbidden(path, message));
    }
    let others: BTreeSet<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|list| old.pointer(&format!("/spec/{list}")).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    let mut names = others.clone();
    for (i, container) in after.iter().enumerate() {
        let at = format!("{path}[{i}]");
        for field in ["name", "image"] {
            if container.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
                causes.push(Cause::required(&format!("{at}.{field}")));
            }
        }
        let name = container.get("name").and_then(Value::as_str).unwrap_or_default();
        if !name.is_empty() && !names.insert(name) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("{at}.name"),
                message: format!("Duplicate value: {name:?}"),
            });
        }
        let target =
            container.get("targetContainerName").and_then(Value::as_str).unwrap_or_default();
        if !target.is_empty() && !others.contains(target) {
            causes.push(Cause {
                reason: "FieldValueNotFound",
                field: format!("{at}.targetContainerName"),
                message: format!("Not found: {target:?}"),
            });
        }
        for field in outpost_core::ephemeral::forbidden(container, &at) {
            let message = format!("Forbidden: {}", outpost_core::ephemeral::FORBIDDEN);
            causes.push(Cause::forbidden(&field, message));
        }
    }
    if !causes.is_empty() {
        return Err(invalid(&PODS, name, causes));
    }
    let mut updated = old.clone();
    if after.is_empty() {
        if let Some(spec) = updated.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("ephemeralContainers");
        }
    } else {
        updated["spec"]["ephemeralContainers"] = Value::Array(after);
    }
    if updated != *old {
        let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        updated["metadata"]["generation"] = json!(generation + 1);
    }
    Ok(updated)
}
