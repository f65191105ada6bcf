//! Q1: the worker's status carries the pod's QoS class, computed from its spec (kubelet
//! sets it from the spec, whatever the status the pod came with says), also for a pod
//! admission refused.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;

fn list(items: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    (!items.is_empty())
        .then(|| items.iter().map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned()))).collect())
}

impl P {
    fn resources(mut self, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> P {
        let c = &mut self.spec().containers[0];
        c.resources = Some(ResourceRequirements {
            requests: list(requests),
            limits: list(limits),
            ..ResourceRequirements::default()
        });
        self
    }
}

fn qos_of(p: P) -> Option<String> {
    let mut d = Driver::new();
    d.drive(p.input());
    assert_eq!(d.phase(), "Running");
    d.status().qos_class
}

#[test]
fn q1_the_status_names_each_class() {
    assert_eq!(qos_of(web()).as_deref(), Some("BestEffort"));
    let limited = [("cpu", "200m"), ("memory", "64Mi")];
    assert_eq!(qos_of(web().resources(&[], &limited)).as_deref(), Some("Guaranteed"));
    assert_eq!(qos_of(web().resources(&limited, &limited)).as_deref(), Some("Guaranteed"));
    let burstable = web().resources(&[("cpu", "100m")], &[("cpu", "200m")]);
    assert_eq!(qos_of(burstable).as_deref(), Some("Burstable"));
}

#[test]
fn q1_the_class_comes_from_the_spec_not_the_status_the_pod_came_with() {
    let mut p = web();
    p.0.status = Some(PodStatus { qos_class: Some("Guaranteed".into()), ..PodStatus::default() });
    assert_eq!(qos_of(p).as_deref(), Some("BestEffort"));
}

#[test]
fn q1_pod_level_resources_decide_the_class() {
    let mut p = web();
    let limited = [("cpu", "1"), ("memory", "1Gi")];
    p.spec().resources =
        Some(ResourceRequirements { limits: list(&limited), ..ResourceRequirements::default() });
    assert_eq!(qos_of(p).as_deref(), Some("Guaranteed"));
}

#[test]
fn q1_a_refused_pod_reports_its_class_too() {
    let mut p = web().resources(&[("memory", "10Mi")], &[]);
    p.spec().host_users = Some(false);
    let mut d = Driver::new();
    d.drive(p.input());
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.qos_class.as_deref(), Some("Burstable"));
}
