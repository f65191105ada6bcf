use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::{Exceeded, Signal, Usage, canonical, check, is_critical, is_limited};

const MI: u64 = 1 << 20;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec}))
        .unwrap()
}

fn limited(name: &str, limit: &str) -> serde_json::Value {
    json!({"name": name, "image": "i", "resources": {"limits": {"ephemeral-storage": limit}}})
}

fn usage(containers: &[(&str, u64)], empty_dirs: &[(&str, u64)], other: u64) -> Usage {
    let owned = |list: &[(&str, u64)]| list.iter().map(|(n, b)| ((*n).to_owned(), *b)).collect();
    Usage { containers: owned(containers), empty_dirs: owned(empty_dirs), other }
}

fn exceeded(signal: Signal, message: &str) -> Option<Exceeded> {
    Some(Exceeded { signal, message: message.to_owned() })
}

#[test]
fn only_pods_with_limits_are_measured() {
    assert!(!is_limited(&pod(json!({"containers": [{"name": "c", "image": "i"}]}))));
    assert!(is_limited(&pod(json!({"containers": [limited("c", "1Mi")]}))));
    let init = json!({"containers": [{"name": "c", "image": "i"}], "initContainers": [limited("i", "1Mi")]});
    assert!(is_limited(&pod(init)));
    let volume = json!({"containers": [{"name": "c", "image": "i"}],
        "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "1Mi"}}]});
    assert!(is_limited(&pod(volume)));
    let unlimited = json!({"containers": [{"name": "c", "image": "i"}],
        "volumes": [{"name": "cache", "emptyDir": {}}]});
    assert!(!is_limited(&pod(unlimited)));
}

#[test]
fn an_empty_dir_past_its_size_limit_with_kubelets_message() {
    let p = pod(json!({"containers": [{"name": "c", "image": "i"}],
        "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "1Mi"}}]}));
    assert_eq!(check(&p, &usage(&[], &[("cache", MI)], 0)), None);
    assert_eq!(
        check(&p, &usage(&[], &[("cache", MI + 1)], 0)),
        exceeded(
            Signal::EmptyDirFsLimit,
            "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". "
        )
    );
}

#[test]
fn a_memory_empty_dir_counts_against_its_size_limit_but_not_the_pod_total() {
    let p = pod(json!({"containers": [limited("c", "2Mi")],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Mi"}}]}));
    assert_eq!(check(&p, &usage(&[("c", MI)], &[("shm", 3 * MI)], 0)), None);
    assert_eq!(
        check(&p, &usage(&[("c", MI)], &[("shm", 5 * MI)], 0)).unwrap().signal,
        Signal::EmptyDirFsLimit
    );
}

#[test]
fn the_pod_total_is_its_containers_disk_volumes_and_files() {
    let p = pod(
        json!({"containers": [limited("a", "1Mi"), limited("b", "1Mi"), {"name": "c", "image": "i"}],
        "volumes": [{"name": "data", "emptyDir": {}}]}),
    );
    let within =
        usage(&[("a", MI / 2), ("b", MI / 2), ("c", MI / 2)], &[("data", MI / 4)], MI / 4 - 1);
    assert_eq!(check(&p, &within), None);
    let past =
        usage(&[("a", MI / 2), ("b", MI / 2), ("c", MI / 2)], &[("data", MI / 4)], MI / 4 + 1);
    assert_eq!(
        check(&p, &past),
        exceeded(
            Signal::EphemeralPodFsLimit,
            "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "
        )
    );
}

#[test]
fn a_container_past_its_limit_with_kubelets_message() {
    let p = pod(json!({"containers": [limited("small", "1Mi"), limited("big", "100Mi")]}));
    assert_eq!(
        check(&p, &usage(&[("small", 2 * MI), ("big", 0)], &[], 0)),
        exceeded(
            Signal::EphemeralContainerFsLimit,
            "Container small exceeded its local ephemeral storage limit \"1Mi\". "
        )
    );
}

#[test]
fn the_checks_go_in_kubelets_order() {
    let p = pod(json!({"containers": [limited("c", "1Mi")],
        "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "1Mi"}}]}));
    let all = usage(&[("c", 5 * MI)], &[("cache", 5 * MI)], 0);
    assert_eq!(check(&p, &all).unwrap().signal, Signal::EmptyDirFsLimit);
    let p = pod(json!({"containers": [limited("c", "1Mi")]}));
    assert_eq!(
        check(&p, &usage(&[("c", 5 * MI)], &[], 0)).unwrap().signal,
        Signal::EphemeralPodFsLimit
    );
}

#[test]
fn init_containers_and_sidecars_count_as_kubelet_adds_them() {
    // Sidecar 1Mi plus app 1Mi = 2Mi; the init container alone, 3Mi, is more.
    let p = pod(json!({
        "initContainers": [
            {"restartPolicy": "Always", "name": "side", "image": "i", "resources": {"limits": {"ephemeral-storage": "1Mi"}}},
            limited("init", "2Mi")
        ],
        "containers": [limited("c", "1Mi")]}));
    let message = check(&p, &usage(&[("c", MI / 2), ("side", 3 * MI)], &[], 0)).unwrap().message;
    assert_eq!(
        message,
        "Pod ephemeral local storage usage exceeds the total limit of containers 3Mi. "
    );
}

#[test]
fn limits_print_as_kubernetes_prints_them() {
    let p = pod(json!({"containers": [limited("c", "1024Ki")]}));
    let message = check(&p, &usage(&[("c", 2 * MI)], &[], 0)).unwrap().message;
    assert!(message.ends_with("containers 1Mi. "), "{message}");
    assert_eq!(canonical(1_500_000, false), "1500k");
    assert_eq!(canonical(1536 * 1024, true), "1536Ki");
    assert_eq!(canonical(1000, true), "1000");
    assert_eq!(canonical(0, true), "0");
    assert_eq!(canonical(3 << 30, true), "3Gi");
}

#[test]
fn static_mirror_and_critical_pods_are_critical() {
    let with = |annotations: serde_json::Value, priority: Option<i32>| -> Pod {
        let mut p = pod(json!({"containers": [limited("c", "1Mi")], "priority": priority}));
        p.metadata.annotations = serde_json::from_value(annotations).unwrap();
        p
    };
    assert!(is_critical(&with(json!({"kubernetes.io/config.source": "file"}), None)));
    assert!(is_critical(&with(json!({"kubernetes.io/config.source": "http"}), None)));
    assert!(!is_critical(&with(json!({"kubernetes.io/config.source": "api"}), None)));
    assert!(is_critical(&with(
        json!({"kubernetes.io/config.source": "api", "kubernetes.io/config.mirror": "h"}),
        None
    )));
    assert!(is_critical(&with(json!({"kubernetes.io/config.source": "api"}), Some(2_000_000_000))));
    assert!(!is_critical(&with(
        json!({"kubernetes.io/config.source": "api"}),
        Some(1_999_999_999)
    )));
}
