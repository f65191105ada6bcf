//! A pod's QoS class and its resource totals, as kubelet computes them (Q1): the class
//! from its containers' (or the pod-level) requests and limits of cpu and memory, and the
//! pod's requests and limits of a resource the way kubelet's resource helpers add them up
//! (app containers and sidecars together, an init container alone with the sidecars
//! started before it, the larger of the two).
//!
//! A container's request that is not set is its limit, as the API server (and kubelet's
//! decoding of static pods) defaults it. Quantities are compared and added exactly, in
//! nano-units.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::quantity::Quantity;

/// The resources the QoS class is computed from.
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// `status.qosClass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QosClass {
    /// Every container (or the pod) has cpu and memory limits equal to its requests.
    Guaranteed,
    /// Some requests or limits, not Guaranteed.
    Burstable,
    /// No requests or limits at all.
    BestEffort,
}

impl QosClass {
    /// The name in `status.qosClass`.
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }

    /// The name of the class's cgroup under the pods cgroup (kubelet's), `None` for
    /// Guaranteed, whose pods sit right under the pods cgroup.
    pub fn cgroup_name(self) -> Option<&'static str> {
        match self {
            QosClass::Guaranteed => None,
            QosClass::Burstable => Some("burstable"),
            QosClass::BestEffort => Some("besteffort"),
        }
    }
}

/// A quantity in nano-units (exact for every quantity a pod sets; saturating).
fn nanos(quantity: &ApiQuantity) -> Option<u128> {
    Quantity::parse(&quantity.0).ok()?.ceil_scaled(9).ok()
}

/// kubelet's `ComputePodQOS`: from the pod-level resources when the pod sets them, else
/// from every app and init container (ephemeral containers set none).
pub fn qos_class(pod: &Pod) -> QosClass {
    let Some(spec) = pod.spec.as_ref() else { return QosClass::BestEffort };
    let mut requests: BTreeMap<&str, u128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, u128> = BTreeMap::new();
    let mut guaranteed = true;
    let mut add = |resources: &ResourceRequirements, guaranteed: &mut bool| {
        let mut limited = 0;
        for name in QOS_RESOURCES {
            let limit = resources.limits.as_ref().and_then(|l| l.get(name)).and_then(nanos);
            let request = resources.requests.as_ref().and_then(|r| r.get(name)).and_then(nanos);
            if let Some(limit) = limit.filter(|l| *l > 0) {
                limited += 1;
                *limits.entry(name).or_default() += limit;
            }
            // An unset request is the limit (defaulting).
            if let Some(request) = request.or(limit).filter(|r| *r > 0) {
                *requests.entry(name).or_default() += request;
            }
        }
        if limited < QOS_RESOURCES.len() {
            *guaranteed = false;
        }
    };
    match spec.resources.as_ref().filter(|r| is_set(r)) {
        Some(pod_level) => add(pod_level, &mut guaranteed),
        None => {
            for container in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
                add(&container.resources.clone().unwrap_or_default(), &mut guaranteed);
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    let equal = requests.iter().all(|(name, request)| limits.get(name) == Some(request));
    if guaranteed && equal && requests.len() == limits.len() {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// Whether `resources` (the pod-level ones) set any request or limit.
fn is_set(resources: &ResourceRequirements) -> bool {
    resources.requests.as_ref().is_some_and(|r| !r.is_empty())
        || resources.limits.as_ref().is_some_and(|l| !l.is_empty())
}

/// The unit a resource is counted in: millicores for cpu, the plain value (bytes, pids)
/// for the others.
fn scale(resource: &str) -> i32 {
    if resource == "cpu" { 3 } else { 0 }
}

fn in_unit(quantity: &ApiQuantity, resource: &str) -> Option<i64> {
    let scaled = Quantity::parse(&quantity.0).ok()?.ceil_scaled(scale(resource)).ok()?;
    Some(i64::try_from(scaled).unwrap_or(i64::MAX))
}

/// A container's request of `resource` (its limit when no request is set), in the
/// resource's unit (millicores for cpu, bytes for memory and storage); 0 if neither.
pub fn container_request(container: &Container, resource: &str) -> i64 {
    let Some(resources) = container.resources.as_ref() else { return 0 };
    let request = resources.requests.as_ref().and_then(|r| r.get(resource));
    let limit = resources.limits.as_ref().and_then(|l| l.get(resource));
    request.or(limit).and_then(|q| in_unit(q, resource)).unwrap_or(0)
}

/// A container's limit of `resource` in its unit (`None`: not limited).
pub fn container_limit(container: &Container, resource: &str) -> Option<i64> {
    let limits = container.resources.as_ref()?.limits.as_ref()?;
    limits.get(resource).and_then(|q| in_unit(q, resource)).filter(|v| *v > 0)
}

/// The pod-level request or limit of `resource`, when the pod sets `spec.resources`.
fn pod_level(pod: &Pod, kind: Kind, resource: &str) -> Option<i64> {
    let resources = pod.spec.as_ref()?.resources.as_ref()?;
    let list = match kind {
        Kind::Requests => resources.requests.as_ref().or(resources.limits.as_ref())?,
        Kind::Limits => resources.limits.as_ref()?,
    };
    list.get(resource).and_then(|q| in_unit(q, resource))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Requests,
    Limits,
}

/// kubelet's `PodRequests` for one resource: the pod-level request if set, else the app
/// containers and sidecars added up, or an init container with the sidecars started
/// before it if that is more. In the resource's unit.
pub fn pod_request(pod: &Pod, resource: &str) -> i64 {
    if let Some(value) = pod_level(pod, Kind::Requests, resource) {
        return value;
    }
    aggregate(pod, |c| Some(container_request(c, resource))).unwrap_or(0)
}

/// kubelet's `PodLimits` for one resource: the pod-level limit if set, else the
/// containers' limits aggregated as [`pod_request`] does; `None` when a container that
/// counts has no limit (the pod as a whole is then unlimited).
pub fn pod_limit(pod: &Pod, resource: &str) -> Option<i64> {
    if let Some(value) = pod_level(pod, Kind::Limits, resource) {
        return Some(value);
    }
    aggregate(pod, |c| container_limit(c, resource))
}

/// The pod's `spec.overhead` of `resource` in its unit (0 when it names none): what the
/// API server's RuntimeClass admission copied from the pod's class, or what a static
/// pod sets itself (D5). kubelet adds it to the pod's requests, and to each of its limits
/// that is set, for admission and for the pod's cgroup.
pub fn pod_overhead(pod: &Pod, resource: &str) -> i64 {
    let overhead = pod.spec.as_ref().and_then(|s| s.overhead.as_ref());
    overhead.and_then(|o| o.get(resource)).and_then(|q| in_unit(q, resource)).unwrap_or(0)
}

/// Apps and sidecars summed, against each init container plus the sidecars before it;
/// `None` as soon as one of them has no value.
fn aggregate(pod: &Pod, value: impl Fn(&Container) -> Option<i64>) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let mut total: i64 = 0;
    for container in &spec.containers {
        total = total.saturating_add(value(container)?);
    }
    let mut sidecars: i64 = 0;
    let mut init_peak: i64 = 0;
    for container in spec.init_containers.iter().flatten() {
        let own = value(container)?;
        if container.restart_policy.as_deref() == Some("Always") {
            sidecars = sidecars.saturating_add(own);
            total = total.saturating_add(own);
        } else {
            init_peak = init_peak.max(own.saturating_add(sidecars));
        }
    }
    Some(total.max(init_peak))
}
