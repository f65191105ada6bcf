use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::pod::Source;
use crate::qos::QosClass;
use crate::resource_config::for_pod;

fn pod(uid: &str, containers: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": containers},
    }))
    .unwrap()
}

/// One Burstable container `app` with these requests and limits.
fn burstable(uid: &str, cpu: (&str, &str), memory: (&str, &str)) -> Pod {
    pod(
        uid,
        json!([{"name": "app", "image": "busybox", "resources": {
            "requests": {"cpu": cpu.0, "memory": memory.0},
            "limits": {"cpu": cpu.1, "memory": memory.1},
        }}]),
    )
}

fn node(cpu_milli: i64, memory: i64) -> Node {
    let allocatable = BTreeMap::from([
        ("cpu".into(), cpu_milli),
        ("memory".into(), memory),
        ("pods".into(), 110),
    ]);
    Node { name: "edge".into(), allocatable, ..Node::default() }
}

fn admitted(pod: Pod) -> Admitted {
    Admitted { uid: crate::pod::uid(&pod).to_owned(), pod: Arc::new(pod), source: Source::Api }
}

#[test]
fn k6_a_resize_that_fits_is_allocated() {
    let allocated = burstable("a", ("100m", "200m"), ("64Mi", "128Mi"));
    let desired = burstable("a", ("200m", "400m"), ("128Mi", "256Mi"));
    assert!(differs(&desired, &allocation(&allocated)));
    assert_eq!(decide(&node(2000, 1 << 30), &[], &allocated, &desired), Ok(()));
}

#[test]
fn k6_more_than_allocatable_is_infeasible_with_kubelets_message() {
    let allocated = burstable("a", ("100m", "200m"), ("64Mi", "128Mi"));
    let desired = burstable("a", ("5", "5"), ("64Mi", "128Mi"));
    let pending = decide(&node(2000, 1 << 30), &[], &allocated, &desired).unwrap_err();
    assert_eq!(pending.reason, PendingReason::Infeasible);
    assert_eq!(
        pending.message,
        "Node didn't have enough capacity: cpu, requested: 5000, capacity: 2000"
    );
    // Memory is named first when both are short, as kubelet does.
    let desired = burstable("a", ("5", "6"), ("2Gi", "3Gi"));
    let pending = decide(&node(2000, 1 << 30), &[], &allocated, &desired).unwrap_err();
    assert_eq!(
        pending.message,
        "Node didn't have enough capacity: memory, requested: 2147483648, capacity: 1073741824"
    );
}

#[test]
fn k6_what_fits_only_once_others_shrink_is_deferred() {
    let allocated = burstable("a", ("100m", "200m"), ("64Mi", "128Mi"));
    let desired = burstable("a", ("1500m", "2"), ("64Mi", "128Mi"));
    let other = admitted(burstable("b", ("1", "1"), ("64Mi", "64Mi")));
    let mine = admitted(allocated.clone());
    let pending = decide(&node(2000, 1 << 30), &[other, mine], &allocated, &desired).unwrap_err();
    assert_eq!(pending.reason, PendingReason::Deferred);
    assert_eq!(
        pending.message,
        "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"
    );
}

#[test]
fn k6_a_resize_never_changes_the_qos_class() {
    let allocated = burstable("a", ("100m", "200m"), ("64Mi", "128Mi"));
    let desired = burstable("a", ("200m", "200m"), ("128Mi", "128Mi"));
    let pending = decide(&node(2000, 1 << 30), &[], &allocated, &desired).unwrap_err();
    assert_eq!(
        pending,
        Pending { reason: PendingReason::Infeasible, message: QOS_CHANGE_MESSAGE.into() }
    );
}

#[test]
fn k6_the_allocated_pod_keeps_the_allocation_until_it_changes() {
    let allocated = burstable("a", ("100m", "200m"), ("64Mi", "128Mi"));
    let desired = burstable("a", ("5", "5"), ("64Mi", "128Mi"));
    let pod = allocated_pod(&desired, &allocation(&allocated));
    assert!(!differs(&pod, &allocation(&allocated)));
    assert_eq!(
        pod.spec.as_ref().unwrap().containers[0].resources,
        allocated.spec.unwrap().containers[0].resources
    );
}

#[test]
fn k6_equal_amounts_in_other_units_are_no_resize() {
    let a = burstable("a", ("1", "2"), ("1Gi", "2Gi"));
    let b = burstable("a", ("1000m", "2000m"), ("1024Mi", "2048Mi"));
    assert!(!differs(&b, &allocation(&a)));
}

#[test]
fn k6_resize_policy_restarts_only_for_its_resource() {
    let container: k8s_openapi::api::core::v1::Container = serde_json::from_value(json!({
        "name": "app",
        "resizePolicy": [
            {"resourceName": "cpu", "restartPolicy": "NotRequired"},
            {"resourceName": "memory", "restartPolicy": "RestartContainer"},
        ],
    }))
    .unwrap();
    assert!(!restart_needed(&container, &[Resource::Cpu]));
    assert!(restart_needed(&container, &[Resource::Memory]));
    assert!(restart_needed(&container, &[Resource::Cpu, Resource::Memory]));
    let default: k8s_openapi::api::core::v1::Container =
        serde_json::from_value(json!({"name": "app"})).unwrap();
    assert!(!restart_needed(&default, &[Resource::Memory]));
}

