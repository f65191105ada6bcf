//! Fields decided by their value, and by the node: the table's `Check`s.

use serde_json::Value;

use super::review::Review;
use super::{UNSUPPORTED_FIELD, builtin_priority, sysctl};
use crate::devices;
use crate::quantity::Quantity;

/// kubelet's reason and message when a pod asks for AppArmor on a host without it.
const APPARMOR: &str = "AppArmor";
const APPARMOR_DISABLED: &str = "Cannot enforce AppArmor: AppArmor is not enabled on the host";

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// A string field that is not one of `allowed` is refused, listing them.
fn one_of(review: &mut Review<'_>, field: &str, value: &Value, allowed: &[&str]) {
    let value = text(value);
    if !value.is_empty() && !allowed.contains(&value) {
        review.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!("{field}: {value:?} is not supported; use {}", allowed.join(" or ")),
        );
    }
}

pub(super) fn dns_policy(review: &mut Review<'_>, field: &str, value: &Value) {
    match text(value) {
        policy @ ("ClusterFirst" | "ClusterFirstWithHostNet") if !review.facts.cluster_dns => review.warn(
            field,
            format!(
                "{field}: {policy} asks for cluster DNS, which this node does not have: the pod \
                 uses the node's resolver (as dnsPolicy Default), as kubelet does without \
                 clusterDNS; set dnsPolicy Default to say so"
            ),
        ),
        _ => one_of(
            review,
            field,
            value,
            &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        ),
    }
}

pub(super) fn host_users(review: &mut Review<'_>, field: &str, value: &Value) {
    if value.as_bool() == Some(false) {
        review.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!(
                "{field}: false (a user namespace) is not supported: the pod's volumes would need \
                 idmapped mounts, which runc does from 1.2 (Debian 12 ships runc 1.1.5) on Linux \
                 5.12 or later (5.19 for tmpfs), and Outpost does not yet map the pod's users \
                 (the OCI spec's uidMappings and gidMappings); remove it to run in the host's \
                 user namespace"
            ),
        );
    }
}

/// `seLinuxOptions`, the pod's or a container's: passed on as kubelet passes them. Where
/// SELinux is off, containerd's CRI sets no label (go-selinux's `InitLabels` gives none), so
/// the options change nothing; where it is on, the container's process and mounts would
/// need the label, which Outpost does not apply: refused.
pub(super) fn selinux_options(review: &mut Review<'_>, field: &str, value: &Value) {
    if review.facts.selinux_enabled && !super::review::is_unset(value) {
        review.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!(
                "{field}: this host has SELinux enabled (/sys/fs/selinux/enforce), and Outpost \
                 does not label a container's process and mounts (the OCI spec's \
                 process.selinuxLabel and linux.mountLabel) as containerd's CRI does; remove \
                 seLinuxOptions (the container then runs with the runtime's default label), or \
                 run the pod on a node with SELinux disabled"
            ),
        );
    }
}

pub(super) fn os(review: &mut Review<'_>, field: &str, value: &Value) {
    let name = text(value);
    if name != "linux" {
        review.refuse(
            field,
            "PodOSNotSupported",
            format!(
                "Failed to admit pod as the OS field doesn't match node OS ({field} is {name:?}, \
                 this node runs linux)"
            ),
        );
    }
}

pub(super) fn priority_class(review: &mut Review<'_>, field: &str, value: &Value) {
    let class = text(value);
    let has_priority = review.pod.spec.as_ref().is_some_and(|s| s.priority.is_some());
    if !class.is_empty() && !has_priority && builtin_priority(class).is_none() {
        review.warn(
            field,
            format!(
                "{field}: priority class {class:?} is not known without an API server: the pod \
                 has priority 0; set spec.priority, or use system-node-critical or \
                 system-cluster-critical"
            ),
        );
    }
}

/// kubelet's behaviour, but a static pod's gates are never set: the pod is never Ready.
pub(super) fn readiness_gates(review: &mut Review<'_>, field: &str, value: &Value) {
    if value.as_array().is_some_and(|gates| !gates.is_empty()) {
        review.warn(
            field,
            format!(
                "{field}: nothing on this node sets readiness gate conditions, so the pod will \
                 not be Ready (as under kubelet); remove them unless a controller sets them"
            ),
        );
    }
}

