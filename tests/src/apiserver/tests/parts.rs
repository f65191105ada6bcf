//! The pure parts, without HTTP: selectors, patches, the store's history.

use serde_json::{Value, json};

use crate::apiserver::patch::Patch;
use crate::apiserver::resource::{EVENTS, NODES, PODS, parse_path};
use crate::apiserver::selector::Filter;
use crate::apiserver::store::{DeleteOptions, Deleted, Store};

fn pod(name: &str, labels: Value, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": "default", "labels": labels },
        "spec": { "nodeName": node, "containers": [{ "name": "main", "image": "busybox" }] },
    })
}

#[test]
fn label_selectors_follow_the_kubernetes_grammar() {
    let object = pod("a", json!({ "app": "web", "tier": "front", "n": "5" }), "");
    let matches = |selector: &str| {
        Filter::parse(&PODS, None, Some(selector)).unwrap().matches(&PODS, &object)
    };
    assert!(matches("app=web,tier==front"));
    assert!(matches("app in (web, api), env notin (prod)"));
    assert!(matches("app,!env"));
    assert!(matches("n>4,n<6"));
    assert!(!matches("app!=web"));
    assert!(!matches("env"));
    assert!(!matches("app notin (web)"));
    assert!(Filter::parse(&PODS, None, Some("app in web")).is_err());
}

#[test]
fn field_selectors_know_each_resources_fields() {
    let object = pod("a", json!({}), "node-1");
    let matches = |selector: &str| {
        Filter::parse(&PODS, Some(selector), None).unwrap().matches(&PODS, &object)
    };
    assert!(matches("spec.nodeName=node-1,metadata.namespace=default"));
    assert!(matches("status.phase=,spec.hostNetwork=false"));
    assert!(!matches("metadata.name!=a"));
    assert!(Filter::parse(&NODES, Some("metadata.namespace=x"), None).is_err());
    assert!(Filter::parse(&EVENTS, Some("involvedObject.name=a"), None).is_ok());
}

#[test]
fn strategic_merge_patch_honours_merge_keys_and_directives() {
    let object = json!({ "metadata": { "finalizers": ["a"] }, "status": {
        "conditions": [{ "type": "Ready", "status": "False" }, { "type": "Initialized", "status": "True" }],
        "containerStatuses": [{ "name": "c1", "ready": false }],
        "hostIPs": [{ "ip": "10.0.0.1" }],
    }});
    let patch = Patch::Strategic(json!({
        "$setElementOrder/conditions": [{ "type": "Ready" }],
        "metadata": { "finalizers": ["b"] },
        "status": {
            "conditions": [{ "type": "Ready", "status": "True" }, { "type": "Initialized", "$patch": "delete" }],
            "containerStatuses": [{ "name": "c2", "ready": true }],
            "hostIPs": [{ "$patch": "replace" }, { "ip": "10.0.0.2" }],
        },
    }));
    let patched = patch.apply(&object).unwrap();
    assert_eq!(patched["metadata"]["finalizers"], json!(["a", "b"]));
    assert_eq!(patched["status"]["conditions"], json!([{ "type": "Ready", "status": "True" }]));
    assert_eq!(patched["status"]["containerStatuses"].as_array().unwrap().len(), 2);
    assert_eq!(patched["status"]["hostIPs"], json!([{ "ip": "10.0.0.2" }]));
    let merge = Patch::Merge(json!({ "status": { "conditions": null, "phase": "Running" } }));
    let merged = merge.apply(&object).unwrap();
    assert!(merged["status"].get("conditions").is_none());
    assert_eq!(merged["status"]["phase"], "Running");
}

#[test]
fn paths_name_served_resources_only() {
    let target = parse_path("/api/v1/namespaces/default/pods/web/status").unwrap();
    assert_eq!((target.resource.plural, target.subresource.as_deref()), ("pods", Some("status")));
    assert!(parse_path("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n").is_ok());
    assert!(parse_path("/api/v1/pods").is_ok());
    assert!(parse_path("/api/v1/namespaces/default/pods/web/log").is_err());
    assert!(parse_path("/api/v1/namespaces/default/nodes/n").is_err());
    assert!(parse_path("/api/v1/leases").is_err());
    let token = parse_path("/api/v1/namespaces/default/serviceaccounts/default/token").unwrap();
    assert_eq!(token.subresource.as_deref(), Some("token"));
    assert!(parse_path("/api/v1/namespaces/default/pods/web/token").is_err());
    assert!(parse_path("/api/v1/namespaces/default/serviceaccounts/default/status").is_err());
}

#[test]
fn the_store_rolls_back_to_older_versions_and_forgets_past_its_history() {
    let store = Store::new(3);
    let created = store.create(&PODS, Some("default"), pod("a", json!({}), "")).unwrap();
    let at_create: u64 = created["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let no_change = store.update(&PODS, Some("default"), "a", false, |c| Ok(c.clone())).unwrap();
    assert_eq!(no_change, created, "a write that changes nothing is not made");
    store
        .update(&PODS, Some("default"), "a", false, |c| {
            let mut c = c.clone();
            c["metadata"]["labels"] = json!({ "v": "2" });
            Ok(c)
        })
        .unwrap();
    let gone = store.delete(&PODS, Some("default"), "a", &DeleteOptions::default()).unwrap();
    assert!(matches!(gone, Deleted::Gone(_)));
    let (then, rv) = store.objects_at(&PODS, None, Some(at_create)).unwrap();
    assert_eq!((then.len(), rv), (1, at_create));
    assert!(then[0].1["metadata"].get("labels").unwrap().as_object().unwrap().is_empty());
    assert!(store.objects_at(&PODS, None, None).unwrap().0.is_empty());
    for name in ["b", "c", "d"] {
        store.create(&PODS, Some("default"), pod(name, json!({}), "")).unwrap();
    }
    assert_eq!(store.objects_at(&PODS, None, Some(at_create)).unwrap_err().code(), 410);
    assert_eq!(store.events_after(at_create).unwrap_err().code(), 410);
}

#[test]
fn finalizers_hold_a_deleted_object_until_they_are_removed() {
    let store = Store::new(100);
    let mut node = json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "n", "finalizers": ["f"] } });
    store.create(&NODES, None, node.clone()).unwrap();
    let pending = store.delete(&NODES, None, "n", &DeleteOptions::default()).unwrap();
    assert!(
        matches!(&pending, Deleted::Pending(o) if o["metadata"]["deletionTimestamp"].is_string())
    );
    node["metadata"]["finalizers"] = json!([]);
    store.update(&NODES, None, "n", false, |_| Ok(node)).unwrap();
    assert_eq!(store.get(&NODES, None, "n").unwrap_err().code(), 404);
}
