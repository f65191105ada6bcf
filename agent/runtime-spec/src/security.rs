//! The effective security context of a container (the container's fields over the
//! pod's), and the capability sets it gives.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, Pod};
use oci_spec::runtime::{Capabilities, Capability, LinuxCapabilities};

use super::defaults;
use super::error::{Error, Result};
use super::subject::Subject;

/// What of the pod's and container's security contexts the spec uses.
#[derive(Debug, Clone, Default)]
pub(super) struct Security {
    pub(super) privileged: bool,
    pub(super) read_only_root: bool,
    /// `allowPrivilegeEscalation: false`.
    pub(super) no_new_privileges: bool,
    pub(super) run_as_user: Option<i64>,
    pub(super) run_as_group: Option<i64>,
    pub(super) run_as_non_root: bool,
    /// The pod's `supplementalGroups`, then its `fsGroup` (kubelet adds it).
    pub(super) supplemental_groups: Vec<i64>,
    pub(super) add: Vec<String>,
    pub(super) drop: Vec<String>,
    /// `procMount`: `Default` (or unset) masks `/proc` paths as containerd does.
    pub(super) proc_mount: Option<String>,
}

impl Security {
    pub(super) fn of(pod: &Pod, container: &Container) -> Self {
        let pod_context = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
        let context = container.security_context.as_ref();
        let capabilities = context.and_then(|c| c.capabilities.as_ref());
        let mut supplemental_groups =
            pod_context.and_then(|p| p.supplemental_groups.clone()).unwrap_or_default();
        supplemental_groups.extend(pod_context.and_then(|p| p.fs_group));
        Security {
            privileged: context.and_then(|c| c.privileged).unwrap_or(false),
            read_only_root: context.and_then(|c| c.read_only_root_filesystem).unwrap_or(false),
            no_new_privileges: context.and_then(|c| c.allow_privilege_escalation) == Some(false),
            run_as_user: context
                .and_then(|c| c.run_as_user)
                .or_else(|| pod_context.and_then(|p| p.run_as_user)),
            run_as_group: context
                .and_then(|c| c.run_as_group)
                .or_else(|| pod_context.and_then(|p| p.run_as_group)),
            run_as_non_root: context
                .and_then(|c| c.run_as_non_root)
                .or_else(|| pod_context.and_then(|p| p.run_as_non_root))
                .unwrap_or(false),
            supplemental_groups,
            add: capabilities.and_then(|c| c.add.clone()).unwrap_or_default(),
            drop: capabilities.and_then(|c| c.drop.clone()).unwrap_or_default(),
            proc_mount: context.and_then(|c| c.proc_mount.clone()),
        }
    }

    /// The API's rules a static pod has not been checked against: no
    /// `allowPrivilegeEscalation: false` with `privileged` or `CAP_SYS_ADMIN`, and a
    /// `procMount` this runtime can give (`Unmasked` needs a user namespace,
    /// `hostUsers: false`, which Outpost does not make).
    pub(super) fn check(&self, at: &Subject) -> Result<()> {
        if self.no_new_privileges {
            let sys_admin = |name: &String| {
                let upper = name.to_ascii_uppercase();
                upper.strip_prefix("CAP_").unwrap_or(&upper) == "SYS_ADMIN"
            };
            let with = if self.privileged {
                Some("privileged: true")
            } else if self.add.iter().any(sys_admin) {
                Some("capabilities.add CAP_SYS_ADMIN")
            } else {
                None
            };
            if let Some(with) = with {
                return Err(Error::PrivilegeEscalation { at: at.clone(), with });
            }
        }
        match self.proc_mount.as_deref() {
            None | Some("Default") => Ok(()),
            Some("Unmasked") => Err(Error::ProcMountUnmasked { at: at.clone() }),
            Some(other) => Err(Error::ProcMount { at: at.clone(), value: other.to_owned() }),
        }
    }

    /// containerd CRI's rules: the default set, or the agent's own capabilities (`host`)
    /// when privileged; then `ALL` (the agent's own) added or dropped, then each named one
    /// added, then each dropped. The bounding, permitted and effective sets are the same;
    /// no inheritable or ambient.
    pub(super) fn capabilities(
        &self,
        host: &[Capability],
        at: &Subject,
    ) -> Result<LinuxCapabilities> {
        let mut set: HashSet<Capability> = if self.privileged {
            host.iter().copied().collect()
        } else {
            defaults::CAPABILITIES.into_iter().collect()
        };
        if !self.privileged {
            let is_all = |name: &String| name.eq_ignore_ascii_case("ALL");
            if self.add.iter().any(is_all) {
                set.extend(host);
            }
            if self.drop.iter().any(is_all) {
                set.clear();
            }
            for name in self.add.iter().filter(|n| !is_all(n)) {
                set.insert(capability(name, at)?);
            }
            for name in self.drop.iter().filter(|n| !is_all(n)) {
                set.remove(&capability(name, at)?);
            }
        }
        let set: Capabilities = set;
        let mut capabilities = LinuxCapabilities::default();
        capabilities
            .set_bounding(Some(set.clone()))
            .set_permitted(Some(set.clone()))
            .set_effective(Some(set))
            .set_inheritable(None)
            .set_ambient(None);
        Ok(capabilities)
    }
}

/// The effective capabilities in `/proc/<pid>/status` text (its `CapEff` line), as
/// containerd's `cap.Current()`; empty when there is no such line.
pub fn host_capabilities(proc_status: &str) -> Vec<Capability> {
    let mask = proc_status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    (0u32..)
        .zip(defaults::ALL_CAPABILITIES)
        .filter(|(bit, _)| mask & (1 << bit) != 0)
        .map(|(_, capability)| capability)
        .collect()
}

/// A capability by its name, with or without `CAP_`, in any case.
fn capability(name: &str, at: &Subject) -> Result<Capability> {
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
    defaults::ALL_CAPABILITIES
        .into_iter()
        .find(|c| c.to_string() == bare)
        .ok_or_else(|| Error::Capability { at: at.clone(), name: name.to_owned() })
}

#[cfg(test)]
mod tests;
