//! Node admission (K4): kubelet's `predicateAdmitHandler`, decided without IO. A pod
//! handed to the node is admitted against the node (its name, labels, taints and
//! allocatable) and the pods already admitted and still active, or rejected with
//! kubelet's reason and message (kubelet's `rejectPod` then makes it `Failed` with
//! `Pod was rejected: <message>` and a Warning Event with the reason).
//!
//! The checks, in kubelet's order (only the first failure is reported):
//! 1. the pod's `kubernetes.io/os` label and `spec.os` against the node's OS (Linux):
//!    `PodOSSelectorNodeLabelDoesNotMatch`, `PodOSNotSupported`;
//! 2. the scheduler's `AdmissionCheck` as kubelet calls it, every failure kept:
//!    resources ([`fit`]: `pods` against `maxPods`, then cpu, memory, ephemeral-storage
//!    and the scalar resources against allocatable less what the active pods request:
//!    `OutOf<resource>`), node affinity and `nodeSelector` ([`affinity`]:
//!    `NodeAffinity`), `spec.nodeName` (`NodeName`), host ports ([`ports`]:
//!    `NodePorts`);
//! 3. the node's `NoExecute` taints against the pod's tolerations (`TaintToleration`),
//!    not for static pods.
//!
//! A critical pod (static, mirror, or priority ≥ 2000000000) that fails on resources
//! only is admitted by preempting lower-priority pods ([`preempt`], kubelet's
//! `CriticalPodAdmissionHandler`).

mod affinity;
mod fit;
mod ports;
mod preempt;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node as ApiNode, Pod, Taint};

pub use self::affinity::required_matches;
pub use self::fit::{Insufficient, insufficient, pod_requests};
pub use self::preempt::{PREEMPTED_CONDITION_MESSAGE, PREEMPTED_MESSAGE, PREEMPTED_REASON};
use crate::pod::{self, CONFIG_MIRROR, Source};

/// The node's OS, as kubelet's `runtime.GOOS`.
pub const NODE_OS: &str = "linux";
/// kubelet's `SystemCriticalPriority`: pods at or above it are critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// kubelet's reason when a critical pod's preemption fails.
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";

/// The node as admission sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Node {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `status.allocatable` by resource, in each resource's unit: millicores for `cpu`,
    /// the value for the others (bytes, a count; `pods` is `maxPods`).
    pub allocatable: BTreeMap<String, i64>,
}

impl Node {
    /// The node as the API server has it: its labels, taints and `status.allocatable`.
    pub fn from_api(node: &ApiNode) -> Node {
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let allocatable = allocatable
            .into_iter()
            .flatten()
            .filter_map(|(name, quantity)| Some((name.clone(), fit::in_unit(&quantity.0, name)?)))
            .collect();
        Node {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default(),
            allocatable,
        }
    }
}

/// A pod already admitted to the node, still active (not finished, not rejected).
#[derive(Debug, Clone)]
pub struct Admitted {
    pub uid: String,
    pub pod: Arc<Pod>,
    pub source: Source,
}

/// Why a pod is rejected: kubelet's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

impl Rejection {
    /// The pod's `status.message`, as kubelet's `rejectPod` writes it.
    pub fn status_message(&self) -> String {
        format!("Pod was rejected: {}", self.message)
    }
}

/// What becomes of a pod handed to the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Admit,
    /// A critical pod, admitted once these pods (their UIDs, in kubelet's order) are
    /// preempted to make room.
    Preempt(Vec<String>),
    Reject(Rejection),
}

/// One failed check: a resource short, or a predicate.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    Resource(Insufficient),
    Predicate { name: &'static str, description: &'static str },
}

impl Failure {
    fn rejection(&self) -> Rejection {
        match self {
            Failure::Resource(short) => {
                Rejection { reason: short.reason(), message: short.message() }
            }
            Failure::Predicate { name, description } => Rejection {
                reason: (*name).to_owned(),
                message: format!("Predicate {name} failed: {description}"),
            },
        }
    }
}

/// The node affinity plugin's failure.
const NODE_AFFINITY: Failure = Failure::Predicate {
    name: "NodeAffinity",
    description: "node(s) didn't match Pod's node affinity/selector",
};
const NODE_NAME: Failure = Failure::Predicate {
    name: "NodeName",
    description: "node(s) didn't match the requested node name",
};
const NODE_PORTS: Failure = Failure::Predicate {
    name: "NodePorts",
    description: "node(s) didn't have free ports for the requested pod ports",
};
const TAINT_TOLERATION: Failure = Failure::Predicate {
    name: "TaintToleration",
    description: "node(s) had taints that the pod didn't tolerate",
};

