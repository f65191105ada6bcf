use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({ "metadata": { "name": "p", "uid": "u" }, "spec": spec }))
        .unwrap()
}

fn container(name: &str, resources: Value) -> Value {
    json!({ "name": name, "image": "busybox", "resources": resources })
}

#[test]
fn q1_no_requests_or_limits_is_best_effort() {
    let p =
        pod(json!({ "containers": [container("a", json!({})), { "name": "b", "image": "x" }] }));
    assert_eq!(qos_class(&p), QosClass::BestEffort);
    // Zero quantities count as unset.
    let p = pod(json!({ "containers": [container("a", json!({ "requests": { "cpu": "0" } }))] }));
    assert_eq!(qos_class(&p), QosClass::BestEffort);
}

#[test]
fn q1_equal_requests_and_limits_in_every_container_is_guaranteed() {
    let both = json!({ "limits": { "cpu": "500m", "memory": "64Mi" },
                       "requests": { "cpu": "0.5", "memory": "67108864" } });
    let limits_only = json!({ "limits": { "cpu": "1", "memory": "1Gi" } });
    let p = pod(json!({ "containers": [container("a", both), container("b", limits_only)] }));
    assert_eq!(qos_class(&p), QosClass::Guaranteed);
}

#[test]
fn q1_anything_else_is_burstable() {
    let cases = [
        json!({ "requests": { "cpu": "100m" } }),
        json!({ "limits": { "memory": "64Mi" } }),
        json!({ "limits": { "cpu": "1", "memory": "64Mi" }, "requests": { "cpu": "500m" } }),
    ];
    for resources in cases {
        let p = pod(json!({ "containers": [container("a", resources.clone())] }));
        assert_eq!(qos_class(&p), QosClass::Burstable, "{resources}");
    }
    // One container without limits makes a guaranteed-looking pod burstable.
    let p = pod(json!({ "containers": [
        container("a", json!({ "limits": { "cpu": "1", "memory": "64Mi" } })),
        container("b", json!({ "requests": { "memory": "64Mi" } })),
    ] }));
    assert_eq!(qos_class(&p), QosClass::Burstable);
}

#[test]
fn q1_init_containers_count_and_pod_level_resources_win() {
    let guaranteed = json!({ "limits": { "cpu": "1", "memory": "64Mi" } });
    let p = pod(json!({
        "initContainers": [container("init", json!({ "requests": { "cpu": "1" } }))],
        "containers": [container("a", guaranteed.clone())],
    }));
    assert_eq!(qos_class(&p), QosClass::Burstable);
    let p = pod(json!({
        "resources": { "limits": { "cpu": "2", "memory": "128Mi" } },
        "containers": [container("a", json!({})), container("b", json!({ "requests": { "cpu": "1" } }))],
    }));
    assert_eq!(qos_class(&p), QosClass::Guaranteed);
    let p = pod(json!({
        "resources": { "requests": { "memory": "128Mi" } },
        "containers": [container("a", guaranteed)],
    }));
    assert_eq!(qos_class(&p), QosClass::Burstable);
}

#[test]
fn pod_requests_add_apps_and_sidecars_and_take_the_larger_init_peak() {
    let p = pod(json!({
        "initContainers": [
            container("sidecar", json!({ "requests": { "memory": "10Mi", "cpu": "100m" } })),
            container("migrate", json!({ "requests": { "memory": "100Mi", "cpu": "2" } })),
        ],
        "containers": [
            container("a", json!({ "requests": { "memory": "20Mi" }, "limits": { "cpu": "1" } })),
            container("b", json!({ "limits": { "memory": "30Mi", "cpu": "250m" } })),
        ],
    }));
    let mut p = p;
    p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].restart_policy =
        Some("Always".into());
    // Apps 20+30 Mi and the sidecar 10 Mi = 60 Mi; the init container 100 + 10 Mi = 110 Mi.
    assert_eq!(pod_request(&p, "memory"), 110 * 1024 * 1024);
    // Apps 1000m + 250m + sidecar 100m = 1350m; the init container 2000m + 100m = 2100m.
    assert_eq!(pod_request(&p, "cpu"), 2100);
    // Container a has no memory limit: the pod is not limited.
    assert_eq!(pod_limit(&p, "memory"), None);
    assert_eq!(pod_limit(&p, "cpu"), None, "the init containers have no cpu limit");
}

#[test]
fn pod_limits_sum_when_every_container_is_limited() {
    let p = pod(json!({ "containers": [
        container("a", json!({ "limits": { "memory": "64Mi", "cpu": "500m" } })),
        container("b", json!({ "limits": { "memory": "64Mi", "cpu": "1500m" } })),
    ] }));
    assert_eq!(pod_limit(&p, "memory"), Some(128 * 1024 * 1024));
    assert_eq!(pod_limit(&p, "cpu"), Some(2000));
    let p = pod(json!({
        "resources": { "limits": { "memory": "1Gi" } },
        "containers": [container("a", json!({}))],
    }));
    assert_eq!(pod_limit(&p, "memory"), Some(1 << 30));
    assert_eq!(pod_request(&p, "memory"), 1 << 30, "a pod-level request defaults to the limit");
}
