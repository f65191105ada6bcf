//! In-place resize of a running pod's containers (KEP-1287, K6), decided as kubelet 1.33
//! decides it, without IO.
//!
//! - The pod's *allocated* resources are those the node accepted: at admission, the
//!   spec's; after that, a change of a container's cpu or memory (the API server's
//!   `pods/resize`) is allocated only if it fits ([`decide`]): a pod whose requests exceed
//!   the node's allocatable is `Infeasible` (`Node didn't have enough capacity: ...`),
//!   one that does not fit beside the other pods' allocated resources `Deferred` (the
//!   fit's `Node didn't have enough resource: ...`), and neither may change the pod's
//!   QoS class (the API server refuses that; the node does too). Until then the
//!   containers keep running with, and new ones start with, the allocated resources
//!   ([`allocated_pod`]).
//! - A running container whose actual resources differ from its allocated ones is
//!   updated in place, unless its `resizePolicy` says `RestartContainer` for a resource
//!   that changed ([`restart_needed`]): then just that container restarts.
//! - The pod's cgroup and its containers' are written in kubelet's order
//!   ([`order`]): for a resource that grows the pod's cgroup first, for one that shrinks
//!   the containers first. A memory limit below what the container uses is tried, as
//!   kubelet 1.33 tries it; the kernel may refuse it.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::node_admission::{self, Admitted, Node};
use crate::qos::{self, qos_class};
use crate::quantity::Quantity;
use crate::resource_config::ResourceConfig;

/// The pod condition of a resize the node has not allocated yet.
pub const POD_RESIZE_PENDING: &str = "PodResizePending";
/// The pod condition of an allocated resize not yet actuated in every running container.
pub const POD_RESIZE_IN_PROGRESS: &str = "PodResizeInProgress";
/// `PodResizeInProgress`'s reason when the runtime failed to actuate it.
pub const REASON_ERROR: &str = "Error";
/// The API server's words (and the node's) for a resize that would change the QoS class.
pub const QOS_CHANGE_MESSAGE: &str = "Pod QOS Class may not change as a result of resizing";
/// `resizePolicy.restartPolicy` that restarts the container for a change of its resource.
pub const RESTART_CONTAINER: &str = "RestartContainer";
/// The resources a resize may change.
pub const RESIZABLE: [&str; 2] = ["cpu", "memory"];

/// Why a resize is not allocated (yet): kubelet's `PodResizePending` reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingReason {
    /// It can never fit this node as it is.
    Infeasible,
    /// It may fit once other pods give resources back.
    Deferred,
}

impl PendingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PendingReason::Infeasible => "Infeasible",
            PendingReason::Deferred => "Deferred",
        }
    }
}

/// A resize not allocated, with kubelet's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub reason: PendingReason,
    pub message: String,
}

/// A resource of [`RESIZABLE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    Cpu,
    Memory,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }
}

/// A container's cpu and memory, in their units (millicores, bytes); `None`: not set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    pub cpu_request: Option<i64>,
    pub cpu_limit: Option<i64>,
    pub memory_request: Option<i64>,
    pub memory_limit: Option<i64>,
}

impl Amounts {
    /// The cpu and memory of `resources` (a request unset is its limit, as the API server
    /// defaults it).
    pub fn of(resources: Option<&ResourceRequirements>) -> Amounts {
        let get = |list: Option<&BTreeMap<String, ApiQuantity>>, name: &str| {
            let text = &list?.get(name)?.0;
            let quantity = Quantity::parse(text.trim()).ok()?;
            let scaled = quantity.ceil_scaled(if name == "cpu" { 3 } else { 0 }).ok()?;
            Some(i64::try_from(scaled).unwrap_or(i64::MAX))
        };
        let requests = resources.and_then(|r| r.requests.as_ref());
        let limits = resources.and_then(|r| r.limits.as_ref());
        let cpu_limit = get(limits, "cpu");
        let memory_limit = get(limits, "memory");
        Amounts {
            cpu_request: get(requests, "cpu").or(cpu_limit),
            cpu_limit,
            memory_request: get(requests, "memory").or(memory_limit),
            memory_limit,
        }
    }