/// K4: admits `pod` (from `source`) to `node`, where `active` are the pods admitted
/// before it and still active; see the module's doc for the checks.
pub fn admit(node: &Node, active: &[Admitted], pod: &Pod, source: Source) -> Verdict {
    if let Some(rejection) = os_rejection(pod) {
        return Verdict::Reject(rejection);
    }
    let mut failures: Vec<Failure> =
        fit::insufficient(node, active, pod).into_iter().map(Failure::Resource).collect();
    if !affinity::required_matches(pod, &node.name, &node.labels) {
        failures.push(NODE_AFFINITY);
    }
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default();
    // kubelet sets a static pod's nodeName to its own.
    if !source.is_static() && !node_name.is_empty() && node_name != node.name {
        failures.push(NODE_NAME);
    }
    if !ports::fit(pod, active) {
        failures.push(NODE_PORTS);
    }
    if !source.is_static() && untolerated_taint(pod, &node.taints).is_some() {
        failures.push(TAINT_TOLERATION);
    }
    let Some(first) = failures.first() else { return Verdict::Admit };
    if !is_critical(pod, source) {
        return Verdict::Reject(first.rejection());
    }
    // A critical pod is not refused for resources: pods are preempted for it, unless
    // something else fails too.
    if let Some(other) = failures.iter().find(|f| matches!(f, Failure::Predicate { .. })) {
        return Verdict::Reject(other.rejection());
    }
    let short: Vec<&Insufficient> = failures
        .iter()
        .filter_map(|f| match f {
            Failure::Resource(short) => Some(short),
            Failure::Predicate { .. } => None,
        })
        .collect();
    match preempt::victims(pod, source, active, &short) {
        Ok(victims) => Verdict::Preempt(victims),
        Err(unmet) => Verdict::Reject(Rejection {
            reason: UNEXPECTED_ADMISSION_ERROR.to_owned(),
            message: format!(
                "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: {unmet}"
            ),
        }),
    }
}

/// kubelet's checks of the pod's OS, made before the others.
fn os_rejection(pod: &Pod) -> Option<Rejection> {
    let label = pod.metadata.labels.as_ref().and_then(|l| l.get("kubernetes.io/os"));
    if label.is_some_and(|os| os != NODE_OS) {
        return Some(Rejection {
            reason: "PodOSSelectorNodeLabelDoesNotMatch".to_owned(),
            message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
                .to_owned(),
        });
    }
    let os = pod.spec.as_ref().and_then(|s| s.os.as_ref()).map(|os| os.name.as_str());
    if os.is_some_and(|os| os != NODE_OS) {
        return Some(Rejection {
            reason: "PodOSNotSupported".to_owned(),
            message: "Failed to admit pod as the OS field doesn't match node OS".to_owned(),
        });
    }
    None
}

/// The first of the node's `NoExecute` taints that none of the pod's tolerations
/// tolerates (kubelet looks at no other effect).
pub fn untolerated_taint<'a>(pod: &Pod, taints: &'a [Taint]) -> Option<&'a Taint> {
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
    taints.iter().filter(|t| t.effect == "NoExecute").find(|taint| {
        !tolerations.iter().any(|t| {
            let effect = t.effect.as_deref().unwrap_or_default();
            let key = t.key.as_deref().unwrap_or_default();
            if !effect.is_empty() && effect != taint.effect {
                return false;
            }
            if !key.is_empty() && key != taint.key {
                return false;
            }
            match t.operator.as_deref().unwrap_or_default() {
                "" | "Equal" => {
                    t.value.as_deref().unwrap_or_default()
                        == taint.value.as_deref().unwrap_or_default()
                }
                "Exists" => true,
                _ => false,
            }
        })
    })
}

/// kubelet's `IsCriticalPod`: a static pod, a mirror pod, or a system-critical priority.
pub fn is_critical(pod: &Pod, source: Source) -> bool {
    source.is_static()
        || pod::annotation(pod, CONFIG_MIRROR).is_some()
        || pod.spec.as_ref().and_then(|s| s.priority).is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}