/// `appArmorProfile`, the pod's or a container's: Unconfined always; RuntimeDefault and
/// Localhost only where AppArmor is enabled.
pub(super) fn apparmor_profile(review: &mut Review<'_>, field: &str, value: &Value) {
    let kind = text(&value["type"]);
    let localhost = text(&value["localhostProfile"]);
    match kind {
        "Unconfined" => {}
        "RuntimeDefault" | "Localhost" => {
            if kind == "Localhost" && localhost.is_empty() {
                return review.refuse(
                    &format!("{field}.localhostProfile"),
                    UNSUPPORTED_FIELD,
                    format!("{field}.localhostProfile: required with type Localhost; name the loaded profile"),
                );
            }
            apparmor_enabled(review, field, kind);
        }
        _ => one_of(
            review,
            &format!("{field}.type"),
            &value["type"],
            &["RuntimeDefault", "Localhost", "Unconfined"],
        ),
    }
}

/// The legacy `container.apparmor.security.beta.kubernetes.io/<container>` annotation.
pub(super) fn apparmor_annotation(review: &mut Review<'_>, field: &str, value: &Value) {
    match text(value) {
        "unconfined" => {}
        profile if profile == "runtime/default" || profile.strip_prefix("localhost/").is_some_and(|p| !p.is_empty()) => {
            apparmor_enabled(review, field, profile);
        }
        profile => review.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!("{field}: {profile:?} is not a profile; use runtime/default, localhost/<profile> or unconfined"),
        ),
    }
}

fn apparmor_enabled(review: &mut Review<'_>, field: &str, profile: &str) {
    if !review.facts.apparmor_enabled {
        review.refuse(
            field,
            APPARMOR,
            format!(
                "{APPARMOR_DISABLED} ({field} asks for {profile}); enable AppArmor on the host, \
                 or use Unconfined"
            ),
        );
    }
}

/// `seccompProfile`, the pod's or a container's.
pub(super) fn seccomp_profile(review: &mut Review<'_>, field: &str, value: &Value) {
    match text(&value["type"]) {
        "RuntimeDefault" | "Unconfined" => {}
        "Localhost" => {
            if text(&value["localhostProfile"]).is_empty() {
                review.refuse(
                    &format!("{field}.localhostProfile"),
                    UNSUPPORTED_FIELD,
                    format!(
                        "{field}.localhostProfile: required with type Localhost; name the \
                         profile's file, relative to the seccomp profile root"
                    ),
                );
            }
        }
        _ => one_of(
            review,
            &format!("{field}.type"),
            &value["type"],
            &["RuntimeDefault", "Localhost", "Unconfined"],
        ),
    }
}

/// The legacy `seccomp.security.alpha.kubernetes.io/pod` and
/// `container.seccomp.security.alpha.kubernetes.io/<container>` annotations.
pub(super) fn seccomp_annotation(review: &mut Review<'_>, field: &str, value: &Value) {
    let profile = text(value);
    let valid = matches!(profile, "runtime/default" | "docker/default" | "unconfined")
        || profile.strip_prefix("localhost/").is_some_and(|p| !p.is_empty());
    if !valid {
        review.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!(
                "{field}: {profile:?} is not a profile; use runtime/default, localhost/<file> or \
                 unconfined"
            ),
        );
    }
}

/// `spec.securityContext.sysctls`, as kubelet's sysctl admission decides them.
pub(super) fn sysctls(review: &mut Review<'_>, field: &str, value: &Value) {
    let spec = review.pod.spec.as_ref();
    let host = sysctl::HostNamespaces {
        network: spec.and_then(|s| s.host_network).unwrap_or(false),
        ipc: spec.and_then(|s| s.host_ipc).unwrap_or(false),
    };
    for (i, item) in value.as_array().into_iter().flatten().enumerate() {
        let name = text(&item["name"]);
        if let Err(why) = sysctl::admit(name, host, &review.facts.allowed_unsafe_sysctls) {
            let field = format!("{field}[{i}].name");
            let message = format!(
                "forbidden sysctl: {why} ({field}; allow it on this node with \
                 --allowed-unsafe-sysctls, or remove it)"
            );
            review.refuse(&field, sysctl::FORBIDDEN, message);
        }
    }
}

