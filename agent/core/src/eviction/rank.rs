//! Which pod goes: the pods ranked as kubelet ranks them for the starved resource, the
//! first one that may be evicted, the grace period it gets and kubelet's message.
//!
//! - Memory: pods using more than they request first, then lower priority first, then
//!   the larger use above the request first.
//! - Ephemeral storage and inodes: the same on disk use (writable layers, logs and local
//!   volumes).
//! - PIDs: lower priority first, then more processes first.
//!
//! A pod whose usage could not be read ranks first, as in kubelet. Static pods, mirror
//! pods and pods at a system-critical priority are never evicted (kubelet's
//! `IsCriticalPod`); one pod is evicted per pass.

use std::cmp::Ordering;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::format;
use super::manager::Reclaim;
use super::signal::{Observations, Resource, Signal};
use super::threshold::Threshold;
use crate::lifecycle;
use crate::pod::{self, CONFIG_MIRROR, Source};
use crate::qos;

/// kubelet's `SystemCriticalPriority`: pods at or above it are never evicted.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// kubelet's `immediateEvictionGracePeriodSeconds`: a hard threshold's victim gets this.
pub const IMMEDIATE_GRACE_PERIOD: Duration = Duration::from_secs(1);

/// What a container uses (a figure its stats do not give is `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerStats {
    pub name: String,
    /// Working set, bytes.
    pub memory: Option<u64>,
    /// Writable layer and logs, bytes.
    pub disk: Option<u64>,
}

/// What a pod uses, from its cgroup and its files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodStats {
    /// The pod cgroup's working set, bytes.
    pub memory: u64,
    /// Writable layers, logs and local volumes, bytes.
    pub disk: u64,
    /// Inodes of the same.
    pub inodes: u64,
    /// Processes and threads in the pod cgroup.
    pub processes: u64,
    pub containers: Vec<ContainerStats>,
}

/// A running pod that may be ranked.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub pod: Arc<Pod>,
    pub source: Source,
    /// `None`: its usage could not be read.
    pub stats: Option<PodStats>,
}

impl Candidate {
    /// Never evicted: static and mirror pods, and system-critical priorities.
    pub fn is_critical(&self) -> bool {
        self.source.is_static()
            || pod::annotation(&self.pod, CONFIG_MIRROR).is_some()
            || crate::admission::priority(&self.pod) >= SYSTEM_CRITICAL_PRIORITY
    }

    fn priority(&self) -> i32 {
        crate::admission::priority(&self.pod)
    }

    fn usage(&self, resource: Resource) -> Option<i64> {
        let stats = self.stats.as_ref()?;
        let value = match resource {
            Resource::Memory => stats.memory,
            Resource::EphemeralStorage => stats.disk,
            Resource::Inodes => stats.inodes,
            Resource::Pids => stats.processes,
        };
        Some(i64::try_from(value).unwrap_or(i64::MAX))
    }

    fn request(&self, resource: Resource) -> i64 {
        match resource {
            Resource::Memory => qos::pod_request(&self.pod, "memory"),
            Resource::EphemeralStorage => qos::pod_request(&self.pod, "ephemeral-storage"),
            Resource::Inodes | Resource::Pids => 0,
        }
    }
}

/// Orders `candidates` for `resource`, the first to evict first.
pub fn rank(candidates: &mut [Candidate], resource: Resource) {
    candidates.sort_by(|a, b| compare(a, b, resource));
}

