//! The status patches the model sends, pure: the JSON merge patch that turns the
//! server's status into the model's (kubelet sends a strategic merge patch of the same
//! two statuses, `PatchNodeStatus`/`PatchPodStatus`; a merge patch replaces lists whole
//! where the strategic one merges them by key, so the bytes differ, not the requests).

use serde_json::{Map, Value};

/// The merge patch from `old` to `new`: changed keys with their new values (objects
/// recursively), removed keys as `null`; `None` when they are equal (kubelet then sends
/// nothing: its patch would be `{}`).
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, value) in new {
                let changed = match old.get(key) {
                    Some(before) => merge_diff(before, value),
                    None => Some(value.clone()),
                };
                if let Some(changed) = changed {
                    patch.insert(key.clone(), changed);
                }
            }
            for key in old.keys().filter(|key| !new.contains_key(*key)) {
                patch.insert(key.clone(), Value::Null);
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (old, new) if old == new => None,
        (_, new) => Some(new.clone()),
    }
}

/// `status` without its conditions' `lastHeartbeatTime`s: what kubelet's
/// `nodeStatusHasChanged` compares.
pub fn without_heartbeats(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for condition in conditions {
            if let Some(condition) = condition.as_object_mut() {
                condition.remove("lastHeartbeatTime");
            }
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn b13_equal_statuses_make_no_patch() {
        let status = json!({ "phase": "Running", "conditions": [{ "type": "Ready" }] });
        assert_eq!(merge_diff(&status, &status), None);
    }

    #[test]
    fn b13_patch_sets_changes_removes_keys_and_replaces_lists() {
        let old = json!({
            "phase": "Pending",
            "containerStatuses": [{ "name": "main", "state": { "waiting": {} } }],
            "hostIP": "127.0.0.1",
            "stale": 1,
        });
        let new = json!({
            "phase": "Running",
            "containerStatuses": [{ "name": "main", "state": { "running": {} } }],
            "hostIP": "127.0.0.1",
            "podIP": "10.0.0.1",
        });
        let patch = merge_diff(&old, &new).unwrap();
        assert_eq!(
            patch,
            json!({
                "phase": "Running",
                "containerStatuses": [{ "name": "main", "state": { "running": {} } }],
                "podIP": "10.0.0.1",
                "stale": null,
            })
        );
        // Applied as a merge patch, it gives the new status.
        let mut applied = old.clone();
        json_patch::merge(&mut applied, &patch);
        assert_eq!(applied, new);
    }

    #[test]
    fn b13_heartbeats_alone_are_no_change() {
        let at = |t: &str| json!({ "conditions": [{ "type": "Ready", "status": "True", "lastHeartbeatTime": t }] });
        assert_ne!(at("1"), at("2"));
        assert_eq!(without_heartbeats(&at("1")), without_heartbeats(&at("2")));
    }
}