/// A container's `resources.limits` or `resources.requests`: cpu, memory and
/// ephemeral-storage (a limit evicts the pod past it, as kubelet's local storage
/// eviction does; see `gc::storage`), and extended resources (D1, D2: a device plugin's,
/// given by the device manager, or a cluster's, counted by the node's admission), which
/// the API server's validation holds to whole numbers with a request equal to the limit.
/// Huge pages are refused.
pub(super) fn resources(review: &mut Review<'_>, field: &str, value: &Value) {
    let limits = field.ends_with(".limits");
    for (name, quantity) in value.as_object().into_iter().flatten() {
        let at = format!("{field}.{name}");
        match name.as_str() {
            "cpu" | "memory" | "ephemeral-storage" => {}
            hugepages if hugepages.starts_with("hugepages-") => review.refuse(
                &at,
                UNSUPPORTED_FIELD,
                format!("{at}: not supported: huge pages are not implemented; use cpu, memory and ephemeral-storage"),
            ),
            extended if devices::is_extended_resource(extended) => {
                if let Some(message) = extended_quantity(review, field, limits, extended, quantity) {
                    review.refuse(&at, UNSUPPORTED_FIELD, format!("{at}: {message}"));
                }
            }
            _ => review.refuse(
                &at,
                UNSUPPORTED_FIELD,
                format!(
                    "{at}: not supported: not a resource this node knows; use cpu, memory, \
                     ephemeral-storage or an extended resource (a domain-prefixed name such as \
                     example.com/device)"
                ),
            ),
        }
    }
}

/// The API server's validation of an extended resource's quantity: a whole number, and
/// a request only with the same limit (extended resources cannot be overcommitted).
fn extended_quantity(
    review: &Review<'_>,
    field: &str,
    limits: bool,
    name: &str,
    quantity: &Value,
) -> Option<String> {
    let text = quantity.as_str().map(str::to_owned).unwrap_or_else(|| quantity.to_string());
    let milli = |text: &str| Quantity::parse(text).ok().and_then(|q| q.milli_value().ok());
    let whole = milli(&text).is_some_and(|m| m % 1000 == 0);
    if !whole {
        return Some(format!("Invalid value: {text:?}: must be an integer"));
    }
    if limits {
        return None;
    }
    let container = container_of(review.pod, field)?;
    let limit = container.resources.as_ref()?.limits.as_ref().and_then(|l| l.get(name));
    match limit {
        None => Some("Forbidden: Limit must be set for non overcommitable resources".to_owned()),
        Some(limit) if milli(&limit.0) != milli(&text) => {
            Some(format!("Invalid value: {text:?}: must be equal to {name} limit of {}", limit.0))
        }
        Some(_) => None,
    }
}

/// Pod-level `spec.resources` (Q2): cpu and memory size the pod's cgroup (and decide its
/// QoS class); Kubernetes allows nothing else there but huge pages, which are not
/// implemented.
pub(super) fn pod_resources(review: &mut Review<'_>, field: &str, value: &Value) {
    for name in value.as_object().into_iter().flatten().map(|(name, _)| name) {
        if name == "cpu" || name == "memory" {
            continue;
        }
        review.refuse(
            &format!("{field}.{name}"),
            UNSUPPORTED_FIELD,
            format!(
                "{field}.{name}: not supported: pod-level resources are cpu and memory; set \
                 {name} on each container"
            ),
        );
    }
}

/// K6: an app container's (or sidecar's) `resizePolicy` says how in-place resize treats
/// it; an init container is never resized.
pub(super) fn resize_policy(review: &mut Review<'_>, field: &str, _value: &Value) {
    if review.in_init_container {
        review.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!(
                "{field}: on an init container is not supported: in-place resize (K6) is for \
                 app containers; remove it"
            ),
        );
    }
}

/// `Merge` (the default: the image's groups of the user too); `Strict` is not implemented.
pub(super) fn supplemental_groups_policy(review: &mut Review<'_>, field: &str, value: &Value) {
    one_of(review, field, value, &["Merge"]);
}

