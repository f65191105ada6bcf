//! K6: in-place resize in the worker.

use k8s_openapi::api::core::v1::ResourceRequirements;
use serde_json::json;

use super::*;
use crate::resize::{Pending, PendingReason};

impl P {
    /// Container `c`'s cpu and memory (request, limit) and its resizePolicy for memory.
    fn sized(mut self, cpu: (&str, &str), memory: (&str, &str), memory_policy: &str) -> P {
        let c = self.spec().containers.iter_mut().find(|c| c.name == "c").unwrap();
        c.resources = Some(resources(cpu, memory));
        c.resize_policy = Some(
            serde_json::from_value(json!([
                {"resourceName": "cpu", "restartPolicy": "NotRequired"},
                {"resourceName": "memory", "restartPolicy": memory_policy},
            ]))
            .unwrap(),
        );
        self
    }

    fn pending(&self, pending: Pending) -> Input {
        let Input::Desired(Some(mut desired)) = self.input() else { unreachable!() };
        desired.resize_pending = Some(pending);
        Input::Desired(Some(desired))
    }
}

fn resources(cpu: (&str, &str), memory: (&str, &str)) -> ResourceRequirements {
    serde_json::from_value(json!({
        "requests": {"cpu": cpu.0, "memory": memory.0},
        "limits": {"cpu": cpu.1, "memory": memory.1},
    }))
    .unwrap()
}

fn condition(status: &PodStatus, kind: &str) -> Option<PodCondition> {
    status.conditions.iter().flatten().find(|c| c.type_ == kind).cloned()
}

#[test]
fn k6_the_hash_leaves_out_cpu_memory_and_resize_policy() {
    let small = web().sized(("100m", "200m"), ("64Mi", "128Mi"), "NotRequired");
    let large = web().sized(("1", "2"), ("1Gi", "2Gi"), "RestartContainer");
    assert_eq!(small.hash("c"), large.hash("c"));
    assert_ne!(small.hash("c"), small.clone().image("c", "img:2").hash("c"));
}

#[test]
fn k6_a_resize_updates_the_running_container_in_place() {
    let small = web().sized(("100m", "200m"), ("64Mi", "128Mi"), "NotRequired");
    let mut d = Driver::new();
    d.run(&small);
    let large = web().sized(("200m", "400m"), ("128Mi", "256Mi"), "NotRequired");
    let actions = d.drive(large.input());
    assert_eq!(shown(&actions), ["ResizeContainers c/c-1"]);
    let Action::ResizeContainers { containers, actual, .. } = &actions[0] else { unreachable!() };
    assert_eq!(containers[0].resources, resources(("200m", "400m"), ("128Mi", "256Mi")));
    assert_eq!(
        containers[0].changed,
        [crate::resize::Resource::Cpu, crate::resize::Resource::Memory]
    );
    let was = &actual.spec.as_ref().unwrap().containers[0].resources;
    assert_eq!(was.as_ref(), Some(&resources(("100m", "200m"), ("64Mi", "128Mi"))));
    // Under way: in progress, the old resources still the actual ones; nothing twice.
    let status = d.status();
    assert!(condition(&status, "PodResizeInProgress").is_some());
    assert_eq!(d.container("c").resources, Some(resources(("100m", "200m"), ("64Mi", "128Mi"))));
    assert!(d.step(Input::Tick).is_empty());
    let applied = vec![("c-1".to_owned(), resources(("200m", "400m"), ("128Mi", "256Mi")))];
    assert!(d.step(Input::Resized { applied, error: None }).is_empty());
    let status = d.status();
    assert_eq!(condition(&status, "PodResizeInProgress"), None);
    assert_eq!(condition(&status, "PodResizePending"), None);
    let c = d.container("c");
    assert_eq!(c.resources, Some(resources(("200m", "400m"), ("128Mi", "256Mi"))));
    assert_eq!(c.allocated_resources, resources(("200m", "400m"), ("128Mi", "256Mi")).requests);
    assert_eq!(c.restart_count, 0);
}

