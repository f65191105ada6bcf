//! K4: the node's admission of pods, node-wide, between the merge and the pod workers.
//!
//! kubelet admits a pod in `HandlePodAdditions`, as the pod is first handed to it: the
//! pods of one batch in creation-time order, each against the pods admitted before it
//! that are still active. The same happens here, in the dispatcher, because it alone
//! sees every pod of every source before any worker acts on it and knows which pods are
//! new (a UID it has not admitted or rejected yet). The decision is
//! [`outpost_core::node_admission::admit`]'s, against the node as
//! [`crate::sync`]'s node task publishes it (the Node as the API server has it once
//! seen, else the Node the agent would register, so that admission works offline).
//!
//! - A rejected pod gets kubelet's Warning Event with the reason here, and its worker
//!   the rejection ([`Desired::rejected`](outpost_core::pod_worker::Desired)): the pod is
//!   Failed with `Pod was rejected: <message>` and nothing of it runs. An update of the
//!   pod keeps the verdict; so does an agent restart (an API pod the API server has as
//!   rejected stays rejected).
//! - A pod with containers left by an earlier run is adopted, not admitted again (it was
//!   admitted then), and before the batch's new pods, which are admitted against it (so
//!   a restart never overcommits the node); so is a pod being deleted, and a pod already finished is not
//!   admitted (kubelet's `IsPodPhaseTerminal`) and does not count.
//! - A critical pod that fits only once lower-priority pods go is admitted, and those
//!   pods are preempted through their workers (kubelet waits for them to stop before
//!   it starts the critical pod; here the critical pod's sandbox is set up meanwhile).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use outpost_core::event_aggregate::EventType;
use outpost_core::merge::{DeltaOp, PodDelta};
use outpost_core::node_admission::{self, Admitted, Node, Rejection, Verdict};
use outpost_core::pod::{self, FullName};
use outpost_core::resize::{self, Pending};
use tokio::sync::watch;

use crate::apiserver::events::{Recorder, pod_ref};
use crate::error_chain::describe;
use crate::status::StatusStore;

/// The pods admitted and rejected, by UID.
#[derive(Debug, Default)]
pub(super) struct Admission {
    /// The node as admission sees it; `None`: nothing is checked (tests of other rules).
    node: Option<watch::Receiver<Node>>,
    /// D2: the device manager, which gives new pods their devices before the fit.
    devices: Option<crate::devices::Manager>,
    admitted: HashMap<String, Admitted>,
    /// The order pods were admitted in (kubelet's active pods are in that order).
    order: Vec<String>,
    rejected: HashMap<String, Rejection>,
}

/// What a batch's admission decided besides the rejections it keeps: the pods to
/// preempt (their full names and UIDs).
pub(super) type Preemptions = Vec<(FullName, String)>;

impl Admission {
    pub(super) fn new(
        node: Option<watch::Receiver<Node>>,
        devices: Option<crate::devices::Manager>,
    ) -> Admission {
        Admission { node, devices, ..Admission::default() }
    }

    /// D2: kubelet's device manager admits before the resource fit: a new pod that
    /// limits a device plugin's resource is given its devices (after the devices of pods
    /// no longer active are freed, once every source has been seen: kubelet's
    /// `sourcesReady`); one that cannot be is rejected with `UnexpectedAdmissionError` and
    /// kubelet's message.
    async fn allocate_devices(
        &self,
        pod: &Pod,
        statuses: &StatusStore,
        synced: bool,
    ) -> Option<Rejection> {
        let devices = self.devices.as_ref().filter(|d| limits_devices(pod, d))?;
        let active = self.active(statuses).into_iter().map(|a| a.uid).collect();
        let error = devices.allocate_pod(pod, &active, synced).await.err()?;
        Some(Rejection {
            reason: UNEXPECTED_ADMISSION_ERROR.to_owned(),
            message: format!("Allocate failed due to {}, which is unexpected", describe(&error)),
        })
    }

    /// The rejection of the pod `uid`, if it was rejected.
    pub(super) fn rejection(&self, uid: &str) -> Option<&Rejection> {
        self.rejected.get(uid)
    }

