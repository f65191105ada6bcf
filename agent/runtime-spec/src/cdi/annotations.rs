//! The CDI devices a container asks for, as containerd's CRI plugin gathers them
//! (`WithCDI`): the names given for it (CRI's `CDIDevices`: a device plugin's `Allocate`
//! answer), then those of the `cdi.k8s.io/` annotations, each name once.

use std::collections::BTreeMap;

use super::name::is_qualified_name;

/// The prefix of the annotations that name CDI devices (`cdi.k8s.io/<anything>:
/// vendor.com/class=a,vendor.com/class=b`).
pub const ANNOTATION_PREFIX: &str = "cdi.k8s.io/";

/// An annotation names something that is not a qualified device name; containerd's
/// words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to parse CDI device annotations: invalid CDI device name {0:?}")]
pub struct Error(pub String);

/// The names in the `cdi.k8s.io/` annotations: each value split at `,`, every name
/// qualified. In key order (containerd reads a Go map, in no set order).
pub fn annotation_devices(annotations: &BTreeMap<String, String>) -> Result<Vec<String>, Error> {
    let mut devices = Vec::new();
    for (_, value) in annotations.iter().filter(|(key, _)| key.starts_with(ANNOTATION_PREFIX)) {
        for device in value.split(',') {
            if !is_qualified_name(device) {
                return Err(Error(device.to_owned()));
            }
            devices.push(device.to_owned());
        }
    }
    Ok(devices)
}

/// The devices to inject: `devices` (not checked: an unqualified one is not resolved),
/// then the annotations' ([`annotation_devices`]), each name the first time only.
pub fn requested(
    devices: &[String],
    annotations: &BTreeMap<String, String>,
) -> Result<Vec<String>, Error> {
    let from_annotations = annotation_devices(annotations)?;
    let mut seen = std::collections::HashSet::new();
    Ok(devices
        .iter()
        .chain(&from_annotations)
        .filter(|name| seen.insert(name.as_str()))
        .cloned()
        .collect())
}
