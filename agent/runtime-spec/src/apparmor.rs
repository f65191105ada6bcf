//! The container's AppArmor profile (`process.apparmorProfile`), as kubelet asks
//! containerd's CRI plugin for it.
//!
//! The profile is the container's `securityContext.appArmorProfile`, else the pod's, else
//! the legacy annotation `container.apparmor.security.beta.kubernetes.io/<container>`.
//! `Localhost` names a profile loaded in the kernel; `RuntimeDefault` is containerd's
//! `cri-containerd.apparmor.d` (none for a privileged container); `Unconfined` is none.
//! Where AppArmor is not enabled, a profile other than `Unconfined` cannot be applied
//! and is an error (kubelet refuses such pods at admission).
//!
//! Unlike kubelet with containerd, a container that names no profile runs unconfined:
//! containerd's CRI plugin loads its default profile into the kernel itself, which
//! Outpost does not do, so it is applied only when asked for.

use k8s_openapi::api::core::v1::{AppArmorProfile, Container, Pod};

use super::error::{Error, Result};
use super::subject::Subject;

/// The legacy per-container annotation's prefix (the container's name follows).
pub const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
/// containerd CRI's default profile.
pub const RUNTIME_DEFAULT: &str = "cri-containerd.apparmor.d";

/// The AppArmor profile a container asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profile {
    /// Nothing asked: unconfined here (see the module doc).
    Unset,
    Unconfined,
    RuntimeDefault,
    /// A profile loaded in the kernel, by name.
    Localhost(String),
}

/// The container's profile (see the module doc for the precedence).
pub fn profile(pod: &Pod, container: &Container) -> Result<Profile> {
    let at = Subject::container(pod, &container.name);
    let container_field =
        container.security_context.as_ref().and_then(|c| c.app_armor_profile.as_ref());
    let pod_field = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|c| c.app_armor_profile.as_ref());
    if let Some(profile) = container_field {
        return from_field(profile, "securityContext.appArmorProfile", &at);
    }
    if let Some(profile) = pod_field {
        return from_field(profile, "spec.securityContext.appArmorProfile", &at);
    }
    let annotation = format!("{ANNOTATION_PREFIX}{}", container.name);
    match pod.metadata.annotations.as_ref().and_then(|a| a.get(&annotation)) {
        Some(value) => from_annotation(&annotation, value, &at),
        None => Ok(Profile::Unset),
    }
}

fn from_field(profile: &AppArmorProfile, field: &str, at: &Subject) -> Result<Profile> {
    match profile.type_.as_str() {
        "Unconfined" => Ok(Profile::Unconfined),
        "RuntimeDefault" => Ok(Profile::RuntimeDefault),
        "Localhost" => match profile.localhost_profile.as_deref() {
            Some(name) if !name.trim().is_empty() => Ok(Profile::Localhost(name.to_owned())),
            _ => Err(Error::AppArmorLocalhostMissing { at: at.clone(), field: field.to_owned() }),
        },
        other => Err(Error::AppArmorType {
            at: at.clone(),
            field: format!("{field}.type"),
            value: other.to_owned(),
        }),
    }
}

/// `runtime/default`, `unconfined`, `localhost/<name>`.
fn from_annotation(annotation: &str, value: &str, at: &Subject) -> Result<Profile> {
    match value {
        "runtime/default" => Ok(Profile::RuntimeDefault),
        "unconfined" => Ok(Profile::Unconfined),
        _ => match value.strip_prefix("localhost/").filter(|name| !name.trim().is_empty()) {
            Some(name) => Ok(Profile::Localhost(name.to_owned())),
            None => Err(Error::AppArmorAnnotation {
                at: at.clone(),
                annotation: annotation.to_owned(),
                value: value.to_owned(),
            }),
        },
    }
}

/// The `process.apparmorProfile` of a container asking for `profile` on a host where
/// AppArmor is `enabled` or not.
pub(super) fn process_profile(
    profile: &Profile,
    enabled: bool,
    privileged: bool,
    at: &Subject,
) -> Result<Option<String>> {
    match profile {
        Profile::Unset | Profile::Unconfined => Ok(None),
        _ if !enabled => Err(Error::AppArmorDisabled { at: at.clone() }),
        Profile::RuntimeDefault if privileged => Ok(None),
        Profile::RuntimeDefault => Ok(Some(RUNTIME_DEFAULT.to_owned())),
        Profile::Localhost(name) => Ok(Some(name.clone())),
    }
}

#[cfg(test)]
mod tests;