fn compare(a: &Candidate, b: &Candidate, resource: Resource) -> Ordering {
    // Unknown usage first, in every comparison (kubelet's `cmpBool(!found…)`).
    match (a.stats.is_none(), b.stats.is_none()) {
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (true, true) => return Ordering::Equal,
        (false, false) => {}
    }
    let priority = a.priority().cmp(&b.priority());
    let usage = |c: &Candidate| c.usage(resource).unwrap_or(0);
    match resource {
        Resource::Pids => priority.then_with(|| usage(b).cmp(&usage(a))),
        Resource::Memory | Resource::EphemeralStorage | Resource::Inodes => {
            let exceeds = |c: &Candidate| usage(c) > c.request(resource);
            // The amount above the request: kubelet subtracts the ephemeral-storage
            // request for inodes too.
            let request = |c: &Candidate| match resource {
                Resource::Memory => c.request(Resource::Memory),
                _ => c.request(Resource::EphemeralStorage),
            };
            let above = |c: &Candidate| usage(c).saturating_sub(request(c));
            exceeds(b).cmp(&exceeds(a)).then(priority).then_with(|| above(b).cmp(&above(a)))
        }
    }
}

/// The eviction decided: whom, with what grace period, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub source: Source,
    pub signal: Signal,
    pub grace_period: Duration,
    /// kubelet's message, for `status.message` and the `Evicted` Event.
    pub message: String,
}

/// The first pod of `ranked` that may be evicted for `reclaim`. `met` are the thresholds
/// driving eviction (for the message's threshold and available figures).
pub fn victim(
    ranked: &[Candidate],
    reclaim: &Reclaim,
    met: &[Threshold],
    observations: &Observations,
    max_pod_grace_period: i64,
) -> Option<Eviction> {
    let candidate = ranked.iter().find(|c| !c.is_critical())?;
    let grace_period = if reclaim.threshold.is_hard() {
        IMMEDIATE_GRACE_PERIOD
    } else {
        let max = Duration::from_secs(u64::try_from(max_pod_grace_period).unwrap_or(0));
        lifecycle::grace_period(&candidate.pod).min(max)
    };
    let meta = &candidate.pod.metadata;
    Some(Eviction {
        uid: pod::uid(&candidate.pod).to_owned(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        source: candidate.source,
        signal: reclaim.signal(),
        grace_period,
        message: message(reclaim.resource, candidate, met, observations),
    })
}

/// kubelet's `evictionMessage`: the resource, the threshold and what was available, and
/// each container using more of the resource than it requests.
pub fn message(
    resource: Resource,
    candidate: &Candidate,
    met: &[Threshold],
    observations: &Observations,
) -> String {
    let print = |value: i64| {
        if resource.is_bytes() { format::bytes(value) } else { format::count(value) }
    };
    let mut message = format!("The node was low on resource: {resource}. ");
    let threshold = met.iter().find_map(|t| {
        let observed = observations.get(t.signal).filter(|_| t.signal.resource() == resource)?;
        Some((t.value.quantity(observed.capacity), observed.available))
    });
    if let Some((quantity, available)) = threshold {
        message +=
            &format!("Threshold quantity: {}, available: {}. ", print(quantity), print(available));
    }
    let Some(stats) = &candidate.stats else { return message };
    let spec = candidate.pod.spec.as_ref();
    let containers: Vec<&Container> = spec
        .into_iter()
        .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
        .collect();
    let resource_name = match resource {
        Resource::Memory => "memory",
        Resource::EphemeralStorage => "ephemeral-storage",
        Resource::Inodes | Resource::Pids => return message,
    };
    for container in containers {
        let Some(used) = stats.containers.iter().find(|c| c.name == container.name) else {
            continue;
        };
        let usage = match resource {
            Resource::Memory => used.memory,
            _ => used.disk,
        };
        let Some(usage) = usage.map(|u| i64::try_from(u).unwrap_or(i64::MAX)) else { continue };
        let request = qos::container_request(container, resource_name);
        if usage > request {
            let resources = container.resources.as_ref();
            let written = [
                resources.and_then(|r| r.requests.as_ref()),
                resources.and_then(|r| r.limits.as_ref()),
            ]
            .into_iter()
            .flatten()
            .find_map(|list| list.get(resource_name))
            .map_or_else(|| "0".to_owned(), |q| q.0.clone());
            message += &format!(
                "Container {} was using {}, request is {written}, has larger consumption of {resource}. ",
                container.name,
                format::bytes(usage),
            );
        }
    }
    message
}
