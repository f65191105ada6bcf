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

/// A pod of `containers` with `spec.overhead` set to `overhead`.
fn with_overhead(containers: Value, overhead: Value) -> Pod {
    let mut p = pod(containers);
    let spec = p.spec.as_mut().unwrap();
    spec.overhead = serde_json::from_value(overhead).unwrap();
    p
}

#[test]
fn d5_overhead_is_added_to_the_pod_cgroups_requests_and_set_limits() {
    let overhead = json!({ "cpu": "250m", "memory": "120Mi" });
    // Guaranteed: shares, quota and memory limit all carry the overhead.
    let limits = json!({ "limits": { "cpu": "500m", "memory": "64Mi" } });
    let g = for_pod(&with_overhead(json!([container(limits)]), overhead.clone()), None);
    assert_eq!(g.cpu_shares, milli_cpu_to_shares(750));
    assert_eq!(g.cpu_quota, Some(75_000));
    assert_eq!(g.memory_limit, Some((64 + 120) << 20));
    // Burstable with no limits: the overhead raises the shares only; an unlimited pod
    // stays unlimited (kubelet's PodLimits adds overhead to set limits only).
    let requests = json!({ "requests": { "cpu": "100m", "memory": "16Mi" } });
    let b = for_pod(&with_overhead(json!([container(requests)]), overhead.clone()), None);
    assert_eq!(b.cpu_shares, milli_cpu_to_shares(350));
    assert_eq!((b.cpu_quota, b.memory_limit), (None, None));
    // Memory limited, cpu not: the overhead goes onto memory's limit only.
    let memory = json!({ "requests": { "cpu": "100m" }, "limits": { "memory": "32Mi" } });
    let m = for_pod(&with_overhead(json!([container(memory)]), overhead.clone()), None);
    assert_eq!((m.cpu_quota, m.memory_limit), (None, Some((32 + 120) << 20)));
    // BestEffort: the class is the containers', and gets the minimum whatever the overhead.
    let e = for_pod(&with_overhead(json!([container(json!({}))]), overhead.clone()), None);
    assert_eq!(e, ResourceConfig::unlimited(MIN_SHARES));
    // The Burstable QoS cgroup's shares count its pods' overhead too.
    let burstable = with_overhead(
        json!([container(json!({ "requests": { "cpu": "100m" } }))]),
        json!({ "cpu": "150m" }),
    );
    assert_eq!(for_qos(QosClass::Burstable, [&burstable]).map(|c| c.cpu_shares), Some(256));
}

proptest::proptest! {
    /// D5: an overhead never lowers a pod cgroup's figures, never limits what was
    /// unlimited, and adds exactly itself to a set memory limit.
    #[test]
    fn d5_overhead_only_adds_to_what_is_set(
        cpu_request in 0u32..4000,
        cpu_limit in proptest::option::of(1u32..4000),
        memory_limit in proptest::option::of(1u32..4096),
        overhead_cpu in 0u32..2000,
        overhead_memory in 0u32..512,
    ) {
        let mut limits = serde_json::Map::new();
        if let Some(cpu) = cpu_limit {
            limits.insert("cpu".into(), json!(format!("{}m", cpu.max(cpu_request))));
        }
        if let Some(memory) = memory_limit {
            limits.insert("memory".into(), json!(format!("{memory}Mi")));
        }
        let resources = json!({ "requests": { "cpu": format!("{cpu_request}m") }, "limits": limits });
        let without = for_pod(&pod(json!([container(resources.clone())])), None);
        let overhead = json!({ "cpu": format!("{overhead_cpu}m"), "memory": format!("{overhead_memory}Mi") });
        let with = for_pod(&with_overhead(json!([container(resources)]), overhead), None);
        proptest::prop_assert!(with.cpu_shares >= without.cpu_shares);
        proptest::prop_assert_eq!(with.cpu_quota.is_some(), without.cpu_quota.is_some());
        proptest::prop_assert!(with.cpu_quota >= without.cpu_quota);
        proptest::prop_assert_eq!(
            with.memory_limit,
            without.memory_limit.map(|m| m + (i64::from(overhead_memory) << 20))
        );
    }
}
