//! Preemption for critical pods (K4): kubelet's `CriticalPodAdmissionHandler`. For each
//! resource short, the amount missing is a requirement; the pods the critical pod may
//! preempt (any non-critical pod, or one of lower priority when both set one) are split
//! by QoS class. kubelet evicts as few guaranteed pods as it can (as if every
//! burstable and best-effort pod went), then as few burstable ones, then best-effort
//! ones; within a class it repeatedly takes the pod closest to covering what is left
//! (the sum over requirements of the squared fraction left uncovered), the smaller
//! request (memory, then cpu) on a tie.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;

use super::{Admitted, Insufficient, fit, is_critical};
use crate::pod::Source;
use crate::qos::{QosClass, qos_class};

/// The preempted pod's status reason and its Event's reason (kubelet's `Preempting`).
pub const PREEMPTED_REASON: &str = "Preempting";
/// The preempted pod's status message and its Event's message.
pub const PREEMPTED_MESSAGE: &str = "Preempted in order to admit critical pod";
/// The message of the preempted pod's `DisruptionTarget` condition.
pub const PREEMPTED_CONDITION_MESSAGE: &str =
    "Pod was preempted by Kubelet to accommodate a critical pod.";

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    resource: String,
    quantity: i64,
}

/// What could not be reclaimed, as kubelet prints it: `[(res: cpu, q: 500), ]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet(Vec<Requirement>);

impl fmt::Display for Unmet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for r in &self.0 {
            write!(f, "(res: {}, q: {}), ", r.resource, r.quantity)?;
        }
        f.write_str("]")
    }
}

/// kubelet's `GetResourceRequest`: 1 for `pods`, else the pod's request in its unit.
fn request(pod: &Pod, resource: &str) -> i64 {
    if resource == "pods" {
        return 1;
    }
    fit::pod_requests(pod).get(resource).copied().unwrap_or(0)
}

/// What is left of `requirements` once `pods` are gone.
fn subtract(requirements: &[Requirement], pods: &[&Admitted]) -> Vec<Requirement> {
    requirements
        .iter()
        .filter_map(|r| {
            let mut quantity = r.quantity;
            for pod in pods {
                quantity = quantity.saturating_sub(request(&pod.pod, &r.resource));
                if quantity <= 0 {
                    break;
                }
            }
            (quantity > 0).then(|| Requirement { resource: r.resource.clone(), quantity })
        })
        .collect()
}

#[allow(clippy::cast_precision_loss, reason = "kubelet's distance is a float of the amounts")]
fn distance(requirements: &[Requirement], pod: &Pod) -> f64 {
    requirements
        .iter()
        .map(|r| {
            let remaining = r.quantity.saturating_sub(request(pod, &r.resource)) as f64;
            if remaining > 0.0 { (remaining / r.quantity as f64).powi(2) } else { 0.0 }
        })
        .sum()
}

/// kubelet's `smallerResourceRequest`: memory first, then cpu; equal is smaller.
fn smaller(a: &Pod, b: &Pod) -> bool {
    for resource in ["memory", "cpu"] {
        let (x, y) = (request(a, resource), request(b, resource));
        if x != y {
            return x < y;
        }
    }
    true
}

/// kubelet's `getPodsToPreemptByDistance`.
fn by_distance(
    mut pods: Vec<&Admitted>,
    mut requirements: Vec<Requirement>,
) -> Result<Vec<&Admitted>, Unmet> {
    let mut chosen = Vec::new();
    while !requirements.is_empty() {
        if pods.is_empty() {
            return Err(Unmet(requirements));
        }
        #[allow(clippy::cast_precision_loss, reason = "a handful of requirements")]
        let mut best_distance = (requirements.len() + 1) as f64;
        let mut best = 0;
        for (i, pod) in pods.iter().enumerate() {
            let d = distance(&requirements, &pod.pod);
            if d < best_distance || (d == best_distance && smaller(&pod.pod, &pods[best].pod)) {
                best_distance = d;
                best = i;
            }
        }
        requirements = subtract(&requirements, &[pods[best]]);
        chosen.push(pods.swap_remove(best));
    }
    Ok(chosen)
}

/// kubelet's `Preemptable`.
fn preemptable(preemptor: &Pod, source: Source, preemptee: &Admitted) -> bool {
    if is_critical(preemptor, source) && !is_critical(&preemptee.pod, preemptee.source) {
        return true;
    }
    let priority = |pod: &Pod| pod.spec.as_ref().and_then(|s| s.priority);
    matches!((priority(preemptor), priority(&preemptee.pod)), (Some(a), Some(b)) if a > b)
}

/// The UIDs of the pods to preempt for `preemptor`, in kubelet's order (best-effort,
/// burstable, then guaranteed pods); `Err` with what cannot be reclaimed.
pub fn victims(
    preemptor: &Pod,
    source: Source,
    active: &[Admitted],
    short: &[&Insufficient],
) -> Result<Vec<String>, Unmet> {
    let requirements: Vec<Requirement> = short
        .iter()
        .map(|s| Requirement { resource: s.resource.clone(), quantity: s.amount() })
        .collect();
    let mut classes: [Vec<&Admitted>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for pod in active.iter().filter(|p| preemptable(preemptor, source, p)) {
        let class = match qos_class(&pod.pod) {
            QosClass::BestEffort => 0,
            QosClass::Burstable => 1,
            QosClass::Guaranteed => 2,
        };
        classes[class].push(pod);
    }
    let [best_effort, burstable, guaranteed] = classes;
    let all: Vec<&Admitted> =
        best_effort.iter().chain(&burstable).chain(&guaranteed).copied().collect();
    let unmet = subtract(&requirements, &all);
    if !unmet.is_empty() {
        return Err(Unmet(unmet));
    }
    let lower: Vec<&Admitted> = best_effort.iter().chain(&burstable).copied().collect();
    let guaranteed_out = by_distance(guaranteed, subtract(&requirements, &lower))?;
    let before_burstable: Vec<&Admitted> =
        best_effort.iter().chain(&guaranteed_out).copied().collect();
    let burstable_out = by_distance(burstable, subtract(&requirements, &before_burstable))?;
    let before_best_effort: Vec<&Admitted> =
        burstable_out.iter().chain(&guaranteed_out).copied().collect();
    let best_effort_out = by_distance(best_effort, subtract(&requirements, &before_best_effort))?;
    let chosen = best_effort_out.into_iter().chain(burstable_out).chain(guaranteed_out);
    Ok(chosen.map(|p| p.uid.clone()).collect())
}