    /// Which resources differ between `self` (actual) and `target` as kubelet's
    /// `computePodResizeAction` compares them: cpu by request and limit, memory by limit
    /// (a memory request alone changes no cgroup).
    pub fn changed(&self, target: &Amounts) -> Vec<Resource> {
        let mut changed = Vec::new();
        if self.cpu_request != target.cpu_request || self.cpu_limit != target.cpu_limit {
            changed.push(Resource::Cpu);
        }
        if self.memory_limit != target.memory_limit {
            changed.push(Resource::Memory);
        }
        changed
    }
}

/// Whether two containers' cpu and memory requests and limits are the same amounts.
pub fn same_resources(a: Option<&ResourceRequirements>, b: Option<&ResourceRequirements>) -> bool {
    Amounts::of(a) == Amounts::of(b)
}

/// Only the cpu and memory of `resources` (what a container status reports as its
/// `resources`; `None` when neither is set).
pub fn resizable_part(resources: Option<&ResourceRequirements>) -> Option<ResourceRequirements> {
    let keep = |list: Option<&BTreeMap<String, ApiQuantity>>| {
        let kept: BTreeMap<String, ApiQuantity> = list
            .into_iter()
            .flatten()
            .filter(|(name, _)| RESIZABLE.contains(&name.as_str()))
            .map(|(name, q)| (name.clone(), q.clone()))
            .collect();
        (!kept.is_empty()).then_some(kept)
    };
    let resources = resources?;
    let requests = keep(resources.requests.as_ref());
    let limits = keep(resources.limits.as_ref());
    (requests.is_some() || limits.is_some()).then(|| ResourceRequirements {
        requests,
        limits,
        ..ResourceRequirements::default()
    })
}

/// `container`'s resources with its cpu and memory taken from `from` (the others, and
/// claims, stay the container's).
fn with_resizable(
    container: &Container,
    from: Option<&ResourceRequirements>,
) -> ResourceRequirements {
    let mut resources = container.resources.clone().unwrap_or_default();
    let merge = |mine: &mut Option<BTreeMap<String, ApiQuantity>>,
                 theirs: Option<&BTreeMap<String, ApiQuantity>>| {
        let mut list = mine.take().unwrap_or_default();
        list.retain(|name, _| !RESIZABLE.contains(&name.as_str()));
        for (name, quantity) in theirs.into_iter().flatten() {
            if RESIZABLE.contains(&name.as_str()) {
                list.insert(name.clone(), quantity.clone());
            }
        }
        *mine = (!list.is_empty()).then_some(list);
    };
    merge(&mut resources.requests, from.and_then(|r| r.requests.as_ref()));
    merge(&mut resources.limits, from.and_then(|r| r.limits.as_ref()));
    resources
}

/// The resizable containers of a pod spec (kubelet's `isResizableContainer`): the app
/// containers and the sidecars.
fn resizable_containers(pod: &mut Pod) -> impl Iterator<Item = &mut Container> {
    pod.spec.iter_mut().flat_map(|s| {
        let sidecars = s.init_containers.iter_mut().flatten().filter(|c| crate::pod::is_sidecar(c));
        sidecars.chain(s.containers.iter_mut())
    })
}

/// The resources of each resizable container of `pod`, by name.
pub fn allocation(pod: &Pod) -> BTreeMap<String, ResourceRequirements> {
    let spec = pod.spec.iter();
    let containers = spec.flat_map(|s| {
        let sidecars = s.init_containers.iter().flatten().filter(|c| crate::pod::is_sidecar(c));
        sidecars.chain(s.containers.iter())
    });
    containers.map(|c| (c.name.clone(), c.resources.clone().unwrap_or_default())).collect()
}

/// `desired` with each resizable container's cpu and memory as `allocation` has them
/// (kubelet's `UpdatePodFromAllocation`); containers `allocation` does not name keep
/// theirs.
pub fn allocated_pod(desired: &Pod, allocation: &BTreeMap<String, ResourceRequirements>) -> Pod {
    let mut pod = desired.clone();
    for container in resizable_containers(&mut pod) {
        if let Some(allocated) = allocation.get(&container.name) {
            container.resources = Some(with_resizable(container, Some(allocated)));
        }
    }
    pod
}