/// `shareProcessNamespace` with `hostPID`: the API server refuses the pair.
pub(super) fn share_process_namespace(review: &mut Review<'_>, field: &str, value: &Value) {
    let host_pid = review.pod.spec.as_ref().and_then(|s| s.host_pid).unwrap_or(false);
    if value.as_bool() == Some(true) && host_pid {
        review.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!("{field}: true cannot go with spec.hostPID: true; remove one of them"),
        );
    }
}

pub(super) fn proc_mount(review: &mut Review<'_>, field: &str, value: &Value) {
    one_of(review, field, value, &["Default"]);
}

/// D6: `None`, `HostToContainer`, and `Bidirectional` in a privileged container only (the
/// API server's validation, which kubelet applies to static pods too).
pub(super) fn mount_propagation(review: &mut Review<'_>, field: &str, value: &Value) {
    one_of(review, field, value, &["None", "HostToContainer", "Bidirectional"]);
    let privileged = container_of(review.pod, field)
        .and_then(|c| c.security_context.as_ref()?.privileged)
        .unwrap_or(false);
    if text(value) == "Bidirectional" && !privileged {
        review.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!(
                "{field}: Forbidden: Bidirectional mount propagation is available only to \
                 privileged containers"
            ),
        );
    }
}

/// The container a field of it belongs to (`spec.containers[0].…`, `spec.initContainers[1].…`).
fn container_of<'p>(
    pod: &'p k8s_openapi::api::core::v1::Pod,
    field: &str,
) -> Option<&'p k8s_openapi::api::core::v1::Container> {
    let spec = pod.spec.as_ref()?;
    let (list, rest) = field.strip_prefix("spec.")?.split_once('[')?;
    let index: usize = rest.split_once(']')?.0.parse().ok()?;
    match list {
        "containers" => spec.containers.get(index),
        "initContainers" => spec.init_containers.as_ref()?.get(index),
        _ => None,
    }
}

/// K3: a container's `volumeDevices`, raw block volumes of the pod's claims. A static pod
/// has no claims (V2): refused as its claim volumes are. An API pod's are checked as
/// kube-apiserver's `validateVolumeDevices` checks them (a static pod's manifest meets no
/// API server; `outpost debug`'s containers neither), in its words: each names a volume
/// of the pod, a `persistentVolumeClaim` or `ephemeral` one, once, not also in the
/// container's `volumeMounts`; each `devicePath` is set, unique, without `..`, not also a
/// `mountPath`, and absolute (kubelet's check when it makes the container).
pub(super) fn volume_devices(review: &mut Review<'_>, field: &str, value: &Value) {
    if super::review::is_unset(value) {
        return;
    }
    if review.source.is_static() {
        review.api_object(field);
        return;
    }
    let pod = review.pod;
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten();
    let claims: Vec<(&str, bool)> = volumes
        .map(|v| (v.name.as_str(), v.persistent_volume_claim.is_some() || v.ephemeral.is_some()))
        .collect();
    let mounts = mounts_of(pod, field);
    let (mut names, mut paths) = (Vec::new(), Vec::new());
    for (i, device) in value.as_array().into_iter().flatten().enumerate() {
        let mut refuse = |key: &str, what: String| {
            let at = format!("{field}[{i}].{key}");
            review.refuse(&at, UNSUPPORTED_FIELD, format!("{at}: {what}"));
        };
        let name = device.get("name").map(text).unwrap_or_default();
        let path = device.get("devicePath").map(text).unwrap_or_default();
        if name.is_empty() {
            refuse("name", "Required value".to_owned());
        }
        if names.contains(&name) {
            refuse("name", format!("Invalid value: {name:?}: must be unique"));
        }
        match claims.iter().find(|(volume, _)| *volume == name) {
            Some((_, true)) => {}
            Some((_, false)) => refuse(
                "name",
                format!(
                    "Invalid value: {name:?}: can only use volume source type of \
                     PersistentVolumeClaim or Ephemeral for block mode"
                ),
            ),
            None => refuse("name", format!("Not found: {name:?}")),
        }
        if path.is_empty() {
            refuse("devicePath", "Required value".to_owned());
        }
        if paths.contains(&path) {
            refuse("devicePath", format!("Invalid value: {path:?}: must be unique"));
        }
        if path.split('/').any(|part| part == "..") {
            refuse(
                "devicePath",
                format!("Invalid value: {path:?}: can not contain backsteps ('..')"),
            );
        } else {
            paths.push(path);
        }
        if !path.is_empty() && !path.starts_with('/') {
            refuse(
                "devicePath",
                format!(
                    "Invalid value: {path:?}: must be an absolute path (kubelet: error DevicePath \
                     `{path}` must be an absolute path)"
                ),
            );
        }
        if mounts.iter().any(|(mounted, _)| *mounted == name) {
            refuse(
                "name",
                format!("Invalid value: {name:?}: must not already exist in volumeMounts"),
            );
        }
        if mounts.iter().any(|(_, mount_path)| *mount_path == path) {
            refuse(
                "devicePath",
                format!(
                    "Invalid value: {path:?}: must not already exist as a path in volumeMounts"
                ),
            );
        }
        if !name.is_empty() {
            names.push(name);
        }
    }
}

