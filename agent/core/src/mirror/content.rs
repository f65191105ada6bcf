//! What a mirror pod holds (R1) and when an edit through the API counts as a change to
//! restore (R5).
//!
//! R5 compares what a client can change on an existing pod and what the agent wrote,
//! never what the API server adds on its own:
//! - labels: exactly the static pod's (no labels and empty labels are the same);
//! - annotations: each of the static pod's (`config.hash` and `config.source`
//!   included) and `config.mirror`, with the same value; others are ignored, since
//!   admission plugins add some. `config.seen` is not compared: the merge stamps it
//!   anew at every agent start (M3), and a restart must not replace mirrors (R4);

//! - ownerReferences: the Node's controller reference is there;
//! - spec: only the fields the API server lets a client update on a pod (each
//!   container's and init container's name and image, `activeDeadlineSeconds`). The
//!   rest of a pod's spec is immutable, and the server fills defaults into it
//!   (`dnsPolicy`, `terminationMessagePath`, canonical quantities, default
//!   tolerations…): comparing it would delete and recreate the mirror forever.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::pod::{CONFIG_HASH, CONFIG_MIRROR, CONFIG_SEEN, annotation};

/// The Node a mirror pod belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner<'a> {
    pub name: &'a str,
    pub uid: &'a str,
}

/// R1: the mirror of `static_pod`: its name, namespace, labels, annotations and spec,
/// with `config.mirror` = its `config.hash` and the Node as controlling owner. Server
/// fields (uid, resourceVersion, creationTimestamp, deletion, status) are left out.
pub fn mirror_pod(static_pod: &Pod, node: &Owner<'_>) -> Pod {
    let meta = &static_pod.metadata;
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    let hash = annotation(static_pod, CONFIG_HASH).unwrap_or_default().to_owned();
    annotations.insert(CONFIG_MIRROR.to_owned(), hash);
    Pod {
        metadata: ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            labels: meta.labels.clone().filter(|l| !l.is_empty()),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(node)]),
            ..ObjectMeta::default()
        },
        spec: static_pod.spec.clone(),
        status: None,
    }
}

fn owner_reference(node: &Owner<'_>) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Node".to_owned(),
        name: node.name.to_owned(),
        uid: node.uid.to_owned(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// R5: whether `observed` (a mirror in the API server) still says what `desired` (from
/// [`mirror_pod`]) says; see the module doc for what is compared.
pub fn is_current(desired: &Pod, observed: &Pod) -> bool {
    let (want, have) = (&desired.metadata, &observed.metadata);
    let empty = BTreeMap::new();
    let labels = |m: &ObjectMeta| m.labels.as_ref().unwrap_or(&empty).clone();
    let annotated = want
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != CONFIG_SEEN)
        .all(|(k, v)| have.annotations.as_ref().and_then(|a| a.get(k)) == Some(v));
    let owned = want.owner_references.iter().flatten().all(|want| {
        have.owner_references.iter().flatten().any(|have| {
            (&have.api_version, &have.kind, &have.name, &have.uid, have.controller)
                == (&want.api_version, &want.kind, &want.name, &want.uid, want.controller)
        })
    });
    labels(want) == labels(have)
        && annotated
        && owned
        && mutable_spec(desired.spec.as_ref()) == mutable_spec(observed.spec.as_ref())
}

/// The spec fields a pod update may change (ValidatePodUpdate): images and the deadline.
#[derive(PartialEq)]
struct MutableSpec<'a> {
    containers: Vec<(&'a str, Option<&'a str>)>,
    init_containers: Vec<(&'a str, Option<&'a str>)>,
    active_deadline_seconds: Option<i64>,
}

fn images(containers: Option<&[Container]>) -> Vec<(&str, Option<&str>)> {
    let containers = containers.unwrap_or_default();
    containers.iter().map(|c| (c.name.as_str(), c.image.as_deref())).collect()
}

fn mutable_spec(spec: Option<&PodSpec>) -> MutableSpec<'_> {
    MutableSpec {
        containers: images(spec.map(|s| s.containers.as_slice())),
        init_containers: images(spec.and_then(|s| s.init_containers.as_deref())),
        active_deadline_seconds: spec.and_then(|s| s.active_deadline_seconds),
    }
}
