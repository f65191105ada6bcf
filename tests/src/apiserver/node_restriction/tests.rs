//! NodeRestriction's rules, one test each, named after the function of
//! `noderestriction/admission.go` (Kubernetes 1.33) they follow.

use serde_json::{Value, json};

use super::super::error::Error;
use super::super::resource::{LEASES, NODES, PODS, SERVICEACCOUNTS};
use super::super::store::Store;
use super::*;

const NODE: &str = "edge-1";

fn store() -> (Store, String) {
    let store = Store::new(100);
    let node = store.create(&NODES, None, json!({ "metadata": { "name": NODE } })).unwrap();
    let uid = node["metadata"]["uid"].as_str().unwrap().to_owned();
    for (name, node) in [("web", NODE), ("other", "edge-2")] {
        let pod = json!({ "metadata": { "name": name, "namespace": "default" },
            "spec": { "nodeName": node, "containers": [{ "name": "c", "image": "i" }] } });
        store.create(&PODS, Some("default"), pod).unwrap();
    }
    (store, uid)
}

fn mirror(uid: &str) -> Value {
    json!({
        "metadata": {
            "name": "static-edge-1",
            "namespace": "default",
            "annotations": { "kubernetes.io/config.mirror": "hash" },
            "ownerReferences": [{ "apiVersion": "v1", "kind": "Node", "name": NODE, "uid": uid, "controller": true }],
        },
        "spec": { "nodeName": NODE, "containers": [{ "name": "c", "image": "i" }] },
    })
}

fn message(result: Result<()>) -> String {
    match result {
        Err(Error::Forbidden { problem, .. }) => problem,
        other => panic!("not a refusal: {other:?}"),
    }
}

fn create_pod(store: &Store, pod: &Value) -> Result<()> {
    admit(store, NODE, (&PODS, ""), ("default", ""), Write::Create { object: pod })
}

#[test]
fn admit_pod_create_a_node_creates_only_its_own_mirror_pods() {
    let (store, uid) = store();
    create_pod(&store, &mirror(&uid)).unwrap();
    let mut plain = mirror(&uid);
    plain["metadata"]["annotations"] = json!({});
    assert_eq!(
        message(create_pod(&store, &plain)),
        "pod does not have \"kubernetes.io/config.mirror\" annotation, node \"edge-1\" can only create mirror pods"
    );
    let mut elsewhere = mirror(&uid);
    elsewhere["spec"]["nodeName"] = json!("edge-2");
    assert_eq!(
        message(create_pod(&store, &elsewhere)),
        "node \"edge-1\" can only create pods with spec.nodeName set to itself"
    );
}