#[test]
fn k6_restart_container_policy_restarts_just_that_container() {
    let small = web().sized(("100m", "200m"), ("64Mi", "128Mi"), "RestartContainer");
    let mut d = Driver::new();
    d.run(&small);
    let large = web().sized(("100m", "200m"), ("128Mi", "256Mi"), "RestartContainer");
    let actions = shown(&d.drive(large.input()));
    assert_eq!(
        actions,
        [
            "Event Normal Killing c: Container c resize requires restart",
            "Signal Term c-1",
            "CheckExited c-1"
        ]
    );
    let actions = shown(&d.drive(d.exit("c-1", 137)));
    assert!(actions.contains(&"StartContainer u1/c rc=1".to_owned()), "{actions:?}");
    assert_eq!(d.restart_count("c"), 1);
    assert_eq!(d.container("c").resources, Some(resources(("100m", "200m"), ("128Mi", "256Mi"))));
}

#[test]
fn k6_a_failed_resize_is_in_progress_with_error_and_not_retried_until_it_changes() {
    let small = web().sized(("100m", "200m"), ("64Mi", "128Mi"), "NotRequired");
    let mut d = Driver::new();
    d.run(&small);
    let large = web().sized(("200m", "400m"), ("128Mi", "256Mi"), "NotRequired");
    d.drive(large.input());
    let error = Some("device or resource busy".to_owned());
    assert!(d.step(Input::Resized { applied: vec![], error }).is_empty());
    let c = condition(&d.status(), "PodResizeInProgress").unwrap();
    assert_eq!(
        (c.reason.as_deref(), c.message.as_deref()),
        (Some("Error"), Some("device or resource busy"))
    );
    assert!(d.step(large.input()).is_empty(), "the same resize is not tried again");
    let other = web().sized(("300m", "400m"), ("128Mi", "256Mi"), "NotRequired");
    assert_eq!(shown(&d.step(other.input())), ["ResizeContainers c/c-1"]);
}

#[test]
fn k6_a_pending_resize_shows_kubelets_condition() {
    let small = web().sized(("100m", "200m"), ("64Mi", "128Mi"), "NotRequired");
    let mut d = Driver::new();
    d.run(&small);
    let message = "Node didn't have enough capacity: cpu, requested: 5000, capacity: 2000";
    let pending = Pending { reason: PendingReason::Infeasible, message: message.into() };
    // The dispatcher hands on the pod with its allocated resources: nothing to do.
    assert!(d.step(small.pending(pending)).is_empty());
    let c = condition(&d.status(), "PodResizePending").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("True", Some("Infeasible")));
    assert_eq!(c.message.as_deref(), Some(message));
    assert!(d.step(small.input()).is_empty());
    assert_eq!(condition(&d.status(), "PodResizePending"), None);
}

#[test]
fn k6_containers_of_an_agent_before_resize_are_adopted_not_restarted() {
    let p = web().sized(("100m", "200m"), ("64Mi", "128Mi"), "NotRequired");
    let container = &p.0.spec.as_ref().unwrap().containers[0];
    let legacy = legacy_container_hash(container);
    assert_ne!(legacy, p.hash("c"));
    let mut d = Driver::with_found(vec![found("old-c", "u1", "c", 0, &legacy)]);
    assert_eq!(shown(&d.step(p.input())), ["TrackPod u1", "Watch old-c", "SetUpSandbox u1"]);
    assert!(d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false }).is_empty());
    assert_eq!(d.container("c").container_id.as_deref(), Some("containerd://old-c"));
}

#[test]
fn k6_an_adopted_container_keeps_the_resources_it_was_resized_to() {
    let p = web().sized(("200m", "400m"), ("128Mi", "256Mi"), "NotRequired");
    let mut f = found("old-c", "u1", "c", 0, &p.hash("c"));
    f.resources = Some(resources(("200m", "400m"), ("128Mi", "256Mi")));
    let mut d = Driver::with_found(vec![f]);
    d.step(p.input());
    assert!(d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false }).is_empty());
    assert_eq!(d.container("c").resources, Some(resources(("200m", "400m"), ("128Mi", "256Mi"))));
    assert_eq!(condition(&d.status(), "PodResizeInProgress"), None);
    // One whose label has less than its allocation is resized to it.
    let mut f = found("old-c", "u1", "c", 0, &p.hash("c"));
    f.resources = Some(resources(("100m", "200m"), ("64Mi", "128Mi")));
    let mut d = Driver::with_found(vec![f]);
    d.step(p.input());
    let actions = d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false });
    assert_eq!(shown(&actions), ["ResizeContainers c/old-c"]);
}