    /// The pod `uid` is gone (removed, or replaced under its name).
    pub(super) fn forget(&mut self, uid: &str) {
        if self.admitted.remove(uid).is_some() {
            self.order.retain(|u| u != uid);
        }
        self.rejected.remove(uid);
    }

    /// K4: admits the new pods of `deltas` in creation-time order. `adopted` says whether
    /// an earlier run left containers for a pod UID under its full name.
    pub(super) async fn batch(
        &mut self,
        deltas: &[PodDelta],
        statuses: &StatusStore,
        events: &Recorder,
        adopted: impl Fn(&FullName, &str) -> bool,
        synced: bool,
    ) -> Preemptions {
        let mut new: Vec<&PodDelta> = deltas
            .iter()
            .filter(|d| d.op != DeltaOp::Remove)
            .filter(|d| {
                let uid = pod::uid(&d.pod);
                !self.admitted.contains_key(uid) && !self.rejected.contains_key(uid)
            })
            .collect();
        // Pods an earlier run left running first (they were admitted then, and take their
        // place before any new pod), then the others oldest first.
        new.sort_by_key(|d| {
            let created = d.pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
            (!adopted(&FullName::of(&d.pod), pod::uid(&d.pod)), created)
        });
        let mut preemptions = Vec::new();
        for delta in new {
            let uid = pod::uid(&delta.pod).to_owned();
            let admitted =
                Admitted { uid: uid.clone(), pod: delta.pod.clone(), source: delta.source };
            let name = FullName::of(&delta.pod);
            if let Some(rejection) = rejected_before(&delta.pod) {
                self.rejected.insert(uid, rejection);
                continue;
            }
            if is_terminal(&delta.pod) {
                continue;
            }
            // A pod an earlier run left keeps its devices (the checkpoint has them).
            if adopted(&name, &uid) || delta.pod.metadata.deletion_timestamp.is_some() {
                self.admit(admitted);
                continue;
            }
            if let Some(rejection) = self.allocate_devices(&delta.pod, statuses, synced).await {
                reject(&delta.pod, &rejection, events);
                self.rejected.insert(uid, rejection);
                continue;
            }
            let Some(mut node) = self.node.as_ref().map(|n| n.borrow().clone()) else {
                self.admit(admitted);
                continue;
            };
            if let Some(devices) = &self.devices {
                sanitize(&mut node, devices);
            }
            let active = self.active(statuses);
            match node_admission::admit(&node, &active, &delta.pod, delta.source) {
                Verdict::Admit => self.admit(admitted),
                Verdict::Preempt(victims) => {
                    for victim in victims {
                        if let Some(gone) = self.admitted.remove(&victim) {
                            self.order.retain(|u| *u != victim);
                            tracing::warn!(
                                pod.namespace = %name.namespace,
                                pod.name = %name.name,
                                pod.uid = uid,
                                preempted = victim,
                                "preempting a pod to admit a critical pod (K4)"
                            );
                            preemptions.push((FullName::of(&gone.pod), victim));
                        }
                    }
                    self.admit(admitted);
                }
                Verdict::Reject(rejection) => {
                    reject(&delta.pod, &rejection, events);
                    self.rejected.insert(uid, rejection);
                }
            }
        }
        preemptions
    }

