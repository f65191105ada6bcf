//! The Node authorizer's graph (`plugin/pkg/auth/authorizer/node/graph.go`), read from
//! the store when asked instead of kept by informers: which objects a node reaches
//! through the pods bound to it.
//!
//! The edges, as `Graph.AddPod` and `Graph.AddPV` make them:
//! - pod → node, for every pod whose `spec.nodeName` is set (mirror pods too);
//! - service account, secret, configmap and claim → pod, for pods that are not mirror
//!   pods (`VisitPodSecretNames`, `VisitPodConfigmapNames`, claim and ephemeral
//!   volumes);
//! - pv → pvc, for a volume with a `claimRef`; secret → pv, for the secrets a volume
//!   source names that kubelet reads (`VisitPVSecretNames`, `kubeletVisible`).
//!
//! A node vertex exists only while some pod is bound to the node ("unknown node").
//! Deviation: the real graph lags its informers by a moment; this one never lags, so a
//! request it allows right after a pod's binding may still be refused for a moment on a
//! real server. The agent retries every read it is refused.

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::resource::{PERSISTENTVOLUMES, PODS};
use super::super::store::Store;

/// The kinds of vertex a request can start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vertex {
    Pod,
    Secret,
    ConfigMap,
    PersistentVolumeClaim,
    PersistentVolume,
    ServiceAccount,
}

/// Why there is no path from an object to the node (the authorizer's log line; the
/// refusal's reason is always "no relationship found").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoPath {
    UnknownNode,
    UnknownObject,
    Unrelated,
}

/// Whether the object `namespace/name` of kind `start` reaches the node `node`.
///
/// The walk starts from the pods bound to the node (the store's index of them, as the
/// real graph keeps its edges); only a refusal looks at every bound pod, to say why
/// (an object no pod refers to, or one of another node's pods).
pub fn has_path(
    store: &Store,
    node: &str,
    start: Vertex,
    namespace: &str,
    name: &str,
) -> Result<(), NoPath> {
    let on_node = store.pods_on_node(node);
    if on_node.is_empty() {
        return Err(NoPath::UnknownNode);
    }
    let on_node: Vec<&Value> = on_node.iter().map(AsRef::as_ref).collect();
    if walk(store, &on_node, node, start, namespace, name).1 {
        return Ok(());
    }
    let Ok((pods, _)) = store.objects_at(&PODS, None, None) else {
        return Err(NoPath::UnknownNode);
    };
    let bound: Vec<&Value> = pods
        .iter()
        .map(|(_, pod)| pod.as_ref())
        .filter(|pod| node_name(pod).is_some_and(|n| !n.is_empty()))
        .collect();
    match walk(store, &bound, node, start, namespace, name) {
        (_, true) => Ok(()),
        (false, false) => Err(NoPath::UnknownObject),
        (true, false) => Err(NoPath::Unrelated),
    }
}

/// Over the pods `bound`: whether a vertex of `start`'s kind named so exists, and
/// whether one reaches the node.
fn walk(
    store: &Store,
    bound: &[&Value],
    node: &str,
    start: Vertex,
    namespace: &str,
    name: &str,
) -> (bool, bool) {
    let mut exists = false;
    let mut reaches = false;
    let mut see = |on_node: bool| {
        exists = true;
        reaches |= on_node;
    };
    match start {
        Vertex::PersistentVolume => {
            let volume = store.get(&PERSISTENTVOLUMES, None, name).ok();
            if let Some(claim) = volume.as_ref().and_then(claim_ref) {
                exists = true;
                let (ns, claim) = claim;
                reaches = bound.iter().any(|pod| {
                    node_name(pod) == Some(node)
                        && pod_namespace(pod) == ns
                        && references(pod, Vertex::PersistentVolumeClaim).contains(claim)
                });
            }
        }
        Vertex::Pod => {
            for pod in bound.iter().filter(|p| pod_namespace(p) == namespace) {
                if pod.pointer("/metadata/name").and_then(Value::as_str) == Some(name) {
                    see(node_name(pod) == Some(node));
                }
            }
        }
        _ => {
            for pod in bound.iter().filter(|p| pod_namespace(p) == namespace) {
                if references(pod, start).contains(name) {
                    see(node_name(pod) == Some(node));
                }
            }
            if start == Vertex::Secret {
                secret_of_volumes(store, bound, node, namespace, name, &mut see);
            }
        }
    }
    (exists, reaches)
}

/// secret → pv → pvc → pod → node: the secrets bound volumes name (`AddPV`).
fn secret_of_volumes(
    store: &Store,
    bound: &[&Value],
    node: &str,
    namespace: &str,
    name: &str,
    see: &mut impl FnMut(bool),
) {
    let Ok((volumes, _)) = store.objects_at(&PERSISTENTVOLUMES, None, None) else { return };
    for (_, volume) in &volumes {
        let Some((claim_namespace, claim)) = claim_ref(volume) else { continue };
        if !volume_secrets(volume, claim_namespace).contains(&(namespace, name)) {
            continue;
        }
        let on_node = bound.iter().any(|pod| {
            node_name(pod) == Some(node)
                && pod_namespace(pod) == claim_namespace
                && references(pod, Vertex::PersistentVolumeClaim).contains(claim)
        });
        see(on_node);
    }
}

fn node_name(pod: &Value) -> Option<&str> {
    pod.pointer("/spec/nodeName").and_then(Value::as_str)
}

fn pod_namespace(pod: &Value) -> &str {
    pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default()
}

/// The claim a volume is bound to (`spec.claimRef`), as namespace and name.
fn claim_ref(volume: &Value) -> Option<(&str, &str)> {
    let claim = volume.pointer("/spec/claimRef")?;
    let namespace = claim.get("namespace").and_then(Value::as_str).unwrap_or_default();
    Some((namespace, claim.get("name").and_then(Value::as_str)?))
}