#[test]
fn k6_memory_request_alone_changes_no_cgroup() {
    let a = Amounts::of(
        burstable("a", ("1", "2"), ("1Gi", "2Gi")).spec.unwrap().containers[0].resources.as_ref(),
    );
    let b = Amounts::of(
        burstable("a", ("1", "2"), ("1500Mi", "2Gi")).spec.unwrap().containers[0]
            .resources
            .as_ref(),
    );
    assert!(a.changed(&b).is_empty());
    let c = Amounts::of(
        burstable("a", ("1", "3"), ("1Gi", "3Gi")).spec.unwrap().containers[0].resources.as_ref(),
    );
    assert_eq!(a.changed(&c), vec![Resource::Cpu, Resource::Memory]);
}

#[test]
fn k6_growth_writes_the_pod_cgroup_first_and_shrinking_last() {
    let small = for_pod(&burstable("a", ("100m", "200m"), ("64Mi", "128Mi")), None);
    let large = for_pod(&burstable("a", ("200m", "400m"), ("128Mi", "256Mi")), None);
    let both = [Resource::Memory, Resource::Cpu];
    assert_eq!(
        order(&small, &large, &both),
        vec![
            Step::PodCgroup(Resource::Memory),
            Step::Containers(Resource::Memory),
            Step::PodCgroup(Resource::Cpu),
            Step::Containers(Resource::Cpu),
        ]
    );
    assert_eq!(
        order(&large, &small, &both),
        vec![
            Step::Containers(Resource::Memory),
            Step::PodCgroup(Resource::Memory),
            Step::Containers(Resource::Cpu),
            Step::PodCgroup(Resource::Cpu),
        ]
    );
    assert_eq!(order(&small, &small, &[Resource::Cpu]), vec![Step::Containers(Resource::Cpu)]);
}

#[test]
fn k6_resizable_part_keeps_cpu_and_memory_only() {
    let resources: ResourceRequirements = serde_json::from_value(json!({
        "requests": {"cpu": "1", "ephemeral-storage": "1Gi"},
        "limits": {"memory": "1Gi", "example.com/gpu": "1"},
    }))
    .unwrap();
    let part = resizable_part(Some(&resources)).unwrap();
    assert_eq!(part.requests.unwrap().keys().collect::<Vec<_>>(), ["cpu"]);
    assert_eq!(part.limits.unwrap().keys().collect::<Vec<_>>(), ["memory"]);
}

/// A resize request: a pod's index and its new cpu and memory (request, limit).
type Request = (usize, (i64, i64), (i64, i64));

fn requests() -> impl Strategy<Value = Vec<Request>> {
    let amount = |max: i64| (1..max).prop_flat_map(move |r| (Just(r), r..=max));
    proptest::collection::vec((0..4usize, amount(3000), amount(2048)), 1..24)
}

fn sized(uid: &str, cpu: (i64, i64), memory: (i64, i64)) -> Pod {
    let (c, m) = (cpu, memory);
    burstable(
        uid,
        (&format!("{}m", c.0), &format!("{}m", c.1)),
        (&format!("{}Mi", m.0), &format!("{}Mi", m.1)),
    )
}

proptest! {
    /// K6: whatever resizes are asked for, the pods' allocated requests never exceed the
    /// node's allocatable, and no accepted resize changes a pod's QoS class.
    #[test]
    fn k6_allocated_never_exceeds_allocatable(resizes in requests()) {
        let node = node(4000, 4096 << 20);
        let mut pods: Vec<Pod> = (0..4).map(|i| sized(&format!("p{i}"), (200, 400), (128, 256))).collect();
        for (index, cpu, memory) in resizes {
            let desired = sized(&format!("p{index}"), cpu, memory);
            let others: Vec<Admitted> = pods.iter().cloned().map(admitted).collect();
            if decide(&node, &others, &pods[index], &desired).is_ok() {
                prop_assert_eq!(qos_class(&desired), qos_class(&pods[index]));
                pods[index] = allocated_pod(&desired, &allocation(&desired));
            }
            let cpu: i64 = pods.iter().map(|p| qos::pod_request(p, "cpu")).sum();
            let memory: i64 = pods.iter().map(|p| qos::pod_request(p, "memory")).sum();
            prop_assert!(cpu <= 4000 && memory <= 4096 << 20, "cpu {cpu} memory {memory}");
            prop_assert!(pods.iter().all(|p| qos_class(p) == QosClass::Burstable || qos_class(p) == QosClass::Guaranteed));
        }
    }

    /// The order writes each changed resource's pod cgroup and containers exactly once
    /// each, the pod's first only when the resource grows.
    #[test]
    fn k6_order_writes_each_changed_resource_once(a in (1i64..4000, 1i64..4000), b in (1i64..4000, 1i64..4000)) {
        let old = for_pod(&sized("p", (a.0.min(a.1), a.0.max(a.1)), (64, 128)), None);
        let new = for_pod(&sized("p", (b.0.min(b.1), b.0.max(b.1)), (64, 128)), None);
        let steps = order(&old, &new, &[Resource::Cpu]);
        prop_assert_eq!(steps.iter().filter(|s| **s == Step::Containers(Resource::Cpu)).count(), 1);
        prop_assert!(steps.iter().filter(|s| **s == Step::PodCgroup(Resource::Cpu)).count() <= 2);
        prop_assert!(!steps.iter().any(|s| matches!(s, Step::PodCgroup(Resource::Memory) | Step::Containers(Resource::Memory))));
        if new.cpu_quota > old.cpu_quota && new.cpu_shares >= old.cpu_shares {
            prop_assert_eq!(steps[0], Step::PodCgroup(Resource::Cpu));
        }
    }
}
