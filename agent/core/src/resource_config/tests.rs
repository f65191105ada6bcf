use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;

fn pod(containers: Value) -> Pod {
    serde_json::from_value(json!({ "metadata": { "name": "p", "uid": "u" },
        "spec": { "containers": containers } }))
    .unwrap()
}

fn container(resources: Value) -> Value {
    json!({ "name": "c", "image": "busybox", "resources": resources })
}

#[test]
fn q2_shares_quota_and_weight_are_kubelets() {
    assert_eq!(milli_cpu_to_shares(0), 2);
    assert_eq!(milli_cpu_to_shares(1), 2);
    assert_eq!(milli_cpu_to_shares(100), 102);
    assert_eq!(milli_cpu_to_shares(1000), 1024);
    assert_eq!(milli_cpu_to_shares(1_000_000), MAX_SHARES);
    assert_eq!(milli_cpu_to_quota(0), 0);
    assert_eq!(milli_cpu_to_quota(1), 1000, "at least 1 ms");
    assert_eq!(milli_cpu_to_quota(200), 20_000);
    assert_eq!(milli_cpu_to_quota(2500), 250_000);
    assert_eq!(shares_to_weight(2), 1);
    assert_eq!(shares_to_weight(1024), 39);
    assert_eq!(shares_to_weight(102), 4);
    assert_eq!(shares_to_weight(MAX_SHARES), 10_000);
    assert_eq!(shares_to_weight(0), 1, "clamped");
}

#[test]
fn q2_a_guaranteed_pod_gets_shares_quota_and_memory() {
    let limits = json!({ "limits": { "cpu": "250m", "memory": "64Mi" } });
    let config = for_pod(&pod(json!([container(limits.clone()), container(limits)])), Some(100));
    assert_eq!(
        config,
        ResourceConfig {
            cpu_shares: 512,
            cpu_quota: Some(50_000),
            cpu_period: CPU_PERIOD,
            memory_limit: Some(128 << 20),
            pids_limit: Some(100),
        }
    );
}

#[test]
fn q2_a_burstable_pod_is_limited_only_where_every_container_is() {
    let cpu_limited = json!({ "requests": { "cpu": "100m" }, "limits": { "cpu": "200m" } });
    let memory_only = json!({ "limits": { "memory": "32Mi" } });
    let p = pod(json!([container(cpu_limited.clone()), container(memory_only)]));
    let config = for_pod(&p, None);
    assert_eq!(config.cpu_shares, milli_cpu_to_shares(100));
    assert_eq!(config.cpu_quota, None, "one container has no cpu limit");
    assert_eq!(config.memory_limit, None, "one container has no memory limit");
    assert_eq!(config.pids_limit, None);
    let config = for_pod(&pod(json!([container(cpu_limited)])), Some(-1));
    assert_eq!(config.cpu_quota, Some(20_000));
    assert_eq!(config.memory_limit, None);
    assert_eq!(config.pids_limit, None, "-1 is unlimited");
}

#[test]
fn q2_a_best_effort_pod_gets_the_minimum_shares() {
    let config = for_pod(&pod(json!([container(json!({}))])), Some(50));
    assert_eq!(config, ResourceConfig { pids_limit: Some(50), ..ResourceConfig::unlimited(2) });
}

#[test]
fn q2_pod_level_resources_size_the_pod_cgroup() {
    let p: Pod = serde_json::from_value(json!({ "metadata": { "name": "p" }, "spec": {
        "resources": { "requests": { "cpu": "500m" }, "limits": { "cpu": "1", "memory": "1Gi" } },
        "containers": [container(json!({})), container(json!({ "requests": { "cpu": "50m" } }))]
    } }))
    .unwrap();
    let config = for_pod(&p, None);
    assert_eq!(config.cpu_shares, 512);
    assert_eq!(config.cpu_quota, Some(100_000));
    assert_eq!(config.memory_limit, Some(1 << 30));
}

#[test]
fn q2_qos_cgroups_follow_their_pods() {
    assert_eq!(for_qos(QosClass::Guaranteed, []), None);
    assert_eq!(for_qos(QosClass::BestEffort, []), Some(ResourceConfig::unlimited(2)));
    assert_eq!(for_qos(QosClass::Burstable, []), Some(ResourceConfig::unlimited(2)));
    let a = pod(json!([container(json!({ "requests": { "cpu": "300m" } }))]));
    let b = pod(json!([container(json!({ "requests": { "cpu": "700m", "memory": "1Mi" } }))]));
    assert_eq!(for_qos(QosClass::Burstable, [&a, &b]).map(|c| c.cpu_shares), Some(1024));
}