/// Whether `desired` asks for other cpu or memory than `allocation` holds.
pub fn differs(desired: &Pod, allocated: &BTreeMap<String, ResourceRequirements>) -> bool {
    allocation(desired).iter().any(|(name, resources)| {
        allocated.get(name).is_some_and(|a| !same_resources(Some(a), Some(resources)))
    })
}

/// kubelet's `canResizePod`: whether the node can allocate `desired` (the pod with its
/// resized resources), which now holds `allocated`, beside `others` (the other active
/// pods, with their allocated resources).
pub fn decide(
    node: &Node,
    others: &[Admitted],
    allocated: &Pod,
    desired: &Pod,
) -> Result<(), Pending> {
    if qos_class(allocated) != qos_class(desired) {
        return Err(Pending {
            reason: PendingReason::Infeasible,
            message: QOS_CHANGE_MESSAGE.to_owned(),
        });
    }
    let allocatable = |name: &str| node.allocatable.get(name).copied().unwrap_or(0);
    let cpu = qos::pod_request(desired, "cpu");
    let memory = qos::pod_request(desired, "memory");
    let (cpu_available, memory_available) = (allocatable("cpu"), allocatable("memory"));
    if cpu > cpu_available || memory > memory_available {
        let what = if memory > memory_available {
            format!("memory, requested: {memory}, capacity: {memory_available}")
        } else {
            format!("cpu, requested: {cpu}, capacity: {cpu_available}")
        };
        return Err(Pending {
            reason: PendingReason::Infeasible,
            message: format!("Node didn't have enough capacity: {what}"),
        });
    }
    let uid = crate::pod::uid(desired);
    let others: Vec<Admitted> = others.iter().filter(|a| a.uid != uid).cloned().collect();
    let short = node_admission::insufficient(node, &others, desired);
    match short.first() {
        None => Ok(()),
        Some(short) => Err(Pending { reason: PendingReason::Deferred, message: short.message() }),
    }
}

/// Whether a change of `changed` restarts `container` (its `resizePolicy` says
/// `RestartContainer` for one of them; unset is `NotRequired`).
pub fn restart_needed(container: &Container, changed: &[Resource]) -> bool {
    let policies = container.resize_policy.iter().flatten();
    policies
        .filter(|p| p.restart_policy == RESTART_CONTAINER)
        .any(|p| changed.iter().any(|r| r.as_str() == p.resource_name))
}

/// One write of a resize, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The pod's cgroup, for this resource, to the new config.
    PodCgroup(Resource),
    /// The containers' cgroups (through the runtime), for this resource.
    Containers(Resource),
}

/// kubelet's `doPodResizeAction` order from the pod cgroup's `old` config to `new`: per
/// resource (memory, then cpu) that changes in the containers or the pod, the pod's
/// cgroup first where the resource grows, the containers, then the pod's cgroup where it
/// shrinks. Unlimited counts as more than any limit.
pub fn order(old: &ResourceConfig, new: &ResourceConfig, containers: &[Resource]) -> Vec<Step> {
    let unlimited = |v: Option<i64>| v.unwrap_or(i64::MAX);
    let memory = (unlimited(old.memory_limit), unlimited(new.memory_limit));
    let cpu_limit = (unlimited(old.cpu_quota), unlimited(new.cpu_quota));
    let cpu_request = (old.cpu_shares, new.cpu_shares);
    let mut steps = Vec::new();
    let mut resource = |r: Resource, grows: bool, shrinks: bool| {
        if !grows && !shrinks && !containers.contains(&r) {
            return;
        }
        if grows {
            steps.push(Step::PodCgroup(r));
        }
        if containers.contains(&r) {
            steps.push(Step::Containers(r));
        }
        if shrinks {
            steps.push(Step::PodCgroup(r));
        }
    };
    resource(Resource::Memory, memory.1 > memory.0, memory.1 < memory.0);
    let cpu_grows = cpu_limit.1 > cpu_limit.0 || cpu_request.1 > cpu_request.0;
    let cpu_shrinks = cpu_limit.1 < cpu_limit.0 || cpu_request.1 < cpu_request.0;
    resource(Resource::Cpu, cpu_grows, cpu_shrinks);
    steps
}