/// The `volumeMounts` (name, `mountPath`) of the container a field of it belongs to, an
/// ephemeral one too.
fn mounts_of<'p>(pod: &'p k8s_openapi::api::core::v1::Pod, field: &str) -> Vec<(&'p str, &'p str)> {
    let mounts = match container_of(pod, field) {
        Some(container) => container.volume_mounts.as_ref(),
        None => ephemeral_of(pod, field).and_then(|c| c.volume_mounts.as_ref()),
    };
    let mounts = mounts.into_iter().flatten();
    mounts.map(|m| (m.name.as_str(), m.mount_path.as_str())).collect()
}

/// The ephemeral container a field of it belongs to (`spec.ephemeralContainers[0].…`).
fn ephemeral_of<'p>(
    pod: &'p k8s_openapi::api::core::v1::Pod,
    field: &str,
) -> Option<&'p k8s_openapi::api::core::v1::EphemeralContainer> {
    let rest = field.strip_prefix("spec.ephemeralContainers[")?;
    let index: usize = rest.split_once(']')?.0.parse().ok()?;
    pod.spec.as_ref()?.ephemeral_containers.as_ref()?.get(index)
}

pub(super) fn recursive_read_only(review: &mut Review<'_>, field: &str, value: &Value) {
    // `Enabled` is runc's `rro`; on a kernel without it the container fails as kubelet's
    // does, and `IfPossible` falls back to a plain read-only mount.
    one_of(review, field, value, &["Disabled", "IfPossible", "Enabled"]);
}

/// V4: an image volume, as the API server validates it (`validateImageVolumeSource`): a
/// `reference` is required, and `pullPolicy` is one of the three (a static pod meets no
/// API server, so the node says it).
pub(super) fn image_volume(review: &mut Review<'_>, field: &str, value: &Value) {
    let reference = value.get("reference").map(text).unwrap_or_default();
    if reference.is_empty() {
        review.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!(
                "{field}.reference: Required value: name the image, e.g. registry.example/model:v1"
            ),
        );
    }
    if let Some(policy) = value.get("pullPolicy") {
        one_of(
            review,
            &format!("{field}.pullPolicy"),
            policy,
            &["Always", "IfNotPresent", "Never"],
        );
    }
}

/// A projected volume's sources: the downward API is the pod's own; configMap, secret,
/// serviceAccountToken and clusterTrustBundle are API objects (refused for static pods,
/// V2). A source the API does not define is refused as unknown fields are.
pub(super) fn projected(review: &mut Review<'_>, field: &str, value: &Value) {
    let sources = value.get("sources").and_then(Value::as_array);
    for (i, source) in sources.into_iter().flatten().enumerate() {
        for (kind, value) in source.as_object().into_iter().flatten() {
            let at = format!("{field}.sources[{i}].{kind}");
            match kind.as_str() {
                "downwardAPI" => {}
                "configMap" | "secret" | "serviceAccountToken" | "clusterTrustBundle" => {
                    review.api_object(&at);
                }
                _ if super::review::is_unset(value) => {}
                _ => review.refuse(
                    &at,
                    UNSUPPORTED_FIELD,
                    format!("{at}: not a projected volume source Outpost knows; remove it"),
                ),
            }
        }
    }
}
