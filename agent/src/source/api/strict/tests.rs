//! S12 for API pods: unknown keys in a securityContext are annotated for admission.

use outpost_core::admission::{self, NodeFacts, Severity, UNKNOWN_SECURITY_FIELDS};
use outpost_core::pod::Source;
use serde_json::json;

use super::ApiPod;

fn read(pod: serde_json::Value) -> ApiPod {
    serde_json::from_value(pod).expect("a pod")
}

#[test]
fn s12_unknown_security_fields_of_an_api_pod_refuse_it() {
    let pod = read(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"nodeName": "edge-1", "containers": [{"name": "app", "image": "nginx",
            "securityContext": {"cgroupOptions": {"mountMode": "Unconfined"}}}]}
    }))
    .0;
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get(UNKNOWN_SECURITY_FIELDS).map(String::as_str),
        Some("spec.containers[0].securityContext.cgroupOptions")
    );
    let findings = admission::review(&pod, &NodeFacts::default(), Source::Api);
    assert!(
        findings.iter().any(|f| f.severity == Severity::Refused
            && f.field == "spec.containers[0].securityContext.cgroupOptions"),
        "{findings:?}"
    );
}

#[test]
fn s12_other_unknown_fields_of_an_api_pod_are_dropped_as_kubelet_drops_them() {
    let pod = read(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "annotations": {"a": "b"}},
        "spec": {"futureField": 1, "containers": [{"name": "app", "image": "nginx"}]}
    }))
    .0;
    let annotations = pod.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.len(), 1, "{annotations:?}");
}

#[test]
fn a_pod_that_is_not_a_pod_is_an_error() {
    let error = serde_json::from_value::<ApiPod>(json!({"spec": {"containers": 3}})).unwrap_err();
    assert!(error.to_string().contains("invalid type"), "{error}");
}
