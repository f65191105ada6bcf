//! The NodeRestriction admission plugin, as kube-apiserver runs it on every create,
//! update and delete of a node identity (written from
//! `plugin/pkg/admission/noderestriction/admission.go` and
//! `staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go`, Kubernetes 1.33):
//! - pods: a node creates only mirror pods (the `kubernetes.io/config.mirror`
//!   annotation), bound to itself, with one controller owner reference to its own Node
//!   (its uid, no `blockOwnerDeletion`), and referring to no service account, Secret,
//!   ConfigMap, ClusterTrustBundle or claim; it deletes only pods bound to it;
//! - `pods/status`: only of pods bound to it, without changing their labels;
//! - `pods/eviction`: only of pods bound to it;
//! - Nodes: only its own, created without a `configSource` and without labels it may
//!   not set; updated without changing its taints or such labels. A node may set the
//!   labels outside `kubernetes.io` and `k8s.io`, the kubelet labels
//!   ([`KUBELET_LABELS`]) and those in the `kubelet.kubernetes.io` and
//!   `node.kubernetes.io` namespaces; never those in `node-restriction.kubernetes.io`;
//! - Leases: only in `kube-node-lease`, of its own name;
//! - TokenRequests: only bound to a pod (with its uid) that is bound to the node;
//! - claims: only their status.

#[cfg(test)]
mod tests;

use serde_json::Value;

use super::error::{Error, Result};
use super::node_authorizer::{self, NODE_LEASE_NAMESPACE, Vertex};
use super::resource::{NODES, PODS, ResourceType};
use super::store::Store;

