//! The Node authorizer's rules, one test each, named after the source they follow
//! (`node_authorizer.go`, `graph.go`, `bootstrappolicy/policy.go`, Kubernetes 1.33).

use serde_json::{Value, json};

use super::super::authn::User;
use super::super::resource::{PERSISTENTVOLUMES, PODS};
use super::super::store::Store;
use super::*;

const NODE: &str = "edge-1";

/// A store with a pod on `edge-1` that refers to a Secret, a ConfigMap, a claim (bound
/// to `pv-data`) and the service account `app`; and a pod on another node.
fn store() -> Store {
    let store = Store::new(100);
    let pod = |name: &str, node: &str, spec: Value| {
        let mut spec = spec;
        spec["nodeName"] = json!(node);
        spec["containers"] = json!([{ "name": "main", "image": "busybox",
            "env": [{ "name": "A", "valueFrom": { "secretKeyRef": { "name": "env-secret", "key": "a" } } }],
            "envFrom": [{ "configMapRef": { "name": "env-config" } }],
        }]);
        json!({ "metadata": { "name": name, "namespace": "default" }, "spec": spec })
    };
    let mine = pod(
        "web",
        NODE,
        json!({
            "serviceAccountName": "app",
            "imagePullSecrets": [{ "name": "registry" }],
            "volumes": [
                { "name": "certs", "secret": { "secretName": "tls" } },
                { "name": "config", "configMap": { "name": "settings" } },
                { "name": "data", "persistentVolumeClaim": { "claimName": "data" } },
                { "name": "scratch", "ephemeral": { "volumeClaimTemplate": { "spec": {} } } },
                { "name": "token", "projected": { "sources": [
                    { "configMap": { "name": "kube-root-ca.crt" } },
                    { "secret": { "name": "projected-secret" } },
                ] } },
            ],
        }),
    );
    store.create(&PODS, Some("default"), mine).unwrap();
    let theirs = pod(
        "other",
        "edge-2",
        json!({ "volumes": [{ "name": "s", "secret": { "secretName": "theirs" } }] }),
    );
    store.create(&PODS, Some("default"), theirs).unwrap();
    let volume = json!({
        "metadata": { "name": "pv-data" },
        "spec": {
            "claimRef": { "namespace": "default", "name": "data" },
            "csi": { "driver": "x", "volumeHandle": "h", "nodePublishSecretRef": { "name": "csi-secret", "namespace": "default" } },
        },
    });
    store.create(&PERSISTENTVOLUMES, None, volume).unwrap();
    store
}

fn attrs(verb: &str, resource: &'static str, namespace: &str, name: &str) -> Attributes {
    let group = if resource == "leases" { "coordination.k8s.io" } else { "" };
    Attributes {
        verb: verb.into(),
        resource,
        group,
        namespace: namespace.into(),
        name: name.into(),
        ..Attributes::default()
    }
}

fn allowed(store: &Store, attrs: &Attributes) -> bool {
    authorize(store, NODE, attrs).is_ok()
}

fn reason(store: &Store, attrs: &Attributes) -> String {
    authorize(store, NODE, attrs).expect_err("refused")
}

#[test]
fn nodeidentifier_a_node_is_system_node_name_in_the_system_nodes_group() {
    let user = |name: &str, groups: Value| User(json!({ "username": name, "groups": groups }));
    assert_eq!(node_identity(&user("system:node:edge-1", json!(["system:nodes"]))), Some("edge-1"));
    assert_eq!(node_identity(&user("system:node:edge-1", json!(["system:authenticated"]))), None);
    assert_eq!(node_identity(&user("admin", json!(["system:nodes"]))), None);
    assert_eq!(node_identity(&user("system:node:", json!(["system:nodes"]))), Some(""));
}

#[test]
fn node_authorizer_an_unidentified_node_is_refused() {
    assert!(authorize(&store(), "", &attrs("get", "services", "default", "x")).is_err());
}

