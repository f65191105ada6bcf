use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;

/// A pod from `source` (`config.source`) with `containers` (their `resources`), and
/// `extra` merged into its spec.
fn pod(source: &str, containers: &[Value], extra: Value) -> Pod {
    let containers: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(i, resources)| json!({ "name": format!("c{i}"), "image": "x", "resources": resources }))
        .collect();
    let mut spec = json!({ "containers": containers });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "metadata": {
            "name": "p",
            "uid": "u",
            "annotations": { "kubernetes.io/config.source": source },
        },
        "spec": spec,
    }))
    .unwrap()
}

fn first(pod: &Pod) -> &Container {
    &pod.spec.as_ref().unwrap().containers[0]
}

const NODE: Capacity = Capacity { memory: 4 * GI, swap: 2 * GI };

fn limited(pod: &Pod) -> u64 {
    limit(Behavior::LimitedSwap, true, NODE, pod, first(pod))
}

fn burstable() -> Value {
    json!({ "requests": { "memory": "1Gi" }, "limits": { "memory": "2Gi" } })
}

#[test]
fn d6_swap_behavior_is_kubelets_setting() {
    assert_eq!(Behavior::parse(""), Ok(Behavior::NoSwap));
    assert_eq!(Behavior::parse("NoSwap"), Ok(Behavior::NoSwap));
    assert_eq!(Behavior::parse("LimitedSwap"), Ok(Behavior::LimitedSwap));
    assert_eq!(Behavior::default(), Behavior::NoSwap);
    let error = Behavior::parse("UnlimitedSwap").unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid configuration: memorySwap.swapBehavior \"UnlimitedSwap\" must be one of: \"\", \
         \"LimitedSwap\" or \"NoSwap\""
    );
    assert_eq!(Behavior::LimitedSwap.as_str(), "LimitedSwap");
    assert_eq!(Behavior::NoSwap.as_str(), "NoSwap");
}

#[test]
fn d6_swap_is_on_when_proc_swaps_lists_an_area() {
    let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
    assert!(!is_on(""));
    assert!(!is_on(header));
    assert!(!is_on(&format!("\n{header}\n\n")));
    let on = format!("{header}/swapfile                               file\t\t16380\t\t0\t\t-2\n");
    assert!(is_on(&on));
}

#[test]
fn d6_critical_pods_are_kubelets() {
    assert!(is_critical(&pod("file", &[json!({})], json!({}))), "a static pod");
    assert!(is_critical(&pod("http", &[json!({})], json!({}))), "a static pod");
    assert!(!is_critical(&pod("api", &[json!({})], json!({}))));
    let mut mirror = pod("api", &[json!({})], json!({}));
    let annotations = mirror.metadata.annotations.as_mut().unwrap();
    annotations.insert("kubernetes.io/config.mirror".into(), "x".into());
    assert!(is_critical(&mirror), "a mirror pod");
    assert!(is_critical(&pod("api", &[json!({})], json!({ "priority": 2_000_000_000 }))));
    assert!(!is_critical(&pod("api", &[json!({})], json!({ "priority": 1_999_999_999 }))));
    let node_critical = json!({ "priorityClassName": "system-node-critical" });
    assert!(is_critical(&pod("api", &[json!({})], node_critical)));
    let mut unstamped = pod("api", &[json!({})], json!({}));
    unstamped.metadata.annotations = None;
    assert!(!is_critical(&unstamped), "no config.source: not static (kubelet's IsStaticPod)");
}

#[test]
fn d6_limited_swap_gives_a_burstable_container_its_share_of_the_swap() {
    // 1 GiB of 4 GiB memory: a quarter of the 2 GiB swap.
    let p = pod("api", &[burstable()], json!({}));
    assert_eq!(limited(&p), 512 * MI);
    // A request without a limit counts the same.
    let p = pod("api", &[json!({ "requests": { "memory": "1Gi" } })], json!({}));
    assert_eq!(limited(&p), 512 * MI);
    // kubelet's float64 arithmetic, truncated: of 2 bytes of swap on 3 of memory, a
    // 1-byte request gets 0 (0.67), 2 bytes 1 (1.33), all 3 the 2.
    let node = Capacity { memory: 3, swap: 2 };
    let bytes =
        |n: u64| pod("api", &[json!({ "requests": { "memory": n.to_string() } })], json!({}));
    let share = |n: u64| limit(Behavior::LimitedSwap, true, node, &bytes(n), first(&bytes(n)));
    assert_eq!([share(1), share(2), share(3)], [0, 1, 2]);
}

