//! The downward API's files: a pod's metadata (`fieldRef`) and its containers'
//! resources (`resourceFieldRef`), as kubelet's downwardAPI plugin writes them.

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod};
use outpost_core::strconv;

use super::{Error, File, Payload, clean, mode};
use crate::selector;
use crate::subject::Subject;

/// The files of downward API `items`, into `payload`.
pub(super) fn files(
    pod: &Pod,
    volume: &str,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
    payload: &mut Payload,
) -> Result<(), Error> {
    for item in items {
        let value = if let Some(field) = &item.field_ref {
            field_value(pod, &field.field_path)?
        } else if let Some(selector) = &item.resource_field_ref {
            let field = format!("volume {volume:?} file {:?}", item.path);
            selector::resource_field_ref(pod, None, &field, selector, &Subject::pod(pod))
                .map_err(|error| Error::Invalid(error.to_string()))?
        } else {
            return Err(Error::Invalid(format!(
                "volume {volume:?} file {:?}: set fieldRef or resourceFieldRef",
                item.path
            )));
        };
        let file = File { data: value.into_bytes(), mode: mode(item.mode, default_mode)? };
        payload.insert(clean(&item.path)?, file);
    }
    Ok(())
}

/// kubelet's `ExtractFieldPathAsString`: what a downward API volume may show of the pod.
fn field_value(pod: &Pod, path: &str) -> Result<String, Error> {
    let meta = &pod.metadata;
    let labels = meta.labels.as_ref();
    let annotations = meta.annotations.as_ref();
    let owned = |value: Option<&String>| value.cloned().unwrap_or_default();
    if let Some(key) = selector::subscript(path, "metadata.labels") {
        return Ok(owned(labels.and_then(|m| m.get(key))));
    }
    if let Some(key) = selector::subscript(path, "metadata.annotations") {
        return Ok(owned(annotations.and_then(|m| m.get(key))));
    }
    Ok(match path {
        "metadata.name" => owned(meta.name.as_ref()),
        "metadata.namespace" => owned(meta.namespace.as_ref()),
        "metadata.uid" => owned(meta.uid.as_ref()),
        "metadata.labels" => format_map(labels.into_iter().flatten()),
        "metadata.annotations" => format_map(annotations.into_iter().flatten()),
        _ => return Err(Error::Invalid(format!("unsupported fieldPath: {path}"))),
    })
}

/// kubelet's `fieldpath.FormatMap`: `key="value"` lines in key order (the map's), values
/// quoted as Go's `%q`, joined by newlines (none at the end).
fn format_map<'m>(map: impl Iterator<Item = (&'m String, &'m String)>) -> String {
    let lines: Vec<String> =
        map.map(|(key, value)| format!("{key}={}", strconv::quote(value))).collect();
    lines.join("\n")
}