#[test]
fn node_authorizer_secrets_and_configmaps_of_its_pods_only_by_name() {
    let store = store();
    for name in ["tls", "registry", "env-secret", "projected-secret"] {
        assert!(allowed(&store, &attrs("get", "secrets", "default", name)), "{name}");
        assert!(allowed(&store, &attrs("watch", "secrets", "default", name)), "{name}");
    }
    for name in ["settings", "env-config", "kube-root-ca.crt"] {
        assert!(allowed(&store, &attrs("list", "configmaps", "default", name)), "{name}");
    }
    let refused = reason(&store, &attrs("get", "secrets", "default", "theirs"));
    assert_eq!(refused, "no relationship found between node 'edge-1' and this object");
    assert_eq!(reason(&store, &attrs("list", "secrets", "default", "")), "No Object name found");
    let write = reason(&store, &attrs("update", "secrets", "default", "tls"));
    assert_eq!(write, "can only read resources of this type");
    let cluster_wide = reason(&store, &attrs("list", "configmaps", "", "settings"));
    assert_eq!(cluster_wide, "can only read namespaced object of this type");
}

#[test]
fn request_info_a_list_with_a_metadata_name_field_selector_names_its_object() {
    let target = Target {
        resource: &super::super::resource::SECRETS,
        namespace: Some("default".into()),
        name: None,
        subresource: None,
    };
    let query = [("fieldSelector".to_owned(), "metadata.name=tls".to_owned())];
    let attrs = Attributes::of_request(Some(&target), None, "watch", "/", &query);
    assert_eq!(attrs.name, "tls");
    assert!(allowed(&store(), &attrs));
    let not_equal = [("fieldSelector".to_owned(), "metadata.name!=tls".to_owned())];
    let attrs = Attributes::of_request(Some(&target), None, "list", "/", &not_equal);
    assert_eq!(attrs.name, "");
}

#[test]
fn node_authorizer_claims_and_volumes_can_only_be_got() {
    let store = store();
    assert!(allowed(&store, &attrs("get", "persistentvolumeclaims", "default", "data")));
    assert!(allowed(&store, &attrs("get", "persistentvolumeclaims", "default", "web-scratch")));
    assert!(allowed(&store, &attrs("get", "persistentvolumes", "", "pv-data")));
    for verb in ["list", "watch"] {
        let refused = reason(&store, &attrs(verb, "persistentvolumeclaims", "default", "data"));
        assert_eq!(refused, "can only get individual resources of this type");
        let refused = reason(&store, &attrs(verb, "persistentvolumes", "", "pv-data"));
        assert_eq!(refused, "can only get individual resources of this type");
    }
    assert!(!allowed(&store, &attrs("get", "persistentvolumeclaims", "default", "unrelated")));
}

#[test]
fn graph_add_pv_a_volume_s_kubelet_visible_secret_reaches_the_node() {
    assert!(allowed(&store(), &attrs("get", "secrets", "default", "csi-secret")));
}

#[test]
fn graph_add_pod_a_mirror_pod_grants_nothing_beyond_itself() {
    let store = Store::new(10);
    let mirror = json!({
        "metadata": { "name": "static-web-edge-1", "namespace": "default",
            "annotations": { "kubernetes.io/config.mirror": "abc" } },
        "spec": { "nodeName": NODE, "containers": [{ "name": "c", "image": "i" }],
            "volumes": [{ "name": "s", "secret": { "secretName": "tls" } }] },
    });
    store.create(&PODS, Some("default"), mirror).unwrap();
    assert!(!allowed(&store, &attrs("get", "secrets", "default", "tls")));
    assert!(allowed(&store, &attrs("get", "pods", "default", "static-web-edge-1")));
}

#[test]
fn graph_a_node_without_pods_is_unknown() {
    let store = Store::new(10);
    let refused = reason(&store, &attrs("get", "secrets", "default", "tls"));
    assert_eq!(refused, "no relationship found between node 'edge-1' and this object");
}

