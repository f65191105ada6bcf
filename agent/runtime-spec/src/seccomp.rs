//! The container's seccomp filter (`linux.seccomp`), as kubelet asks containerd's CRI
//! plugin for it.
//!
//! The profile is the container's `securityContext.seccompProfile`, else the pod's, else
//! the legacy annotations (`container.seccomp.security.alpha.kubernetes.io/<container>`,
//! then `seccomp.security.alpha.kubernetes.io/pod`), else `Unconfined` (kubelet's default
//! without `--seccomp-default`). A privileged container is never filtered.
//!
//! - `RuntimeDefault` is containerd's default profile ([`runtime_default`]).
//! - `Localhost` names a file under the agent's `--seccomp-profile-root` (kubelet's
//!   `<root-dir>/seccomp`): a profile in the format Docker and containerd read (the OCI
//!   filter plus `name`, `archMap`, and rules `includes`/`excludes` by architecture and
//!   capability), read by the caller ([`LocalhostProfile`]) and converted here.
//! - `Unconfined`: no filter.

use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, SeccompProfile};
use oci_spec::runtime::{
    Arch, Capability, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompFilterFlag,
    LinuxSyscall,
};
use serde::Deserialize;

use super::error::Result;
use super::subject::Subject;

mod runtime_default;

/// Why a Localhost profile file cannot be converted to a filter; the spec's
/// [`crate::Error::SeccompProfile`] names the container and the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("is not a seccomp profile: {0}")]
    Parse(#[source] serde_json::Error),
    #[error("has syscall rules but no defaultAction")]
    NoDefaultAction,
    #[error("sets both architectures and archMap; use one")]
    ArchitecturesAndArchMap,
    #[error("has a rule with both name and names; use one")]
    NameAndNames,
}

/// The pod-wide legacy annotation.
pub const POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
/// The per-container legacy annotation's prefix (the container's name follows).
pub const CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// The seccomp profile a container asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profile {
    Unconfined,
    RuntimeDefault,
    /// A file, relative to the seccomp profile root.
    Localhost(PathBuf),
}

/// A `Localhost` profile as read from its file.
#[derive(Debug, Clone)]
pub struct LocalhostProfile {
    /// The file, for messages.
    pub path: PathBuf,
    pub json: String,
}

/// The container's profile (see the module doc for the precedence).
pub fn profile(pod: &Pod, container: &Container) -> Result<Profile> {
    let at = Subject::container(pod, &container.name);
    let spec = pod.spec.as_ref();
    let field = |profile: Option<&SeccompProfile>, field: &str| {
        profile.map(|p| from_field(p, field, &at)).transpose()
    };
    let container_field =
        container.security_context.as_ref().and_then(|c| c.seccomp_profile.as_ref());
    let pod_field =
        spec.and_then(|s| s.security_context.as_ref()).and_then(|c| c.seccomp_profile.as_ref());
    if let Some(profile) = field(container_field, "securityContext.seccompProfile")? {
        return Ok(profile);
    }
    if let Some(profile) = field(pod_field, "spec.securityContext.seccompProfile")? {
        return Ok(profile);
    }
    let annotations = pod.metadata.annotations.as_ref();
    let container_annotation = format!("{CONTAINER_ANNOTATION_PREFIX}{}", container.name);
    for annotation in [container_annotation.as_str(), POD_ANNOTATION] {
        if let Some(value) = annotations.and_then(|a| a.get(annotation)) {
            return from_annotation(annotation, value, &at);
        }
    }
    Ok(Profile::Unconfined)
}

fn from_field(profile: &SeccompProfile, field: &str, at: &Subject) -> Result<Profile> {
    match profile.type_.as_str() {
        "Unconfined" => Ok(Profile::Unconfined),
        "RuntimeDefault" => Ok(Profile::RuntimeDefault),
        "Localhost" => {
            let Some(path) = profile.localhost_profile.as_deref().filter(|p| !p.is_empty()) else {
                return Err(crate::Error::SeccompLocalhostMissing {
                    at: at.clone(),
                    field: field.to_owned(),
                });
            };
            localhost(path, &format!("{field}.localhostProfile"), at)
        }
        other => Err(crate::Error::SeccompType {
            at: at.clone(),
            field: format!("{field}.type"),
            value: other.to_owned(),
        }),
    }
}

/// `runtime/default` (or `docker/default`), `unconfined`, `localhost/<path>`.
fn from_annotation(annotation: &str, value: &str, at: &Subject) -> Result<Profile> {
    match value {
        "runtime/default" | "docker/default" => Ok(Profile::RuntimeDefault),
        "unconfined" => Ok(Profile::Unconfined),
        _ => match value.strip_prefix("localhost/") {
            Some(path) => localhost(path, &format!("annotation {annotation}"), at),
            None => Err(crate::Error::SeccompAnnotation {
                at: at.clone(),
                annotation: annotation.to_owned(),
                value: value.to_owned(),
            }),
        },
    }
}

/// A profile path below the root: relative, without `..` (the API's rule).
fn localhost(path: &str, field: &str, at: &Subject) -> Result<Profile> {
    let relative = Path::new(path);
    let plain =
        relative.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if path.is_empty() || !plain {
        return Err(crate::Error::SeccompLocalhostPath {
            at: at.clone(),
            field: field.to_owned(),
            path: path.to_owned(),
        });
    }
    Ok(Profile::Localhost(relative.to_path_buf()))
}

