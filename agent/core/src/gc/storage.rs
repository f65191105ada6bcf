//! Local ephemeral storage limits, as kubelet's eviction manager checks them
//! (`localStorageEviction`), in its order: an emptyDir past its `sizeLimit`, then the
//! pod past the total of its containers' `limits.ephemeral-storage`, then a container
//! past its own limit (its writable layer and its logs). The first found evicts the pod,
//! with kubelet's message.

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::quantity::Quantity;

/// The resource name.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// kubelet's eviction signals for these limits (the `signal` label of its metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    EmptyDirFsLimit,
    EphemeralPodFsLimit,
    EphemeralContainerFsLimit,
}

impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::EmptyDirFsLimit => "emptydirfs.limit",
            Signal::EphemeralPodFsLimit => "ephemeralpodfs.limit",
            Signal::EphemeralContainerFsLimit => "ephemeralcontainerfs.limit",
        }
    }
}

/// What a pod uses of the node's local storage, measured, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// Per container (by name): its writable layer plus its logs.
    pub containers: Vec<(String, u64)>,
    /// Per emptyDir volume (by name): what its files take.
    pub empty_dirs: Vec<(String, u64)>,
    /// The pod's other files on the node's disk (its hosts file, other local volumes).
    pub other: u64,
}

/// A limit the pod went past.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub signal: Signal,
    /// kubelet's eviction message (status.message and the Evicted Event).
    pub message: String,
}

/// kubelet's `IsCriticalPod`: a static pod, a mirror pod, or one of priority
/// system-cluster-critical or more. Local storage limits never evict it (it would not be
/// admitted again); they are logged instead.
pub fn is_critical(pod: &Pod) -> bool {
    let source = crate::pod::annotation(pod, crate::pod::CONFIG_SOURCE);
    source.is_some_and(|s| s != crate::pod::Source::Api.config_source())
        || crate::pod::annotation(pod, crate::pod::CONFIG_MIRROR).is_some()
        || crate::admission::priority(pod) >= crate::admission::SYSTEM_CLUSTER_CRITICAL.1
}

/// Whether the pod has any limit this module checks: only such pods are measured.
pub fn is_limited(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    containers.clone().any(|c| limit(c).is_some())
        || spec.volumes.iter().flatten().any(|v| size_limit(v).is_some())
}

/// The first limit `pod` is past with `usage`, in kubelet's order.
pub fn check(pod: &Pod, usage: &Usage) -> Option<Exceeded> {
    let spec = pod.spec.as_ref()?;
    let used = |list: &[(String, u64)], name: &str| {
        list.iter().find(|(n, _)| n == name).map(|(_, bytes)| *bytes)
    };
    for volume in spec.volumes.iter().flatten() {
        let Some((limit, shown)) = size_limit(volume) else { continue };
        if used(&usage.empty_dirs, &volume.name).is_some_and(|bytes| bytes > limit) {
            return Some(Exceeded {
                signal: Signal::EmptyDirFsLimit,
                message: format!(
                    "Usage of EmptyDir volume {:?} exceeds the limit {shown:?}. ",
                    volume.name
                ),
            });
        }
    }
    if let Some((limit, shown)) = pod_limit(pod) {
        let on_disk = spec
            .volumes
            .iter()
            .flatten()
            .filter(|v| v.empty_dir.as_ref().is_some_and(|e| e.medium.as_deref() != Some("Memory")))
            .filter_map(|v| used(&usage.empty_dirs, &v.name));
        let total = usage
            .containers
            .iter()
            .map(|(_, bytes)| *bytes)
            .chain(on_disk)
            .fold(usage.other, u64::saturating_add);
        if total > limit {
            return Some(Exceeded {
                signal: Signal::EphemeralPodFsLimit,
                message: format!(
                    "Pod ephemeral local storage usage exceeds the total limit of containers {shown}. "
                ),
            });
        }
    }
    for container in &spec.containers {
        let Some((limit, shown)) = limit(container) else { continue };
        if used(&usage.containers, &container.name).is_some_and(|bytes| bytes > limit) {
            return Some(Exceeded {
                signal: Signal::EphemeralContainerFsLimit,
                message: format!(
                    "Container {} exceeded its local ephemeral storage limit {shown:?}. ",
                    container.name
                ),
            });
        }
    }
    None
}

/// A container's `limits.ephemeral-storage` in bytes (non-zero), and as kubelet prints it.
fn limit(container: &Container) -> Option<(u64, String)> {
    let limits = container.resources.as_ref()?.limits.as_ref()?;
    bytes(&limits.get(EPHEMERAL_STORAGE)?.0)
}

/// An emptyDir's `sizeLimit` in bytes (non-zero), and as kubelet prints it.
fn size_limit(volume: &k8s_openapi::api::core::v1::Volume) -> Option<(u64, String)> {
    bytes(&volume.empty_dir.as_ref()?.size_limit.as_ref()?.0)
}

/// The containers' limits added up as kubelet's `PodLimits` does (the app containers
/// and sidecars, or an init container with the sidecars before it if that is more; a
/// container without a limit adds nothing), printed in the first limit's format; `None`
/// when no container sets one.
fn pod_limit(pod: &Pod) -> Option<(u64, String)> {
    let spec = pod.spec.as_ref()?;
    let mut binary = None;
    let mut value = |c: &Container| {
        let text = &c.resources.as_ref()?.limits.as_ref()?.get(EPHEMERAL_STORAGE)?.0;
        let (bytes, _) = bytes(text)?;
        binary.get_or_insert(is_binary(text));
        Some(bytes)
    };
    let mut total: u64 = 0;
    for container in &spec.containers {
        total = total.saturating_add(value(container).unwrap_or(0));
    }
    let (mut sidecars, mut init_peak) = (0u64, 0u64);
    for container in spec.init_containers.iter().flatten() {
        let own = value(container).unwrap_or(0);
        if crate::pod::is_sidecar(container) {
            sidecars = sidecars.saturating_add(own);
            total = total.saturating_add(own);
        } else {
            init_peak = init_peak.max(own.saturating_add(sidecars));
        }
    }
    let binary = binary?;
    let total = total.max(init_peak);
    Some((total, canonical(total, binary)))
}

/// A quantity's bytes (non-zero) and its canonical form.
fn bytes(text: &str) -> Option<(u64, String)> {
    let value = Quantity::parse(text).ok()?.ceil_scaled(0).ok()?;
    let value = u64::try_from(value).ok().filter(|v| *v > 0)?;
    Some((value, canonical(value, is_binary(text))))
}

/// Written with a binary suffix (`Ki`, `Mi`, …).
fn is_binary(text: &str) -> bool {
    text.ends_with('i')
}

/// How Kubernetes prints a whole number of bytes: with the largest suffix of its format
/// (binary or decimal) that divides it exactly, else as a plain number.
pub fn canonical(bytes: u64, binary: bool) -> String {
    let (base, suffixes): (u64, [&str; 6]) = if binary {
        (1024, ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
    } else {
        (1000, ["k", "M", "G", "T", "P", "E"])
    };
    if bytes == 0 {
        return "0".to_owned();
    }
    let (mut value, mut suffix) = (bytes, "");
    for next in suffixes {
        if value % base != 0 {
            break;
        }
        value /= base;
        suffix = next;
    }
    format!("{value}{suffix}")
}

#[cfg(test)]
mod tests;
