//! kubelet's `applyDefaults` for static pods (S2–S7), plus `config.source`.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use sha2::{Digest, Sha256};

use super::Origin;
use crate::pod::{self, CONFIG_HASH, CONFIG_SOURCE};

/// Defaults one pod. `ordinal` is the pod's index among the manifest's pods (S5, S9).
///
/// A missing name is left missing (validation reports it, S1) so that the rest of the pod
/// is still defaulted and validated.
pub(super) fn apply(mut pod: Pod, origin: Origin<'_>, node_name: &str, ordinal: usize) -> Pod {
    // S5, first: the hash covers the pod exactly as parsed.
    if pod::uid(&pod).is_empty() {
        pod.metadata.uid = Some(uid(&pod, node_name, &origin.location(), ordinal));
    }

    // S2
    if let Some(name) = pod.metadata.name.as_mut().filter(|name| !name.is_empty()) {
        name.push('-');
        name.push_str(&node_name.to_lowercase());
    }

    // S3
    if pod.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pod.metadata.namespace = Some("default".to_owned());
    }

    // S4
    let spec = pod.spec.get_or_insert_default();
    spec.node_name = Some(node_name.to_owned());
    pod.status.get_or_insert_default().phase = Some("Pending".to_owned());

    // S6
    let uid = pod::uid(&pod).to_owned();
    pod::set_annotation(&mut pod, CONFIG_HASH, uid);
    pod::set_annotation(&mut pod, CONFIG_SOURCE, origin.source().config_source());

    // S7
    if let Origin::File(_) = origin {
        add_or_update_toleration(
            pod.spec.get_or_insert_default().tolerations.get_or_insert_default(),
            Toleration {
                operator: Some("Exists".to_owned()),
                effect: Some("NoExecute".to_owned()),
                ..Toleration::default()
            },
        );
    }
    pod
}

/// S5: the first 128 bits of SHA-256, as 32 lowercase hex characters, over the node name,
/// the location and the ordinal (the variable-length parts length-prefixed, so no two
/// inputs run together), then the pod's JSON as parsed, which ends the input.
///
/// The pod's JSON is canonical: k8s-openapi writes fields in a fixed order, maps sorted,
/// absent fields left out. Whitespace and comments of the manifest do not count.
fn uid(pod: &Pod, node_name: &str, location: &str, ordinal: usize) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"outpost static pod uid v1\0");
    for part in [node_name.as_bytes(), location.as_bytes()] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.update((ordinal as u64).to_le_bytes());
    // Writing a k8s-openapi value into a hasher cannot fail: it holds only strings,
    // numbers, maps with string keys and sequences, and the hasher never fails.
    let _ = serde_json::to_writer(&mut hasher, pod);
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(32);
    for byte in &digest[..16] {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// kubelet's `AddOrUpdateTolerationInPod`: a toleration with the same key, operator, value
/// and effect is replaced by the new one (dropping e.g. its `tolerationSeconds`, so that a
/// static pod is never evicted); an identical one is left alone; else the new one is added.
fn add_or_update_toleration(tolerations: &mut Vec<Toleration>, new: Toleration) {
    fn same(a: &Option<String>, b: &Option<String>) -> bool {
        a.as_deref().unwrap_or_default() == b.as_deref().unwrap_or_default()
    }
    let matching = tolerations.iter_mut().find(|t| {
        same(&t.key, &new.key)
            && same(&t.operator, &new.operator)
            && same(&t.value, &new.value)
            && same(&t.effect, &new.effect)
    });
    match matching {
        Some(existing) => *existing = new,
        None => tolerations.push(new),
    }
}
