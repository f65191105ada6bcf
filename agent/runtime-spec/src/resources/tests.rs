use proptest::prelude::*;

use super::super::tests::{context, pod};
use super::*;
use crate::NodeSwap;

fn resources_of(yaml: &str) -> Result<LinuxResources> {
    resources_with(yaml, NodeSwap::default(), "api")
}

/// The resources of a pod's one container `app` (`yaml`: its `resources`), the pod from
/// `source`, on a node whose swap is `swap`.
fn resources_with(yaml: &str, swap: NodeSwap, source: &str) -> Result<LinuxResources> {
    let pod = pod(&format!(
        "metadata: {{annotations: {{kubernetes.io/config.source: {source}}}}}\n\
         spec: {{containers: [{{name: app, image: b, resources: {yaml}}}]}}"
    ));
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let ctx = PodContext { swap, ..context(&pod) };
    resources(&ctx, container, &Security::default(), &Subject::container(&pod, "app"))
}

const GI: u64 = 1 << 30;

fn swap(behavior: swap::Behavior, controller: SwapController) -> NodeSwap {
    NodeSwap { behavior, capacity: swap::Capacity { memory: 4 * GI, swap: 2 * GI }, controller }
}

/// (memory limit, OCI memory.swap, unified memory.swap.max)
fn swap_of(yaml: &str, swap: NodeSwap, source: &str) -> (Option<i64>, Option<i64>, Option<String>) {
    let resources = resources_with(yaml, swap, source).unwrap();
    let memory = resources.memory().as_ref();
    let unified = resources.unified().as_ref().and_then(|u| u.get(SWAP_MAX).cloned());
    (memory.and_then(|m| m.limit()), memory.and_then(|m| m.swap()), unified)
}

fn cpu(yaml: &str) -> (Option<u64>, Option<i64>, Option<u64>) {
    let cpu = resources_of(yaml).unwrap().cpu().clone().unwrap();
    (cpu.shares(), cpu.quota(), cpu.period())
}

fn memory(yaml: &str) -> Option<i64> {
    resources_of(yaml).unwrap().memory().and_then(|m| m.limit())
}

#[test]
fn best_effort_gets_minimum_shares_and_no_limits() {
    assert_eq!(cpu("{}"), (Some(2), None, None));
    assert_eq!(memory("{}"), None);
}

#[test]
fn cpu_request_and_limit() {
    assert_eq!(cpu("{requests: {cpu: 100m}}"), (Some(102), None, None));
    assert_eq!(cpu("{requests: {cpu: '1'}}"), (Some(1024), None, None));
    assert_eq!(cpu("{requests: {cpu: 1m}}"), (Some(2), None, None));
    assert_eq!(cpu("{requests: {cpu: '1000'}}"), (Some(262_144), None, None));
    assert_eq!(cpu("{limits: {cpu: '2'}}"), (Some(2048), Some(200_000), Some(100_000)));
    assert_eq!(cpu("{limits: {cpu: 1m}}"), (Some(2), Some(1_000), Some(100_000)), "minimum quota");
    assert_eq!(
        cpu("{limits: {cpu: 500m}, requests: {cpu: 100m}}"),
        (Some(102), Some(50_000), Some(100_000))
    );
    assert_eq!(cpu("{limits: {cpu: '0'}}"), (Some(2), None, None), "a zero limit is no limit");
    assert_eq!(cpu("{limits: {cpu: 0.5}}"), (Some(512), Some(50_000), Some(100_000)));
}

#[test]
fn memory_limit() {
    assert_eq!(memory("{limits: {memory: 64Mi}}"), Some(64 << 20));
    assert_eq!(memory("{limits: {memory: 1G}}"), Some(1_000_000_000));
    assert_eq!(memory("{limits: {memory: 1e9}}"), Some(1_000_000_000));
    assert_eq!(memory("{limits: {memory: 100k}}"), Some(100_000));
    assert_eq!(memory("{limits: {memory: 1500m}}"), Some(2), "rounded up to a byte");
    assert_eq!(memory("{requests: {memory: 64Mi}}"), None, "a request alone sets no limit");
}