/// The labels kubelet sets on its Node (`kubeletapis.KubeletLabels()`).
pub const KUBELET_LABELS: &[&str] = &[
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// The label namespaces a node may use (`kubeletapis.KubeletLabelNamespaces()`).
pub const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What a node asks to write.
#[derive(Debug, Clone, Copy)]
pub enum Write<'a> {
    Create { object: &'a Value },
    Update { old: &'a Value, new: &'a Value },
    Delete,
}

/// Admits a node's write of `resource` (`subresource`) `namespace/name`, or refuses it
/// as NodeRestriction does (403, or 404 for a pod that does not exist).
pub fn admit(
    store: &Store,
    node: &str,
    (resource, subresource): (&ResourceType, &str),
    (namespace, name): (&str, &str),
    write: Write<'_>,
) -> Result<()> {
    let object_name = match write {
        Write::Create { object } => meta(object, "name").unwrap_or_default(),
        _ => name,
    };
    let forbidden = |problem: String| Error::Forbidden {
        resource: resource.group_resource(),
        name: object_name.to_owned(),
        problem,
    };
    let problem = match (resource.plural, resource.group, subresource) {
        ("pods", "", "") => admit_pod(store, node, namespace, name, write),
        ("pods", "", "status") => admit_pod_status(node, write),
        ("pods", "", "eviction") => admit_eviction(store, node, namespace, name),
        ("pods", "", other) => Err(Some(format!(
            "unexpected pod subresource {other:?}, only 'status' and 'eviction' are allowed"
        ))),
        ("nodes", "", _) => admit_node(node, name, write),
        ("persistentvolumeclaims", "", "status") => Ok(()),
        ("persistentvolumeclaims", "", _) => Err(Some("may only update PVC status".into())),
        ("serviceaccounts", "", "token") => admit_token(store, node, namespace, write),
        ("leases", "coordination.k8s.io", _) => admit_lease(node, namespace, name, write),
        _ => Ok(()),
    };
    match problem {
        Ok(()) => Ok(()),
        Err(Some(problem)) => Err(forbidden(problem)),
        Err(None) => Err(Error::NotFound { resource: PODS.group_resource(), name: name.into() }),
    }
}

/// A refusal's message, or `None` for "the pod is not found" (a 404).
type Admitted = std::result::Result<(), Option<String>>;

fn admit_pod(store: &Store, node: &str, namespace: &str, name: &str, write: Write<'_>) -> Admitted {
    match write {
        Write::Create { object } => admit_mirror_pod(store, node, object).map_err(Some),
        Write::Delete => {
            let pod = store.get(&PODS, Some(namespace), name).map_err(|_| None)?;
            if node_name(&pod) != node {
                return Err(Some(format!(
                    "node {node:?} can only delete pods with spec.nodeName set to itself"
                )));
            }
            Ok(())
        }
        Write::Update { .. } => Err(Some(format!(
            "unexpected operation \"UPDATE\", node {node:?} can only create and delete mirror pods"
        ))),
    }
}

/// `admitPodCreate`.
fn admit_mirror_pod(store: &Store, node: &str, pod: &Value) -> std::result::Result<(), String> {
    if pod.pointer("/metadata/annotations").and_then(|a| a.get(MIRROR_ANNOTATION)).is_none() {
        return Err(format!(
            "pod does not have {MIRROR_ANNOTATION:?} annotation, node {node:?} can only create mirror pods"
        ));
    }
    if node_name(pod) != node {
        return Err(format!("node {node:?} can only create pods with spec.nodeName set to itself"));
    }
    let owners = pod.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    let owners = owners.map(Vec::as_slice).unwrap_or_default();
    let [owner] = owners else {
        return Err(if owners.is_empty() {
            format!("node {node:?} can only create pods with an owner reference set to itself")
        } else {
            format!(
                "node {node:?} can only create pods with a single owner reference set to itself"
            )
        });
    };
    let field = |name: &str| owner.get(name).and_then(Value::as_str).unwrap_or_default();
    if field("apiVersion") != "v1" || field("kind") != "Node" || field("name") != node {
        return Err(format!(
            "node {node:?} can only create pods with an owner reference set to itself"
        ));
    }
    if owner.get("controller").and_then(Value::as_bool) != Some(true) {
        return Err(format!(
            "node {node:?} can only create pods with a controller owner reference set to itself"
        ));
    }
    if owner.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
        return Err(format!("node {node:?} must not set blockOwnerDeletion on an owner reference"));
    }
    let registered = store.get(&NODES, None, node).map_err(|e| e.to_string())?;
    let uid = meta(&registered, "uid").unwrap_or_default();
    if field("uid") != uid {
        return Err(format!("node {node} UID mismatch: expected {} got {uid}", field("uid")));
    }
    if pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        return Err(format!("node {node:?} can not create pods that reference a service account"));
    }
    // The graph's visitors, on a pod that is not (yet) taken for a mirror pod.
    let mut unmarked = pod.clone();
    if let Some(annotations) =
        unmarked.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut)
    {
        annotations.remove(MIRROR_ANNOTATION);
    }
    if !node_authorizer::references(&unmarked, Vertex::Secret).is_empty() {
        return Err(format!("node {node:?} can not create pods that reference secrets"));
    }
    if !node_authorizer::references(&unmarked, Vertex::ConfigMap).is_empty() {
        return Err(format!("node {node:?} can not create pods that reference configmaps"));
    }
    let volumes = pod.pointer("/spec/volumes").and_then(Value::as_array);
    let volumes = volumes.map(Vec::as_slice).unwrap_or_default();
    let sources = volumes.iter().flat_map(|v| {
        v.pointer("/projected/sources").and_then(Value::as_array).into_iter().flatten()
    });
    if sources.clone().any(|s| s.get("clusterTrustBundle").is_some()) {
        return Err(format!(
            "node {node:?} can not create pods that reference clustertrustbundles"
        ));
    }
    if volumes.iter().any(|v| v.get("persistentVolumeClaim").is_some()) {
        return Err(format!(
            "node {node:?} can not create pods that reference persistentvolumeclaims"
        ));
    }
    Ok(())
}

/// `admitPodStatus`.
fn admit_pod_status(node: &str, write: Write<'_>) -> Admitted {
    let Write::Update { old, new } = write else {
        return Err(Some("unexpected operation".into()));
    };
    if node_name(old) != node {
        return Err(Some(format!(
            "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
        )));
    }
    if labels(old) != labels(new) {
        return Err(Some(format!("node {node:?} cannot update labels through pod status")));
    }
    Ok(())
}

/// `admitPodEviction`.
fn admit_eviction(store: &Store, node: &str, namespace: &str, name: &str) -> Admitted {
    let pod = store.get(&PODS, Some(namespace), name).map_err(|_| None)?;
    if node_name(&pod) != node {
        return Err(Some(format!(
            "node {node} can only evict pods with spec.nodeName set to itself"
        )));
    }
    Ok(())
}