/// Whether `pod` is a mirror pod: it grants its node nothing beyond itself.
pub fn is_mirror(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations/kubernetes.io~1config.mirror").is_some()
}

/// The names of the objects of kind `kind` that `pod` refers to (none for a mirror pod,
/// and none for [`Vertex::Pod`] and [`Vertex::PersistentVolume`]).
pub fn references(pod: &Value, kind: Vertex) -> BTreeSet<String> {
    if is_mirror(pod) {
        return BTreeSet::new();
    }
    let mut names: BTreeSet<&str> = BTreeSet::new();
    let spec = &pod["spec"];
    let mut ephemeral = BTreeSet::new();
    match kind {
        Vertex::ServiceAccount => names.extend(str_at(spec, "/serviceAccountName")),
        Vertex::Secret => {
            names.extend(array(spec, "/imagePullSecrets").filter_map(|s| str_at(s, "/name")));
            for container in containers(spec) {
                names.extend(env_references(container, "secretRef", "secretKeyRef"));
            }
            for volume in array(spec, "/volumes") {
                names.extend(volume_secret_names(volume));
            }
        }
        Vertex::ConfigMap => {
            for container in containers(spec) {
                names.extend(env_references(container, "configMapRef", "configMapKeyRef"));
            }
            for volume in array(spec, "/volumes") {
                names.extend(str_at(volume, "/configMap/name"));
                let sources = array(volume, "/projected/sources");
                names.extend(sources.filter_map(|s| str_at(s, "/configMap/name")));
            }
        }
        Vertex::PersistentVolumeClaim => {
            let pod_name = str_at(pod, "/metadata/name").unwrap_or_default();
            for volume in array(spec, "/volumes") {
                if let Some(claim) = str_at(volume, "/persistentVolumeClaim/claimName") {
                    names.insert(claim);
                }
                if volume.get("ephemeral").is_some() {
                    // `ephemeral.VolumeClaimName`: <pod>-<volume>.
                    let volume_name = str_at(volume, "/name").unwrap_or_default();
                    ephemeral.insert(format!("{pod_name}-{volume_name}"));
                }
            }
        }
        Vertex::Pod | Vertex::PersistentVolume => {}
    }
    names.into_iter().map(str::to_owned).chain(ephemeral).collect()
}

/// Every container, init container and ephemeral container (`podutil.AllContainers`).
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["/containers", "/initContainers", "/ephemeralContainers"]
        .into_iter()
        .flat_map(move |field| array(spec, field))
}

/// `envFrom[].<from>.name` and `env[].valueFrom.<key_ref>.name`.
fn env_references<'a>(
    container: &'a Value,
    from: &'a str,
    key_ref: &'a str,
) -> impl Iterator<Item = &'a str> {
    let env_from = array(container, "/envFrom").filter_map(move |e| e.get(from)?.get("name"));
    let env =
        array(container, "/env").filter_map(move |e| e.get("valueFrom")?.get(key_ref)?.get("name"));
    env_from.chain(env).filter_map(Value::as_str)
}

/// The secrets a pod volume names (`VisitPodSecretNames`).
fn volume_secret_names(volume: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = [
        "/azureFile/secretName",
        "/cephfs/secretRef/name",
        "/cinder/secretRef/name",
        "/flexVolume/secretRef/name",
        "/rbd/secretRef/name",
        "/secret/secretName",
        "/scaleIO/secretRef/name",
        "/iscsi/secretRef/name",
        "/storageos/secretRef/name",
        "/csi/nodePublishSecretRef/name",
    ]
    .into_iter()
    .filter_map(|pointer| str_at(volume, pointer))
    .collect();
    names.extend(array(volume, "/projected/sources").filter_map(|s| str_at(s, "/secret/name")));
    names
}

/// The secrets a PersistentVolume names that kubelet reads (`VisitPVSecretNames` with
/// `kubeletVisible`), as (namespace, name); a reference without a namespace is in the
/// claim's.
fn volume_secrets<'a>(volume: &'a Value, claim_namespace: &'a str) -> Vec<(&'a str, &'a str)> {
    let spec = &volume["spec"];
    // A CSI reference is in the namespace it names; the others default to the claim's.
    let named = |source: &str| {
        let reference = spec.pointer(source)?;
        let name = reference.get("name").and_then(Value::as_str)?;
        let namespace = reference.get("namespace").and_then(Value::as_str).unwrap_or_default();
        let defaulted = namespace.is_empty() && !source.starts_with("/csi/");
        Some((if defaulted { claim_namespace } else { namespace }, name))
    };
    let mut secrets: Vec<(&str, &str)> = [
        "/csi/nodePublishSecretRef",
        "/csi/nodeStageSecretRef",
        "/csi/nodeExpandSecretRef",
        "/cephfs/secretRef",
        "/cinder/secretRef",
        "/flexVolume/secretRef",
        "/rbd/secretRef",
        "/scaleIO/secretRef",
        "/iscsi/secretRef",
        "/storageos/secretRef",
    ]
    .into_iter()
    .filter_map(named)
    .collect();
    if let Some(name) = str_at(spec, "/azureFile/secretName") {
        let namespace = str_at(spec, "/azureFile/secretNamespace").unwrap_or(claim_namespace);
        secrets.push((namespace, name));
    }
    secrets
}

fn array<'a>(value: &'a Value, pointer: &str) -> impl Iterator<Item = &'a Value> {
    value.pointer(pointer).and_then(Value::as_array).into_iter().flatten()
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}