#[test]
fn device_rules_come_along() {
    let devices = resources_of("{}").unwrap().devices().clone().unwrap();
    assert_eq!(devices.len(), 1);
    assert!(!devices[0].allow());
}

#[test]
fn bad_quantities_name_the_field() {
    let error = resources_of("{requests: {cpu: lots}}").unwrap_err();
    assert!(
        matches!(&error, Error::Quantity { field, value, .. } if field == "resources.requests.cpu" && value == "lots")
    );
    let error = resources_of("{limits: {memory: '-1'}}").unwrap_err();
    assert!(matches!(&error, Error::Quantity { source: quantity::Error::Negative, .. }));
}

const BURSTABLE: &str = "{requests: {memory: 1Gi}, limits: {memory: 2Gi}}";
const GUARANTEED: &str = "{requests: {cpu: '1', memory: 1Gi}, limits: {cpu: '1', memory: 1Gi}}";

#[test]
fn d6_without_a_swap_controller_the_spec_says_nothing_of_swap() {
    for behavior in [swap::Behavior::NoSwap, swap::Behavior::LimitedSwap] {
        let node = swap(behavior, SwapController::None);
        assert_eq!(swap_of(BURSTABLE, node, "api"), (Some(2 * GI as i64), None, None));
        assert_eq!(swap_of("{}", node, "api"), (None, None, None));
    }
}

#[test]
fn d6_on_cgroup_v1_memory_and_swap_are_limited_to_the_memory_limit() {
    let node = swap(swap::Behavior::NoSwap, SwapController::MemorySwap);
    let limit = Some(2 * GI as i64);
    assert_eq!(swap_of(BURSTABLE, node, "api"), (limit, limit, None), "Burstable");
    let gi = Some(GI as i64);
    assert_eq!(swap_of(GUARANTEED, node, "api"), (gi, gi, None), "Guaranteed");
    assert_eq!(swap_of("{}", node, "api"), (None, None, None), "no memory limit: nothing");
    let request_only = "{requests: {memory: 1Gi}}";
    assert_eq!(swap_of(request_only, node, "api"), (None, None, None));
}

#[test]
fn d6_on_cgroup_v2_swap_max_is_the_containers_swap_limit() {
    let limited = swap(swap::Behavior::LimitedSwap, SwapController::SwapMax);
    let gi = Some(GI as i64);
    let two = Some(2 * GI as i64);
    let bytes = |n: u64| Some(n.to_string());
    // A quarter of the memory requested: a quarter of the swap.
    assert_eq!(swap_of(BURSTABLE, limited, "api"), (two, None, bytes(GI / 2)));
    assert_eq!(swap_of(GUARANTEED, limited, "api"), (gi, None, bytes(0)));
    assert_eq!(swap_of("{}", limited, "api"), (None, None, bytes(0)), "BestEffort");
    assert_eq!(swap_of(BURSTABLE, limited, "file"), (two, None, bytes(0)), "a static pod");
    let none = swap(swap::Behavior::NoSwap, SwapController::SwapMax);
    assert_eq!(swap_of(BURSTABLE, none, "api"), (two, None, bytes(0)), "NoSwap");
}

proptest! {
    /// Shares stay within kubelet's bounds and grow with the request.
    #[test]
    fn shares_are_bounded_and_monotonic(a in 0i64..2_000_000, b in 0i64..2_000_000) {
        let (low, high) = (a.min(b), a.max(b));
        prop_assert!((2..=262_144).contains(&milli_cpu_to_shares(low)));
        prop_assert!(milli_cpu_to_shares(low) <= milli_cpu_to_shares(high));
        prop_assert!(milli_cpu_to_quota(low) <= milli_cpu_to_quota(high));
        prop_assert!(milli_cpu_to_quota(low) >= 1_000);
    }
}