/// `admitNode`.
fn admit_node(node: &str, name: &str, write: Write<'_>) -> Admitted {
    let requested = match write {
        Write::Create { object } => meta(object, "name").unwrap_or_default(),
        _ => name,
    };
    if requested != node {
        return Err(Some(format!("node {node:?} is not allowed to modify node {requested:?}")));
    }
    match write {
        Write::Create { object } => {
            if object.pointer("/spec/configSource").is_some_and(|c| !c.is_null()) {
                return Err(Some(format!(
                    "node {node:?} is not allowed to create pods with a non-nil configSource"
                )));
            }
            let forbidden = forbidden_labels(&modified_labels(object, &Value::Null));
            if !forbidden.is_empty() {
                return Err(Some(format!(
                    "node {node:?} is not allowed to set the following labels: {}",
                    forbidden.join(", ")
                )));
            }
        }
        Write::Update { old, new } => {
            let source =
                |n: &Value| n.pointer("/spec/configSource").filter(|c| !c.is_null()).cloned();
            if source(new).is_some() && source(new) != source(old) {
                return Err(Some(format!(
                    "node {node:?} is not allowed to update configSource to a new non-nil configSource"
                )));
            }
            let taints = |n: &Value| {
                n.pointer("/spec/taints")
                    .filter(|t| t.as_array().is_some_and(|t| !t.is_empty()))
                    .cloned()
            };
            if taints(old) != taints(new) {
                return Err(Some(format!("node {node:?} is not allowed to modify taints")));
            }
            let forbidden = forbidden_labels(&modified_labels(new, old));
            if !forbidden.is_empty() {
                return Err(Some(format!(
                    "is not allowed to modify labels: {}",
                    forbidden.join(", ")
                )));
            }
        }
        Write::Delete => {}
    }
    Ok(())
}

/// `admitServiceAccount`: a node's TokenRequest must be bound to a pod on the node.
fn admit_token(store: &Store, node: &str, namespace: &str, write: Write<'_>) -> Admitted {
    let Write::Create { object } = write else { return Ok(()) };
    let reference = object.pointer("/spec/boundObjectRef");
    let field = |name: &str| {
        reference.and_then(|r| r.get(name)).and_then(Value::as_str).unwrap_or_default()
    };
    if reference.is_none()
        || field("apiVersion") != "v1"
        || field("kind") != "Pod"
        || field("name").is_empty()
    {
        return Err(Some("node requested token not bound to a pod".into()));
    }
    if field("uid").is_empty() {
        return Err(Some("node requested token with a pod binding without a uid".into()));
    }
    let pod = store.get(&PODS, Some(namespace), field("name")).map_err(|_| None)?;
    let uid = meta(&pod, "uid").unwrap_or_default();
    if field("uid") != uid {
        return Err(Some(format!(
            "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
            field("uid")
        )));
    }
    if node_name(&pod) != node {
        return Err(Some(
            "node requested token bound to a pod scheduled on a different node".into(),
        ));
    }
    Ok(())
}

/// `admitLease`.
fn admit_lease(node: &str, namespace: &str, name: &str, write: Write<'_>) -> Admitted {
    if namespace != NODE_LEASE_NAMESPACE {
        return Err(Some(format!(
            "can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"
        )));
    }
    let lease = match write {
        Write::Create { object } => meta(object, "name").unwrap_or_default(),
        _ => name,
    };
    if lease != node {
        return Err(Some(
            "can only access node lease with the same name as the requesting node".into(),
        ));
    }
    Ok(())
}

/// Whether a node may set the label `key` (`getForbiddenLabels`, negated).
pub fn node_may_set(key: &str) -> bool {
    let namespace = key.split_once('/').map(|(ns, _)| ns).unwrap_or_default();
    let within = |domain: &str| namespace == domain || namespace.ends_with(&format!(".{domain}"));
    if within("node-restriction.kubernetes.io") {
        return false;
    }
    let kubernetes = within("kubernetes.io") || within("k8s.io");
    !kubernetes
        || KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES.iter().any(|d| within(d))
}

/// The label keys whose value differs between `new` and `old` (either may lack one).
fn modified_labels(new: &Value, old: &Value) -> Vec<String> {
    let (new, old) = (labels(new), labels(old));
    let mut keys: Vec<String> = new
        .iter()
        .chain(old.iter())
        .filter(|(k, _)| new.get(*k) != old.get(*k))
        .map(|(k, _)| k.clone())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

fn forbidden_labels(keys: &[String]) -> Vec<String> {
    keys.iter().filter(|k| !node_may_set(k)).cloned().collect()
}

fn labels(object: &Value) -> serde_json::Map<String, Value> {
    object.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default()
}

fn node_name(pod: &Value) -> &str {
    pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default()
}

fn meta<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str)
}
