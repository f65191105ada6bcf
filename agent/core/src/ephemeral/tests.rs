use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;

fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {
            "containers": [{"name": "app", "image": "nginx"}],
            "ephemeralContainers": [{
                "name": "debugger-x7k2p",
                "image": "busybox",
                "stdin": true,
                "tty": true,
                "targetContainerName": "app",
                "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}},
                "readinessProbe": {"exec": {"command": ["true"]}},
                "lifecycle": {"postStart": {"exec": {"command": ["true"]}}},
            }],
        },
    }))
    .unwrap()
}

#[test]
fn x2_an_ephemeral_container_runs_without_probes_or_hooks() {
    let pod = pod();
    let container = as_container(find(&pod, "debugger-x7k2p").unwrap());
    assert_eq!(container.image.as_deref(), Some("busybox"));
    assert_eq!((container.stdin, container.tty), (Some(true), Some(true)));
    assert!(container.security_context.is_some());
    assert!(container.readiness_probe.is_none() && container.lifecycle.is_none());
}

#[test]
fn x1_the_target_is_named_by_target_container_name() {
    let pod = pod();
    assert_eq!(target(&pod, "debugger-x7k2p"), Some("app"));
    assert_eq!(target(&pod, "app"), None);
    assert_eq!(target_not_found("app"), "unable to find target container app");
}

#[test]
fn any_container_finds_each_list() {
    let pod = pod();
    assert!(matches!(any_container(&pod, "app"), Some(Cow::Borrowed(_))));
    assert!(matches!(any_container(&pod, "debugger-x7k2p"), Some(Cow::Owned(_))));
    assert!(any_container(&pod, "nope").is_none());
}

#[test]
fn x2_the_api_servers_forbidden_fields_are_named() {
    let container = json!({
        "name": "d",
        "image": "busybox",
        "ports": [{"containerPort": 80}],
        "resources": {"limits": {"cpu": "1"}},
        "resizePolicy": [],
        "stdin": true,
        "volumeMounts": [{"name": "v", "mountPath": "/v", "subPath": "x"}],
        "securityContext": {"privileged": true},
    });
    assert_eq!(
        forbidden(&container, "spec.ephemeralContainers[0]"),
        [
            "spec.ephemeralContainers[0].ports",
            "spec.ephemeralContainers[0].resources",
            "spec.ephemeralContainers[0].volumeMounts[0].subPath",
        ]
    );
    assert!(forbidden(&json!({"name": "d", "resources": {}}), "p").is_empty());
}

#[test]
fn x4_an_addition_is_checked_as_the_api_server_checks_it() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [{"name": "app", "image": "nginx"}],
            "ephemeralContainers": [{"name": "debugger-1", "image": "busybox"}]
        }
    }))
    .unwrap();
    let good = json!({"name": "debugger-2", "image": "busybox", "targetContainerName": "app",
                      "stdin": true, "tty": true});
    assert_eq!(addition_problems(&pod, &good), Vec::<String>::new());
    let bad = json!({"name": "debugger-1", "targetContainerName": "nope",
                     "ports": [{"containerPort": 80}]});
    assert_eq!(
        addition_problems(&pod, &bad),
        [
            "spec.ephemeralContainers[1].image: Required value",
            "spec.ephemeralContainers[1].name: Duplicate value: \"debugger-1\"",
            "spec.ephemeralContainers[1].targetContainerName: Not found: \"nope\"",
            "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container",
        ]
    );
    let same_as_app = json!({"name": "app", "image": "busybox"});
    assert_eq!(
        addition_problems(&pod, &same_as_app),
        ["spec.ephemeralContainers[1].name: Duplicate value: \"app\""]
    );
}