    /// K6: the version `pod` of an admitted pod against its allocation (the pod as
    /// admitted, with the resizes allocated since): a resize that fits is allocated;
    /// one that does not leaves the allocation as it is and is pending. Returns the pod
    /// for its worker (with its allocated resources) and the pending resize.
    pub(super) fn allocate(
        &mut self,
        pod: &Arc<Pod>,
        statuses: &StatusStore,
    ) -> (Arc<Pod>, Option<Pending>) {
        let uid = pod::uid(pod);
        let Some(allocated) = self.admitted.get(uid).map(|a| a.pod.clone()) else {
            return (pod.clone(), None);
        };
        let allocation = resize::allocation(&allocated);
        let verdict = if !resize::differs(pod, &allocation) {
            Ok(())
        } else if let Some(node) = self.node.as_ref().map(|n| n.borrow().clone()) {
            resize::decide(&node, &self.active(statuses), &allocated, pod)
        } else {
            Ok(())
        };
        let (given, pending) = match verdict {
            Ok(()) => (pod.clone(), None),
            Err(pending) => {
                tracing::info!(
                    pod.uid = uid,
                    reason = pending.reason.as_str(),
                    message = pending.message,
                    "resize not allocated (K6)"
                );
                (Arc::new(resize::allocated_pod(pod, &allocation)), Some(pending))
            }
        };
        if let Some(admitted) = self.admitted.get_mut(uid) {
            admitted.pod = given.clone();
        }
        (given, pending)
    }

    /// K6: an adopted pod's allocation is what its containers were resized to (their
    /// labels), not its spec's.
    pub(super) fn restore_allocation(
        &mut self,
        uid: &str,
        allocation: &BTreeMap<String, ResourceRequirements>,
    ) {
        if let Some(admitted) = self.admitted.get_mut(uid) {
            admitted.pod = Arc::new(resize::allocated_pod(&admitted.pod, allocation));
        }
    }

    fn admit(&mut self, admitted: Admitted) {
        self.order.push(admitted.uid.clone());
        self.admitted.insert(admitted.uid.clone(), admitted);
    }

    /// The admitted pods still active: not finished (nor refused by the worker, A1).
    fn active(&self, statuses: &StatusStore) -> Vec<Admitted> {
        let finished = |uid: &str| {
            statuses
                .get(uid)
                .is_some_and(|s| matches!(s.phase.as_deref(), Some("Succeeded" | "Failed")))
        };
        self.order
            .iter()
            .filter(|uid| !finished(uid))
            .filter_map(|uid| self.admitted.get(uid).cloned())
            .collect()
    }
}

/// kubelet's `rejectPod`: a Warning Event with the reason and message (the status is
/// the worker's).
fn reject(pod: &Arc<Pod>, rejection: &Rejection, events: &Recorder) {
    let name = FullName::of(pod);
    tracing::warn!(
        pod.namespace = %name.namespace,
        pod.name = %name.name,
        pod.uid = pod::uid(pod),
        reason = rejection.reason,
        message = rejection.message,
        "pod rejected by the node's admission (K4)"
    );
    events.emit(
        &pod_ref(pod, None),
        EventType::Warning,
        &rejection.reason,
        rejection.message.clone(),
    );
}

/// kubelet's reason for a pod its device manager could not give devices to.
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";

/// Whether a container of `pod` limits a device plugin's resource.
fn limits_devices(pod: &Pod, devices: &crate::devices::Manager) -> bool {
    let spec = pod.spec.iter();
    let containers = spec.flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers));
    let limits = containers.filter_map(|c| c.resources.as_ref()?.limits.as_ref());
    limits.flatten().any(|(name, _)| devices.is_device_resource(name))
}

/// kubelet's `sanitizeNodeAllocatable`: a device resource's allocatable is at least what
/// containers hold of it (a held device that turned unhealthy still counts as given).
fn sanitize(node: &mut Node, devices: &crate::devices::Manager) {
    for (name, allocatable) in node.allocatable.iter_mut() {
        let held = i64::try_from(devices.allocated_count(name)).unwrap_or(i64::MAX);
        if held > *allocatable {
            *allocatable = held;
        }
    }
}

/// Whether the pod's status (as its source has it) is already Succeeded or Failed.
fn is_terminal(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// A pod the API server has as rejected by a node (an earlier run of this agent):
/// Failed, with a message kubelet's `rejectPod` wrote.
fn rejected_before(pod: &Pod) -> Option<Rejection> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Failed") {
        return None;
    }
    let message = status.message.as_deref()?.strip_prefix("Pod was rejected: ")?;
    Some(Rejection {
        reason: status.reason.clone().unwrap_or_default(),
        message: message.to_owned(),
    })
}
