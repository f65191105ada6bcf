//! The RuntimeClass admission plugin (D5), on pod create, as the real one behaves: a pod
//! whose `runtimeClassName` names no RuntimeClass is refused (403, `pod rejected:
//! RuntimeClass "x" not found`); the class's `overhead.podFixed` becomes the pod's
//! `spec.overhead` (a pod that sets another one is refused); the class's
//! `scheduling.nodeSelector` is merged into the pod's (a different value for one of its
//! keys is refused) and its tolerations are added; a pod that sets `spec.overhead`
//! without a class that defines one is refused. Mirror pods go through it too.
//!
//! Simplified: overheads are compared as written (the real plugin compares quantities:
//! `1000m` equals `1`), and a toleration is added unless the same one is there (the real
//! merge also drops one another covers).

use serde_json::{Value, json};

use super::error::{Error, Result};
use super::resource::{PODS, RUNTIMECLASSES};
use super::store::Store;
use super::strategy::meta;

/// Admits the creation of `pod`, changing it as the plugin does.
pub fn admit_pod(store: &Store, pod: &mut Value) -> Result<()> {
    let name = meta(pod, "name").unwrap_or_default().to_owned();
    let forbidden = |problem: String| Error::Forbidden {
        resource: PODS.group_resource(),
        name: name.clone(),
        problem,
    };
    let spec = &pod["spec"];
    let class_name = spec.get("runtimeClassName").and_then(Value::as_str).map(str::to_owned);
    let pod_overhead =
        spec.get("overhead").filter(|o| o.as_object().is_some_and(|o| !o.is_empty()));
    let pod_overhead = pod_overhead.cloned();
    let class =
        match &class_name {
            None => None,
            Some(class) => Some(store.get(&RUNTIMECLASSES, None, class).map_err(|_| {
                forbidden(format!("pod rejected: RuntimeClass {class:?} not found"))
            })?),
        };
    let class_overhead = class.as_ref().and_then(|c| c.pointer("/overhead/podFixed")).cloned();
    match (&class_overhead, &pod_overhead) {
        (Some(fixed), Some(given)) if fixed != given => {
            return Err(forbidden(
                "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(forbidden(
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
                    .into(),
            ));
        }
        _ => {}
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return Ok(()) };
    if let Some(fixed) = class_overhead {
        spec.insert("overhead".into(), fixed);
    }
    let Some(scheduling) = class.as_ref().and_then(|c| c.get("scheduling")) else { return Ok(()) };
    if let Some(selector) = scheduling.get("nodeSelector").and_then(Value::as_object) {
        let merged = spec.entry("nodeSelector").or_insert_with(|| json!({}));
        let Some(merged) = merged.as_object_mut() else { return Ok(()) };
        for (key, value) in selector {
            match merged.get(key) {
                Some(pod_value) if pod_value != value => {
                    let (class_value, pod_value) = (text(value), text(pod_value));
                    return Err(forbidden(format!(
                        "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {class_value}; \
                         pod.spec.nodeSelector[{key}] = {pod_value}"
                    )));
                }
                _ => {
                    merged.insert(key.clone(), value.clone());
                }
            }
        }
    }
    if let Some(tolerations) = scheduling.get("tolerations").and_then(Value::as_array) {
        let merged = spec.entry("tolerations").or_insert_with(|| json!([]));
        if let Some(merged) = merged.as_array_mut() {
            for toleration in tolerations {
                if !merged.contains(toleration) {
                    merged.push(toleration.clone());
                }
            }
        }
    }
    Ok(())
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_class(class: Value) -> Store {
        let store = Store::new(100);
        store.create(&RUNTIMECLASSES, None, class).unwrap();
        store
    }

    fn pod(spec: Value) -> Value {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        for (key, value) in spec.as_object().into_iter().flatten() {
            pod["spec"][key] = value.clone();
        }
        pod
    }

    fn class() -> Value {
        json!({
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "gpu"}, "handler": "nvidia",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
            "scheduling": {"nodeSelector": {"gpu": "true"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]},
        })
    }

    #[test]
    fn d5_the_class_overhead_and_scheduling_go_into_the_pod() {
        let store = store_with_class(class());
        let mut p = pod(json!({"runtimeClassName": "gpu", "nodeSelector": {"zone": "a"}}));
        admit_pod(&store, &mut p).unwrap();
        assert_eq!(p["spec"]["overhead"], json!({"cpu": "250m", "memory": "120Mi"}));
        assert_eq!(p["spec"]["nodeSelector"], json!({"zone": "a", "gpu": "true"}));
        assert_eq!(p["spec"]["tolerations"], json!([{"key": "gpu", "operator": "Exists"}]));
        let mut same =
            pod(json!({"runtimeClassName": "gpu", "overhead": {"cpu": "250m", "memory": "120Mi"}}));
        admit_pod(&store, &mut same).unwrap();
    }

    #[test]
    fn d5_what_the_plugin_refuses() {
        let store = store_with_class(class());
        for (spec, message) in [
            (json!({"runtimeClassName": "kata"}), "pod rejected: RuntimeClass \"kata\" not found"),
            (
                json!({"runtimeClassName": "gpu", "overhead": {"cpu": "1"}}),
                "Pod's Overhead doesn't match RuntimeClass's defined Overhead",
            ),
            (
                json!({"overhead": {"cpu": "1"}}),
                "Pod Overhead set without corresponding RuntimeClass defined Overhead",
            ),
            (
                json!({"runtimeClassName": "gpu", "nodeSelector": {"gpu": "false"}}),
                "conflict: runtimeClass.scheduling.nodeSelector[gpu] = true; pod.spec.nodeSelector[gpu] = false",
            ),
        ] {
            let error = admit_pod(&store, &mut pod(spec.clone())).unwrap_err().to_string();
            assert!(error.starts_with("pods \"p\" is forbidden: "), "{error}");
            assert!(error.contains(message), "{spec}: {error}");
        }
        admit_pod(&store, &mut pod(json!({}))).unwrap();
    }
}