#[test]
fn admit_pod_create_the_owner_reference_is_its_node_as_controller() {
    let (store, uid) = store();
    let mut none = mirror(&uid);
    none["metadata"]["ownerReferences"] = json!([]);
    assert!(message(create_pod(&store, &none)).contains("an owner reference set to itself"));
    let mut wrong_uid = mirror(&uid);
    wrong_uid["metadata"]["ownerReferences"][0]["uid"] = json!("not-it");
    assert!(message(create_pod(&store, &wrong_uid)).contains("UID mismatch"));
    let mut not_controller = mirror(&uid);
    not_controller["metadata"]["ownerReferences"][0]["controller"] = json!(false);
    assert!(message(create_pod(&store, &not_controller)).contains("a controller owner reference"));
    let mut blocking = mirror(&uid);
    blocking["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = json!(true);
    assert!(message(create_pod(&store, &blocking)).contains("must not set blockOwnerDeletion"));
}

#[test]
fn admit_pod_create_a_mirror_pod_refers_to_no_api_object() {
    let (store, uid) = store();
    let with = |field: &str, value: Value| {
        let mut pod = mirror(&uid);
        pod["spec"][field] = value;
        message(create_pod(&store, &pod))
    };
    assert!(with("serviceAccountName", json!("app")).contains("reference a service account"));
    let secret = json!([{ "name": "s", "secret": { "secretName": "tls" } }]);
    assert!(with("volumes", secret).contains("reference secrets"));
    let config = json!([{ "name": "c", "configMap": { "name": "settings" } }]);
    assert!(with("volumes", config).contains("reference configmaps"));
    let claim = json!([{ "name": "d", "persistentVolumeClaim": { "claimName": "data" } }]);
    assert!(with("volumes", claim).contains("reference persistentvolumeclaims"));
    let bundle = json!([{ "name": "b", "projected": { "sources": [{ "clusterTrustBundle": { "name": "x", "path": "p" } }] } }]);
    assert!(with("volumes", bundle).contains("reference clustertrustbundles"));
}

#[test]
fn admit_pod_delete_only_pods_bound_to_the_node() {
    let (store, _) = store();
    admit(&store, NODE, (&PODS, ""), ("default", "web"), Write::Delete).unwrap();
    let other = admit(&store, NODE, (&PODS, ""), ("default", "other"), Write::Delete);
    assert_eq!(
        message(other),
        "node \"edge-1\" can only delete pods with spec.nodeName set to itself"
    );
    let missing = admit(&store, NODE, (&PODS, ""), ("default", "gone"), Write::Delete);
    assert!(matches!(missing, Err(Error::NotFound { .. })));
}

#[test]
fn admit_pod_status_only_its_pods_and_never_their_labels() {
    let (store, _) = store();
    let web = store.get(&PODS, Some("default"), "web").unwrap();
    let status = |old: &Value, new: &Value| {
        admit(&store, NODE, (&PODS, "status"), ("default", "web"), Write::Update { old, new })
    };
    let mut running = web.clone();
    running["status"] = json!({ "phase": "Running" });
    status(&web, &running).unwrap();
    let mut relabelled = running.clone();
    relabelled["metadata"]["labels"] = json!({ "app": "x" });
    assert_eq!(
        message(status(&web, &relabelled)),
        "node \"edge-1\" cannot update labels through pod status"
    );
    let other = store.get(&PODS, Some("default"), "other").unwrap();
    assert!(
        message(status(&other, &other))
            .contains("can only update pod status for pods with spec.nodeName set to itself")
    );
}

#[test]
fn admit_pod_eviction_only_its_pods() {
    let (store, _) = store();
    admit(&store, NODE, (&PODS, "eviction"), ("default", "web"), Write::Delete).unwrap();
    let other = admit(&store, NODE, (&PODS, "eviction"), ("default", "other"), Write::Delete);
    assert!(message(other).contains("can only evict pods with spec.nodeName set to itself"));
}

#[test]
fn admit_node_only_its_own_node_without_forbidden_labels() {
    let (store, _) = store();
    let node =
        |name: &str, labels: Value| json!({ "metadata": { "name": name, "labels": labels } });
    let create =
        |object: &Value| admit(&store, NODE, (&NODES, ""), ("", ""), Write::Create { object });
    create(&node(NODE, json!({ "kubernetes.io/hostname": NODE, "example.com/site": "a" })))
        .unwrap();
    assert_eq!(
        message(create(&node("edge-2", json!({})))),
        "node \"edge-1\" is not allowed to modify node \"edge-2\""
    );
    assert_eq!(
        message(create(&node(NODE, json!({ "node-role.kubernetes.io/edge": "" })))),
        "node \"edge-1\" is not allowed to set the following labels: node-role.kubernetes.io/edge"
    );
    let old = node(NODE, json!({ "node-role.kubernetes.io/edge": "" }));
    let new = node(NODE, json!({}));
    let update =
        admit(&store, NODE, (&NODES, ""), ("", NODE), Write::Update { old: &old, new: &new });
    assert_eq!(message(update), "is not allowed to modify labels: node-role.kubernetes.io/edge");
}

#[test]
fn admit_node_taints_are_not_the_node_s_to_change() {
    let (store, _) = store();
    let old = json!({ "metadata": { "name": NODE }, "spec": {} });
    let new = json!({ "metadata": { "name": NODE }, "spec": { "taints": [{ "key": "k", "effect": "NoSchedule" }] } });
    let update =
        admit(&store, NODE, (&NODES, "status"), ("", NODE), Write::Update { old: &old, new: &new });
    assert_eq!(message(update), "node \"edge-1\" is not allowed to modify taints");
}

#[test]
fn get_forbidden_labels_as_kubelet_labels_and_namespaces_say() {
    for allowed in [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "node.kubernetes.io/instance-type",
        "node.kubernetes.io/anything",
        "kubelet.kubernetes.io/x",
        "sub.node.kubernetes.io/x",
        "example.com/role",
        "plain",
    ] {
        assert!(node_may_set(allowed), "{allowed}");
    }
    for forbidden in [
        "node-role.kubernetes.io/edge",
        "node-restriction.kubernetes.io/x",
        "example.node-restriction.kubernetes.io/x",
        "kubernetes.io/role",
        "k8s.io/x",
        "app.kubernetes.io/name",
    ] {
        assert!(!node_may_set(forbidden), "{forbidden}");
    }
}

#[test]
fn admit_lease_its_own_lease_in_kube_node_lease() {
    let (store, _) = store();
    let lease = |name: &str| json!({ "metadata": { "name": name } });
    let create = |ns: &str, object: &Value| {
        admit(&store, NODE, (&LEASES, ""), (ns, ""), Write::Create { object })
    };
    create("kube-node-lease", &lease(NODE)).unwrap();
    assert!(
        message(create("kube-node-lease", &lease("edge-2")))
            .contains("same name as the requesting node")
    );
    assert!(
        message(create("default", &lease(NODE))).contains("\"kube-node-lease\" system namespace")
    );
}

#[test]
fn admit_service_account_tokens_bound_to_its_pods_only() {
    let (store, _) = store();
    let web = store.get(&PODS, Some("default"), "web").unwrap();
    let uid = web["metadata"]["uid"].as_str().unwrap();
    let request = |name: &str, uid: &str| json!({ "spec": { "boundObjectRef": { "apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid } } });
    let token = |object: &Value| {
        admit(
            &store,
            NODE,
            (&SERVICEACCOUNTS, "token"),
            ("default", "app"),
            Write::Create { object },
        )
    };
    token(&request("web", uid)).unwrap();
    assert!(message(token(&json!({ "spec": {} }))).contains("not bound to a pod"));
    assert!(message(token(&request("web", ""))).contains("without a uid"));
    assert!(message(token(&request("web", "stale"))).contains("does not match the UID in record"));
    let other = store.get(&PODS, Some("default"), "other").unwrap();
    let other_uid = other["metadata"]["uid"].as_str().unwrap();
    assert!(message(token(&request("other", other_uid))).contains("scheduled on a different node"));
}
