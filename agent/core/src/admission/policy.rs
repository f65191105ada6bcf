//! The admission policy per source: which sources may run pods that reach into the host
//! (privileged containers, the host's network, PID and IPC namespaces, hostPath volumes).
//!
//! kubelet decided the same per `kubernetes.io/config.source` (`--allow-privileged`,
//! `--host-network-sources`, `--host-pid-sources`, `--host-ipc-sources`, reason
//! `CapabilitiesForbidden`). Here the manifest URL and the push endpoint, both `http`,
//! have policies of their own: the merge keeps each pod's [`Source`], which tells them
//! apart. `allowPrivilegeEscalation` is not a host privilege (it keeps setuid binaries
//! working inside the container's own capabilities and namespaces), so it is not part of
//! the policy, as it was not of kubelet's.
//!
//! hostPath prefixes match whole path components of the path as written, after `.`, `..`
//! and repeated or trailing slashes are normalised: `/var/log` allows `/var/log/app` but
//! not `/var/logs`. Symbolic links on the host are not followed (a policy cannot see the
//! host): allow only directories whose contents untrusted writers cannot change.

use k8s_openapi::api::core::v1::{Pod, SecurityContext};

use super::{Finding, Severity};
use crate::pod::Source;

/// kubelet's pod status reason for a pod its capabilities do not allow.
pub const FORBIDDEN: &str = "CapabilitiesForbidden";

/// What the pods of one source may do to the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePolicy {
    /// Containers (init and ephemeral ones too) with `securityContext.privileged: true`.
    pub privileged: bool,
    pub host_network: bool,
    pub host_pid: bool,
    pub host_ipc: bool,
    /// hostPath volumes must be under one of these (normalised, absolute); `/` allows any.
    pub allowed_host_paths: Vec<String>,
}

impl SourcePolicy {
    /// Everything, as kubelet allows static pods and API pods.
    pub fn unrestricted() -> SourcePolicy {
        SourcePolicy {
            privileged: true,
            host_network: true,
            host_pid: true,
            host_ipc: true,
            allowed_host_paths: vec!["/".to_owned()],
        }
    }

    /// Nothing of the host: Pod Security's baseline for these five controls.
    pub fn restricted() -> SourcePolicy {
        SourcePolicy {
            privileged: false,
            host_network: false,
            host_pid: false,
            host_ipc: false,
            allowed_host_paths: Vec::new(),
        }
    }

    /// Whether a hostPath volume at `path` (as written in the pod) is allowed.
    pub fn allows_host_path(&self, path: &str) -> bool {
        if self.allowed_host_paths.iter().any(|prefix| prefix == "/") {
            return true;
        }
        let Some(path) = normalize(path) else { return false };
        self.allowed_host_paths.iter().any(|prefix| within(&path, prefix))
    }
}

/// The policy of every source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub file: SourcePolicy,
    pub url: SourcePolicy,
    pub push: SourcePolicy,
    pub api: SourcePolicy,
}

impl Default for Policy {
    /// File pods may do anything, as kubelet's static pods may (whoever can write the
    /// manifest directory is root on the node anyway); API pods too, as under kubelet,
    /// where the API server's admission is the gate. Pods from the manifest URL and the
    /// push endpoint get nothing of the host unless the config allows it.
    fn default() -> Policy {
        Policy {
            file: SourcePolicy::unrestricted(),
            url: SourcePolicy::restricted(),
            push: SourcePolicy::restricted(),
            api: SourcePolicy::unrestricted(),
        }
    }
}

impl Policy {
    /// Every source may do anything: what a manifest alone is checked against.
    pub fn unrestricted() -> Policy {
        Policy {
            file: SourcePolicy::unrestricted(),
            url: SourcePolicy::unrestricted(),
            push: SourcePolicy::unrestricted(),
            api: SourcePolicy::unrestricted(),
        }
    }

