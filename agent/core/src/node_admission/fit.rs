//! Resources (K4): the scheduler's `noderesources.Fits` as kubelet calls it. A pod's
//! requests are kubelet's `PodRequests` (app containers and sidecars added up, or an init
//! container with the sidecars started before it if more; a limit stands for a missing
//! request, as the API server defaults it; plus `spec.overhead`). Pods without requests
//! request nothing; the pod count always counts.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

use super::{Admitted, Node};
use crate::qos;
use crate::quantity::Quantity;

/// A resource the node has too little of for the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insufficient {
    pub resource: String,
    pub requested: i64,
    pub used: i64,
    pub capacity: i64,
}

impl Insufficient {
    /// kubelet's reason: `OutOf` and the resource (`OutOfcpu`, `OutOfpods`).
    pub fn reason(&self) -> String {
        format!("OutOf{}", self.resource)
    }

    /// kubelet's `InsufficientResourceError` message.
    pub fn message(&self) -> String {
        let Insufficient { resource, requested, used, capacity } = self;
        format!(
            "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
        )
    }

    /// How much more is needed than is free.
    pub fn amount(&self) -> i64 {
        self.requested.saturating_sub(self.capacity.saturating_sub(self.used))
    }
}

/// A quantity in the resource's unit: millicores for cpu, the value (rounded up) for
/// the others.
pub(super) fn in_unit(quantity: &str, resource: &str) -> Option<i64> {
    let scale = if resource == "cpu" { 3 } else { 0 };
    let scaled = Quantity::parse(quantity.trim()).ok()?.ceil_scaled(scale).ok()?;
    Some(i64::try_from(scaled).unwrap_or(i64::MAX))
}

/// kubelet's `PodRequests`: every resource the pod's containers (or the pod) name, in
/// its unit, with the overhead added.
pub fn pod_requests(pod: &Pod) -> BTreeMap<String, i64> {
    let Some(spec) = pod.spec.as_ref() else { return BTreeMap::new() };
    let mut names = BTreeSet::new();
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    for resources in containers.filter_map(|c| c.resources.as_ref()).chain(spec.resources.as_ref())
    {
        for list in [&resources.requests, &resources.limits].into_iter().flatten() {
            names.extend(list.keys().cloned());
        }
    }
    names.extend(spec.overhead.iter().flat_map(|o| o.keys().cloned()));
    names
        .into_iter()
        .map(|name| {
            let total = qos::pod_request(pod, &name).saturating_add(qos::pod_overhead(pod, &name));
            (name, total)
        })
        .collect()
}

/// kubelet's `IsExtendedResourceName`: a qualified name outside `kubernetes.io/`.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// The scheduler's scalar resources: extended resources, hugepages, prefixed native
/// resources and attachable volumes (the others it does not count).
fn is_scalar(name: &str) -> bool {
    is_extended(name)
        || name.starts_with("hugepages-")
        || name.contains("kubernetes.io/")
        || name.starts_with("attachable-volumes-")
}

const NAMED: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// What `pod` would take beyond what `node` has left after `active`, in kubelet's
/// order: pods, cpu, memory, ephemeral-storage, then the scalar resources by name. An
/// extended resource the node does not have at all is not counted (kubelet's
/// `removeMissingExtendedResources`, for cluster-level resources).
pub fn insufficient(node: &Node, active: &[Admitted], pod: &Pod) -> Vec<Insufficient> {
    let mut short = Vec::new();
    let allocatable = |name: &str| node.allocatable.get(name).copied().unwrap_or(0);
    let used_pods = i64::try_from(active.len()).unwrap_or(i64::MAX);
    if used_pods.saturating_add(1) > allocatable("pods") {
        short.push(Insufficient {
            resource: "pods".to_owned(),
            requested: 1,
            used: used_pods,
            capacity: allocatable("pods"),
        });
    }
    let mut requests = pod_requests(pod);
    requests.retain(|name, _| {
        let counted = NAMED.contains(&name.as_str()) || is_scalar(name);
        let missing_extended = is_extended(name) && !node.allocatable.contains_key(name);
        counted && !missing_extended
    });
    if requests.values().all(|v| *v == 0) {
        return short;
    }
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for admitted in active {
        for (name, value) in pod_requests(&admitted.pod) {
            let total = used.entry(name).or_default();
            *total = total.saturating_add(value);
        }
    }
    let scalars = requests.keys().filter(|n| !NAMED.contains(&n.as_str()));
    let order: Vec<&str> = NAMED.into_iter().chain(scalars.map(String::as_str)).collect();
    for name in order {
        let requested = requests.get(name).copied().unwrap_or(0);
        let used = used.get(name).copied().unwrap_or(0);
        let capacity = allocatable(name);
        if requested > 0 && requested > capacity.saturating_sub(used) {
            short.push(Insufficient { resource: name.to_owned(), requested, used, capacity });
        }
    }
    short
}