#[test]
fn node_authorizer_tokens_only_for_its_pods_service_accounts() {
    let store = store();
    let mut token = attrs("create", "serviceaccounts", "default", "app");
    token.subresource = "token".into();
    assert!(allowed(&store, &token));
    token.name = "default".into();
    assert!(!allowed(&store, &token));
    let get = attrs("get", "serviceaccounts", "default", "app");
    assert_eq!(reason(&store, &get), "can only create tokens for individual service accounts");
}

#[test]
fn node_authorizer_its_own_lease_in_kube_node_lease() {
    let store = store();
    assert!(allowed(&store, &attrs("create", "leases", "kube-node-lease", "")));
    assert!(allowed(&store, &attrs("update", "leases", "kube-node-lease", NODE)));
    let other = reason(&store, &attrs("get", "leases", "kube-node-lease", "edge-2"));
    assert_eq!(other, "can only access node lease with the same name as the requesting node");
    let elsewhere = reason(&store, &attrs("get", "leases", "default", NODE));
    assert_eq!(elsewhere, "can only access leases in the \"kube-node-lease\" system namespace");
    let list = reason(&store, &attrs("list", "leases", "kube-node-lease", NODE));
    assert_eq!(list, "can only get, create, update, patch, or delete a node lease");
}

#[test]
fn authorize_node_with_selectors_only_its_own_node_is_read() {
    let store = store();
    assert!(allowed(&store, &attrs("get", "nodes", "", NODE)));
    assert!(allowed(&store, &attrs("watch", "nodes", "", NODE)));
    assert!(allowed(&store, &attrs("create", "nodes", "", "")));
    let mut status = attrs("patch", "nodes", "", NODE);
    status.subresource = "status".into();
    assert!(allowed(&store, &status));
    let all = reason(&store, &attrs("list", "nodes", "", ""));
    assert_eq!(all, "node 'edge-1' cannot read all nodes, only its own Node object");
    let other = reason(&store, &attrs("get", "nodes", "", "edge-2"));
    assert_eq!(other, "node 'edge-1' cannot read 'edge-2', only its own Node object");
}

#[test]
fn authorize_pod_with_selectors_its_pods_by_node_name_selector() {
    let store = store();
    let mut watch = attrs("watch", "pods", "", "");
    watch.fields = vec![("spec.nodeName".into(), NODE.into())];
    assert!(allowed(&store, &watch));
    watch.fields = vec![("spec.nodeName".into(), "edge-2".into())];
    assert_eq!(
        reason(&store, &watch),
        "can only list/watch pods with spec.nodeName field selector"
    );
    assert!(allowed(&store, &attrs("get", "pods", "default", "web")));
    assert!(!allowed(&store, &attrs("get", "pods", "default", "other")));
    for (verb, sub) in [("create", ""), ("delete", ""), ("patch", "status"), ("create", "eviction")]
    {
        let mut write = attrs(verb, "pods", "default", "web");
        write.subresource = sub.into();
        assert!(allowed(&store, &write), "{verb} {sub}");
    }
}

#[test]
fn node_rules_services_events_reviews_and_csrs() {
    let store = store();
    let mut rules = vec![
        attrs("list", "services", "default", ""),
        attrs("watch", "services", "", ""),
        attrs("create", "events", "default", ""),
        attrs("patch", "events", "default", "e"),
        attrs("get", "endpoints", "default", "e"),
    ];
    let mut group = |verb: &str, group: &'static str, resource: &'static str| {
        let mut a = attrs(verb, resource, "", "");
        a.group = group;
        rules.push(a);
    };
    group("create", "authentication.k8s.io", "tokenreviews");
    group("create", "authorization.k8s.io", "subjectaccessreviews");
    group("create", "certificates.k8s.io", "certificatesigningrequests");
    group("list", "certificates.k8s.io", "certificatesigningrequests");
    group("watch", "certificates.k8s.io", "certificatesigningrequests");
    group("create", "authentication.k8s.io", "selfsubjectreviews");
    for a in &rules {
        assert!(allowed(&store, a), "{a:?}");
    }
    let refused = [
        attrs("delete", "events", "default", "e"),
        attrs("create", "services", "default", ""),
        attrs("list", "endpoints", "default", ""),
    ];
    for a in &refused {
        assert!(!allowed(&store, a), "{a:?}");
    }
    let mut events_v1 = attrs("create", "events", "default", "");
    events_v1.group = "events.k8s.io";
    assert!(!allowed(&store, &events_v1), "events.k8s.io is not in the node's rules");
}