    pub fn of(&self, source: Source) -> &SourcePolicy {
        match source {
            Source::File => &self.file,
            Source::Url => &self.url,
            Source::Push => &self.push,
            Source::Api => &self.api,
        }
    }
}

/// The config file's key of a source's policy (`admissionPolicy.<source>`).
pub fn config_key(source: Source) -> String {
    format!("admissionPolicy.{}", source.as_str())
}

/// Where pods of `source` come from, as a message says it.
fn described(source: Source) -> &'static str {
    match source {
        Source::File => "the manifest directory (source file)",
        Source::Url => "the manifest URL (source url)",
        Source::Push => "the push endpoint (source push)",
        Source::Api => "the API server (source api)",
    }
}

/// Every field of `pod` that `source`'s policy does not allow, each refused with
/// [`FORBIDDEN`], the field, the source and the config key that would allow it.
pub fn review(pod: &Pod, source: Source, policy: &Policy) -> Vec<Finding> {
    let allowed = policy.of(source);
    let mut findings = Vec::new();
    let Some(spec) = pod.spec.as_ref() else { return findings };
    let mut refuse = |field: String, what: &str, setting: &str, to: &str| {
        let key = format!("{}.{setting}", config_key(source));
        let message = format!(
            "{field}: {what} is not allowed for pods from {}; allow it with {key}: {to} in \
             the agent's config file",
            described(source),
        );
        findings.push(Finding { field, severity: Severity::Refused, reason: FORBIDDEN, message });
    };
    let namespaces = [
        ("hostNetwork", spec.host_network, allowed.host_network, "the host's network namespace"),
        ("hostPID", spec.host_pid, allowed.host_pid, "the host's PID namespace"),
        ("hostIPC", spec.host_ipc, allowed.host_ipc, "the host's IPC namespace"),
    ];
    for (setting, asked, allowed, what) in namespaces {
        if asked == Some(true) && !allowed {
            refuse(format!("spec.{setting}"), what, setting, "true");
        }
    }
    if !allowed.privileged {
        let containers = [
            ("containers", privileged(spec.containers.iter().map(|c| &c.security_context))),
            (
                "initContainers",
                privileged(spec.init_containers.iter().flatten().map(|c| &c.security_context)),
            ),
            (
                "ephemeralContainers",
                privileged(spec.ephemeral_containers.iter().flatten().map(|c| &c.security_context)),
            ),
        ];
        for (list, indexes) in containers {
            for i in indexes {
                let field = format!("spec.{list}[{i}].securityContext.privileged");
                refuse(field, "a privileged container", "privileged", "true");
            }
        }
    }
    for (i, volume) in spec.volumes.iter().flatten().enumerate() {
        let Some(host_path) = &volume.host_path else { continue };
        if !allowed.allows_host_path(&host_path.path) {
            let field = format!("spec.volumes[{i}].hostPath.path");
            let what = format!("hostPath {:?}", host_path.path);
            let to = match normalize(&host_path.path) {
                Some(path) => format!("[{path}] (or a directory above it)"),
                None => "[/] (a relative path is under no other prefix)".to_owned(),
            };
            refuse(field, &what, "allowedHostPaths", &to);
        }
    }
    findings
}

/// The indexes of the containers whose security context asks for `privileged: true`.
fn privileged<'a>(contexts: impl Iterator<Item = &'a Option<SecurityContext>>) -> Vec<usize> {
    contexts
        .enumerate()
        .filter_map(|(i, context)| {
            context.as_ref().and_then(|c| c.privileged).unwrap_or(false).then_some(i)
        })
        .collect()
}

/// An absolute path with `.`, `..` and empty components resolved as the kernel resolves
/// them without symlinks (`..` at the root stays at the root); `None` for a relative path.
pub fn normalize(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// Whether the normalised path `path` is `prefix` or under it, by whole components
/// (both normalised).
pub fn within(path: &str, prefix: &str) -> bool {
    if prefix == "/" {
        return path.starts_with('/');
    }
    path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests;
