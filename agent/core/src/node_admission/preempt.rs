//! Preemption for critical pods (K4): kubelet's `CriticalPodAdmissionHandler`. For each
//! resource short, the amount missing is a requirement; the pods the critical pod may
//! preempt (any non-critical pod, or one of lower priority when both set one) are
//! grouped by priority, then QoS class, from the most preemptable group (lowest
//! priority, best-effort) to the least. kubelet evicts as few pods of the highest group
//! as it can (as if every lower group went), then as few of the next group, and so on
//! down; within a group it repeatedly takes the pod closest to covering what is left
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

/// How preemptable a pod is, the most preemptable lowest: critical or not, priority
/// (API pods always have one), QoS class.
fn rank(pod: &Admitted) -> (bool, i32, u8) {
    let qos = match qos_class(&pod.pod) {
        QosClass::BestEffort => 1,
        QosClass::Burstable => 2,
        QosClass::Guaranteed => 3,
    };
    let priority = pod.pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    (is_critical(&pod.pod, pod.source), priority, qos)
}

/// The UIDs of the pods to preempt for `preemptor`, in kubelet's order (from the least
/// preemptable group chosen to the most); `Err` with what cannot be reclaimed.
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
    let mut preemptable: Vec<&Admitted> =
        active.iter().filter(|p| preemptable(preemptor, source, p)).collect();
    preemptable.sort_by_key(|p| rank(p));
    let mut groups: Vec<Vec<&Admitted>> = Vec::new();
    for pod in preemptable {
        match groups.last_mut() {
            Some(group) if group.last().is_some_and(|last| rank(last) == rank(pod)) => {
                group.push(pod);
            }
            _ => groups.push(vec![pod]),
        }
    }
    // What is left after every group below the i-th went.
    let mut remaining = vec![requirements];
    for group in &groups {
        let next = subtract(remaining.last().map(Vec::as_slice).unwrap_or_default(), group);
        remaining.push(next);
    }
    if let Some(unmet) = remaining.last().filter(|r| !r.is_empty()) {
        return Err(Unmet(unmet.clone()));
    }
    let mut chosen: Vec<&Admitted> = Vec::new();
    for (i, group) in groups.into_iter().enumerate().rev() {
        let left = subtract(&remaining[i], &chosen);
        chosen.extend(by_distance(group, left)?);
    }
    Ok(chosen.into_iter().map(|p| p.uid.clone()).collect())
}