#[test]
fn system_discovery_paths_are_read_by_every_authenticated_user() {
    let path = |verb: &str, path: &str| Attributes {
        verb: verb.into(),
        path: path.into(),
        ..Attributes::default()
    };
    assert!(allowed(&store(), &path("get", "/version")));
    assert!(allowed(&store(), &path("get", "/apis/coordination.k8s.io/v1")));
    assert!(!allowed(&store(), &path("get", "/logs")));
    assert!(!allowed(&store(), &path("post", "/api")));
}

#[test]
fn responsewriters_forbidden_names_the_user_the_request_and_the_reason() {
    let user = User(json!({ "username": "system:node:edge-1", "groups": ["system:nodes"] }));
    let a = attrs("get", "secrets", "default", "theirs");
    let error = forbidden(&user, &a, "no relationship found between node 'edge-1' and this object");
    assert_eq!(
        error.to_string(),
        "secrets \"theirs\" is forbidden: User \"system:node:edge-1\" cannot get resource \
         \"secrets\" in API group \"\" in the namespace \"default\": no relationship found \
         between node 'edge-1' and this object"
    );
    assert_eq!(error.code(), 403);
    let list = attrs("list", "nodes", "", "");
    assert_eq!(
        forbidden(&user, &list, "").to_string(),
        "nodes is forbidden: User \"system:node:edge-1\" cannot list resource \"nodes\" in API \
         group \"\" at the cluster scope"
    );
}

/// D5: `bootstrappolicy.NodeRules()` lets a node read any RuntimeClass, and no more.
#[test]
fn node_rules_runtime_classes_are_read_only() {
    let store = store();
    let class = |verb: &str, name: &str| {
        let mut a = attrs(verb, "runtimeclasses", "", name);
        a.group = "node.k8s.io";
        a
    };
    for a in [class("get", "gpu"), class("list", "gpu"), class("watch", ""), class("list", "")] {
        assert!(allowed(&store, &a), "{a:?}");
    }
    for a in [class("create", ""), class("update", "gpu"), class("delete", "gpu")] {
        assert!(!allowed(&store, &a), "{a:?}");
    }
}

/// V1: `authorizeClusterTrustBundle` lets a node read any ClusterTrustBundle, and no
/// more.
#[test]
fn v1_a_node_reads_cluster_trust_bundles_and_writes_none() {
    let store = store();
    let bundle = |verb: &str, name: &str| {
        let mut a = attrs(verb, "clustertrustbundles", "", name);
        a.group = "certificates.k8s.io";
        a
    };
    for a in [bundle("get", "edge-roots"), bundle("list", ""), bundle("watch", "")] {
        assert!(allowed(&store, &a), "{a:?}");
    }
    for a in [bundle("create", ""), bundle("update", "edge-roots"), bundle("delete", "x")] {
        assert!(!allowed(&store, &a), "{a:?}");
    }
}

#[test]
fn x1_a_node_may_not_add_ephemeral_containers_even_to_its_own_pods() {
    // RBAC's system:node role has no pods/ephemeralcontainers: only a user adds them.
    let attrs = Attributes {
        subresource: "ephemeralcontainers".into(),
        ..attrs("patch", "pods", "default", "web")
    };
    assert!(!allowed(&store(), &attrs));
}

#[test]
fn k6_a_node_may_not_resize_its_own_pods() {
    // RBAC's system:node role has no pods/resize: a user or a controller resizes.
    for verb in ["patch", "update"] {
        let attrs =
            Attributes { subresource: "resize".into(), ..attrs(verb, "pods", "default", "web") };
        assert!(!allowed(&store(), &attrs), "{verb}");
    }
}