/// The filter of a container with `profile` and the `capabilities` bounding set;
/// `localhost` is the file a `Localhost` profile names, read.
pub(super) fn seccomp(
    profile: &Profile,
    localhost: Option<&LocalhostProfile>,
    capabilities: &[Capability],
    privileged: bool,
    at: &Subject,
) -> Result<Option<LinuxSeccomp>> {
    if privileged {
        return Ok(None);
    }
    match profile {
        Profile::Unconfined => Ok(None),
        Profile::RuntimeDefault => Ok(Some(runtime_default::profile(capabilities))),
        Profile::Localhost(name) => {
            let Some(file) = localhost else {
                return Err(crate::Error::SeccompNotRead { at: at.clone(), name: name.clone() });
            };
            convert(&file.json, capabilities).map_err(|problem| crate::Error::SeccompProfile {
                at: at.clone(),
                path: file.path.clone(),
                problem,
            })
        }
    }
}

/// A profile file: the OCI filter, Docker's way.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    #[serde(default)]
    default_action: Option<LinuxSeccompAction>,
    default_errno_ret: Option<u32>,
    #[serde(default)]
    architectures: Vec<Arch>,
    #[serde(default)]
    arch_map: Vec<ArchMap>,
    #[serde(default)]
    flags: Vec<LinuxSeccompFilterFlag>,
    listener_path: Option<PathBuf>,
    listener_metadata: Option<String>,
    #[serde(default)]
    syscalls: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ArchMap {
    architecture: Arch,
    #[serde(default)]
    sub_architectures: Vec<Arch>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    name: String,
    #[serde(default)]
    names: Vec<String>,
    action: LinuxSeccompAction,
    errno_ret: Option<u32>,
    #[serde(default)]
    args: Vec<LinuxSeccompArg>,
    #[serde(default)]
    includes: Filter,
    #[serde(default)]
    excludes: Filter,
}

/// Where a rule applies: Go's architecture names (`amd64`, `arm64`, …) and capability
/// names (`CAP_SYS_ADMIN`).
#[derive(Debug, Default, Deserialize)]
struct Filter {
    #[serde(default)]
    arches: Vec<String>,
    #[serde(default)]
    caps: Vec<String>,
}

/// This machine's architecture as Go (and so profiles) names it, and its seccomp name.
#[cfg(target_arch = "x86_64")]
const NATIVE: (&str, Arch) = ("amd64", Arch::ScmpArchX86_64);
#[cfg(target_arch = "aarch64")]
const NATIVE: (&str, Arch) = ("arm64", Arch::ScmpArchAarch64);
#[cfg(target_arch = "riscv64")]
const NATIVE: (&str, Arch) = ("riscv64", Arch::ScmpArchRiscv64);
#[cfg(target_arch = "s390x")]
const NATIVE: (&str, Arch) = ("s390x", Arch::ScmpArchS390x);
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64",
    target_arch = "s390x"
)))]
const NATIVE: (&str, Arch) = (std::env::consts::ARCH, Arch::ScmpArchNative);

/// containerd's conversion of a profile file: `None` when it has neither a default action
/// nor rules; otherwise the filter for this architecture and these capabilities.
fn convert(json: &str, capabilities: &[Capability]) -> Result<Option<LinuxSeccomp>, Error> {
    let file: File = serde_json::from_str(json).map_err(Error::Parse)?;
    let Some(default_action) = file.default_action else {
        if file.syscalls.is_empty() {
            return Ok(None);
        }
        return Err(Error::NoDefaultAction);
    };
    if !file.architectures.is_empty() && !file.arch_map.is_empty() {
        return Err(Error::ArchitecturesAndArchMap);
    }
    let (native_name, native) = NATIVE;
    let mut architectures = file.architectures;
    for map in file.arch_map.into_iter().filter(|m| m.architecture == native) {
        architectures.push(map.architecture);
        architectures.extend(map.sub_architectures);
    }
    let has = |name: &String| capabilities.iter().any(|c| format!("CAP_{c}") == *name);
    let mut syscalls = Vec::with_capacity(file.syscalls.len());
    for rule in file.syscalls {
        let names = match (rule.name.is_empty(), rule.names.is_empty()) {
            (false, false) => return Err(Error::NameAndNames),
            (false, true) => vec![rule.name],
            _ => rule.names,
        };
        let excluded = rule.excludes.arches.iter().any(|a| a == native_name)
            || rule.excludes.caps.iter().any(has);
        let included = (rule.includes.arches.is_empty()
            || rule.includes.arches.iter().any(|a| a == native_name))
            && rule.includes.caps.iter().all(has);
        if excluded || !included {
            continue;
        }
        let mut syscall = LinuxSyscall::default();
        syscall
            .set_names(names)
            .set_action(rule.action)
            .set_errno_ret(rule.errno_ret)
            .set_args((!rule.args.is_empty()).then_some(rule.args));
        syscalls.push(syscall);
    }
    let mut seccomp = LinuxSeccomp::default();
    seccomp
        .set_default_action(default_action)
        .set_default_errno_ret(file.default_errno_ret)
        .set_architectures((!architectures.is_empty()).then_some(architectures))
        .set_flags((!file.flags.is_empty()).then_some(file.flags))
        .set_listener_path(file.listener_path)
        .set_listener_metadata(file.listener_metadata)
        .set_syscalls(Some(syscalls));
    Ok(Some(seccomp))
}

#[cfg(test)]
mod tests;