#[test]
fn d6_no_swap_for_other_containers_pods_settings_and_nodes() {
    let p = pod("api", &[burstable()], json!({}));
    assert_eq!(limit(Behavior::NoSwap, true, NODE, &p, first(&p)), 0, "NoSwap");
    assert_eq!(limit(Behavior::LimitedSwap, false, NODE, &p, first(&p)), 0, "cgroup v1");
    let no_swap = Capacity { memory: 4 * GI, swap: 0 };
    assert_eq!(limit(Behavior::LimitedSwap, true, no_swap, &p, first(&p)), 0, "no swap");
    let no_memory = Capacity { memory: 0, swap: GI };
    assert_eq!(limit(Behavior::LimitedSwap, true, no_memory, &p, first(&p)), 0);
    let cases = [
        ("a static pod (critical)", pod("file", &[burstable()], json!({}))),
        ("a critical priority", pod("api", &[burstable()], json!({ "priority": 2_000_001_000 }))),
        ("BestEffort", pod("api", &[json!({})], json!({}))),
        (
            "Guaranteed",
            pod("api", &[json!({ "limits": { "cpu": "1", "memory": "1Gi" } })], json!({})),
        ),
        (
            "a limit alone (the request is the limit)",
            pod("api", &[json!({ "limits": { "memory": "1Gi" } })], json!({})),
        ),
        (
            "a request equal to the limit, in a Burstable pod",
            pod(
                "api",
                &[json!({ "requests": { "memory": "1Gi" }, "limits": { "memory": "1073741824" } })],
                json!({}),
            ),
        ),
        (
            "no memory request, in a Burstable pod",
            pod("api", &[json!({ "requests": { "cpu": "100m" } }), burstable()], json!({})),
        ),
        (
            "a request above the node's memory",
            pod("api", &[json!({ "requests": { "memory": "5Gi" } })], json!({})),
        ),
    ];
    for (what, p) in cases {
        assert_eq!(limited(&p), 0, "{what}");
    }
}

fn resources() -> impl Strategy<Value = Value> {
    let quantity = prop_oneof![Just(None), (0u64..8).prop_map(|gi| Some(format!("{gi}Gi")))];
    (quantity.clone(), quantity.clone(), quantity.clone(), quantity).prop_map(
        |(request, limit, cpu_request, cpu_limit)| {
            let map = |pairs: [(&str, Option<String>); 2]| -> serde_json::Map<String, Value> {
                pairs.into_iter().filter_map(|(k, v)| Some((k.to_owned(), v?.into()))).collect()
            };
            let requests = map([("memory", request), ("cpu", cpu_request)]);
            let limits = map([("memory", limit), ("cpu", cpu_limit)]);
            json!({ "requests": requests, "limits": limits })
        },
    )
}

proptest! {
    /// D6: whatever the pod, the setting and the node, a container never gets more than
    /// the node's swap, and none unless LimitedSwap on cgroup v2 for a Burstable pod that
    /// is not critical.
    #[test]
    fn d6_the_swap_limit_never_exceeds_the_swap_and_is_0_outside_limited_burstable(
        containers in proptest::collection::vec(resources(), 1..4),
        source in prop_oneof![Just("api"), Just("file"), Just("http")],
        priority in prop_oneof![Just(0), Just(SYSTEM_CRITICAL_PRIORITY)],
        limited in any::<bool>(),
        cgroup_v2 in any::<bool>(),
        memory in 0u64..(16 * GI),
        swap in prop_oneof![Just(0u64), 0u64..(16 * GI), Just(u64::MAX)],
    ) {
        let p = pod(source, &containers, json!({ "priority": priority }));
        let behavior = if limited { Behavior::LimitedSwap } else { Behavior::NoSwap };
        let capacity = Capacity { memory, swap };
        let eligible = limited
            && cgroup_v2
            && !is_critical(&p)
            && qos::qos_class(&p) == QosClass::Burstable;
        for container in &p.spec.as_ref().unwrap().containers {
            let bytes = limit(behavior, cgroup_v2, capacity, &p, container);
            prop_assert!(bytes <= swap, "{bytes} > {swap}");
            if !eligible {
                prop_assert_eq!(bytes, 0);
            }
        }
    }
}
