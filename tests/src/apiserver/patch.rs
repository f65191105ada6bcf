//! The PATCH body types: JSON merge patch (RFC 7386), strategic merge patch and JSON
//! patch (RFC 6902). Server-side apply is not served (415).
//!
//! Strategic merge patch follows the `patchStrategy`/`patchMergeKey` tags of the core
//! types this server stores (pods, nodes): `conditions` merge by `type`, container
//! statuses and containers by `name`, node `addresses` by `type`, `ownerReferences`
//! by `uid`, `finalizers` as a set, and so on (see [`list_strategy`]); other lists are
//! replaced, as in a merge patch. Directives: `$patch: replace|delete` (in maps and
//! list items), `$retainKeys` and `$deleteFromPrimitiveList/<field>` are honoured;
//! simplified: `$setElementOrder/<field>` is accepted and ignored (merged items keep
//! the stored order, new ones are appended).

use serde_json::{Map, Value};

use super::error::{Error, Result};

/// A PATCH request's body, by its content type.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// `application/merge-patch+json`
    Merge(Value),
    /// `application/strategic-merge-patch+json`
    Strategic(Value),
    /// `application/json-patch+json`
    Json(Value),
}

/// The patch content types served, as a 415 lists them.
pub const PATCH_TYPES: &str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json";

impl Patch {
    /// The patch for a request's `Content-Type` (parameters such as `charset` ignored).
    pub fn from_request(content_type: &str, body: &[u8]) -> Result<Patch> {
        let media_type = content_type.split(';').next().unwrap_or_default().trim();
        let make: fn(Value) -> Patch = match media_type {
            "application/merge-patch+json" => Patch::Merge,
            "application/strategic-merge-patch+json" => Patch::Strategic,
            "application/json-patch+json" => Patch::Json,
            _ => return Err(Error::UnsupportedMediaType(PATCH_TYPES.to_string())),
        };
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| Error::BadRequest(format!("error decoding patch: {e}")))?;
        Ok(make(value))
    }

    /// Applies the patch to a copy of `object`.
    pub fn apply(&self, object: &Value) -> Result<Value> {
        let mut patched = object.clone();
        match self {
            Patch::Merge(patch) => merge(&mut patched, patch),
            Patch::Strategic(patch) => {
                if !patch.is_object() {
                    return Err(Error::BadRequest(
                        "a strategic merge patch must be a JSON object".into(),
                    ));
                }
                strategic(&mut patched, patch, &mut Vec::new());
            }
            Patch::Json(patch) => {
                let operations: json_patch::Patch = serde_json::from_value(patch.clone())
                    .map_err(|e| Error::BadRequest(format!("error decoding JSON patch: {e}")))?;
                json_patch::patch(&mut patched, &operations.0).map_err(|e| Error::Invalid {
                    kind: String::new(),
                    group: String::new(),
                    name: String::new(),
                    causes: vec![super::error::Cause::invalid("", e.to_string())],
                })?;
            }
        }
        if !patched.is_object() {
            return Err(Error::BadRequest("the patch does not leave an object".into()));
        }
        Ok(patched)
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// How a strategic merge patch treats a list field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// Items are maps merged by this key.
    MergeKey(&'static str),
    /// Items are scalars; the patch adds the ones missing (a set union).
    MergeScalars,
}

/// The list strategy of the field at `path` (field names from the object's root,
/// list positions left out), from the core types' `patchStrategy` tags.
pub fn list_strategy(path: &[String]) -> Option<ListStrategy> {
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    let key = match path.as_slice() {
        ["metadata", "ownerReferences"] => "uid",
        ["metadata", "finalizers"] | ["spec", "podCIDRs"] => {
            return Some(ListStrategy::MergeScalars);
        }
        ["spec", "containers" | "initContainers" | "ephemeralContainers"] => "name",
        ["spec", "containers" | "initContainers" | "ephemeralContainers", field] => match *field {
            "env" => "name",
            "ports" => "containerPort",
            "volumeMounts" => "mountPath",
            "volumeDevices" => "devicePath",
            _ => return None,
        },
        ["spec", "volumes" | "imagePullSecrets" | "resourceClaims" | "schedulingGates"] => "name",
        ["spec", "hostAliases"] => "ip",
        ["status", "conditions" | "addresses"] => "type",
        [
            "status",
            "containerStatuses" | "initContainerStatuses" | "ephemeralContainerStatuses",
        ] => "name",
        ["status", "resourceClaimStatuses"] => "name",
        ["status", "podIPs" | "hostIPs"] => "ip",
        _ => return None,
    };
    Some(ListStrategy::MergeKey(key))
}

/// Removes every `$…` directive key, recursively, for values stored as given.
fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn directive(value: &Value) -> Option<&str> {
    value.get("$patch").and_then(Value::as_str)
}

/// Strategic merge of `patch` (an object) into `target`, which sits at `path`.
fn strategic(target: &mut Value, patch: &Value, path: &mut Vec<String>) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if directive(patch) == Some("replace") {
        *target = strip_directives(patch);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else { return };
    for (key, value) in patch_map {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(remove)) =
                (target_map.get_mut(field), value)
            {
                items.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() || directive(value) == Some("delete") {
            target_map.remove(key);
            continue;
        }
        path.push(key.clone());
        let slot = target_map.entry(key.clone()).or_insert(Value::Null);
        match value {
            Value::Object(_) => strategic(slot, value, path),
            Value::Array(items) => merge_list(slot, items, list_strategy(path), path),
            scalar => *slot = scalar.clone(),
        }
        path.pop();
    }
    if let Some(Value::Array(retain)) = patch_map.get("$retainKeys") {
        target_map.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k)));
    }
}

fn merge_list(
    target: &mut Value,
    items: &[Value],
    strategy: Option<ListStrategy>,
    path: &mut Vec<String>,
) {
    let replace = items.iter().any(|i| directive(i) == Some("replace"));
    let (strategy, existing) = match (strategy, target.as_array_mut()) {
        (Some(strategy), Some(existing)) if !replace => (strategy, existing),
        _ => {
            let kept = items.iter().filter(|i| directive(i).is_none()).map(strip_directives);
            *target = Value::Array(kept.collect());
            return;
        }
    };
    match strategy {
        ListStrategy::MergeKey(key) => {
            for item in items {
                let Some(id) = item.get(key) else {
                    existing.push(strip_directives(item));
                    continue;
                };
                let position = existing.iter().position(|e| e.get(key) == Some(id));
                match (directive(item), position) {
                    (Some("delete"), Some(at)) => {
                        existing.remove(at);
                    }
                    (Some("delete"), None) => {}
                    (_, Some(at)) => strategic(&mut existing[at], item, path),
                    (_, None) => existing.push(strip_directives(item)),
                }
            }
        }
        ListStrategy::MergeScalars => {
            for item in items {
                if !existing.contains(item) {
                    existing.push(item.clone());
                }
            }
        }
    }
}
