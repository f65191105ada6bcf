//! The pod's `securityContext.sysctls`, written into each container's OCI `linux.sysctl`
//! (runc sets them in the pod's namespaces as the container starts; kubelet hands them to
//! the sandbox, which Outpost does not have). Whether a sysctl is allowed at all (the safe
//! set, `--allowed-unsafe-sysctls`) is admission's decision; here a sysctl that would reach
//! into a namespace the pod shares with the host is refused, as kubelet's validation does.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use outpost_core::admission::sysctl::{Namespace, namespace, normalize};

use super::error::{Error, Result};
use super::subject::Subject;

/// The pod's sysctls by normalized name; `None` when it sets none. A network sysctl
/// with `hostNetwork`, an IPC one with `hostIPC` or a UTS one with `hostNetwork` (which
/// shares the host's UTS namespace here) is an error.
pub(super) fn sysctls(pod: &Pod, at: &Subject) -> Result<Option<HashMap<String, String>>> {
    let spec = pod.spec.as_ref();
    let listed = spec
        .and_then(|s| s.security_context.as_ref())
        .and_then(|c| c.sysctls.as_deref())
        .unwrap_or_default();
    if listed.is_empty() {
        return Ok(None);
    }
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let host_ipc = spec.and_then(|s| s.host_ipc).unwrap_or(false);
    let mut sysctls = HashMap::with_capacity(listed.len());
    for sysctl in listed {
        let name = normalize(&sysctl.name);
        let refused = match namespace(&name) {
            Some(namespace @ (Namespace::Network | Namespace::Uts)) if host_network => {
                Some(namespace)
            }
            Some(namespace @ Namespace::Ipc) if host_ipc => Some(namespace),
            _ => None,
        };
        if let Some(namespace) = refused {
            let namespace = namespace.host_word();
            return Err(Error::SysctlHostNamespace { at: at.clone(), name, namespace });
        }
        sysctls.insert(name, sysctl.value.clone());
    }
    Ok(Some(sysctls))
}

#[cfg(test)]
mod tests;
