//! A volume mount's `recursiveReadOnly`, as kubelet resolves it and containerd's CRI
//! applies it: `Disabled` (or unset) is a plain read-only bind when `readOnly`, under
//! which a mount of the host below the source stays writable; `Enabled` and, where the
//! node can, `IfPossible` add runc's `rro` option, which makes every mount under the
//! bind read-only too (`mount_setattr(2)` with `AT_RECURSIVE`, Linux 5.12 and later).
//! Both need `readOnly: true` and no mount propagation (`None` or unset); else, and for
//! `Enabled` on a node without it, the container fails with kubelet's words.

use k8s_openapi::api::core::v1::VolumeMount;

/// Why a mount's `recursiveReadOnly` cannot be had, in kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("volume {volume:?} requires ReadOnly to be set to true")]
    NotReadOnly { volume: String },
    #[error("volume {volume:?} requires MountPropagation to be set to None")]
    Propagation { volume: String },
    #[error(
        "volume {volume:?} requires recursive read-only mounts, but it is not supported by the \
         runtime (Linux 5.12 or later has them)"
    )]
    Unsupported { volume: String },
    #[error("unknown recursive read-only mode {mode:?}")]
    Mode { mode: String },
}

/// Whether a kernel of this release (`/proc/sys/kernel/osrelease`, e.g.
/// `6.1.0-18-amd64`) has `mount_setattr(2)`, which runc's `rro` needs: 5.12 and later.
pub fn kernel_supports(release: &str) -> bool {
    let mut numbers = release.trim().split(['.', '-']).map(|n| n.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (5, 12),
        _ => false,
    }
}

/// Whether `mount` is to be recursively read-only on a node that has (or has not) such
/// mounts (kubelet's `resolveRecursiveReadOnly`).
pub fn resolve(mount: &VolumeMount, supported: bool) -> Result<bool, Error> {
    let mode = mount.recursive_read_only.as_deref().filter(|m| !m.is_empty());
    let mode = match mode {
        None | Some("Disabled") => return Ok(false),
        Some(mode) => mode,
    };
    let volume = || mount.name.clone();
    if !mount.read_only.unwrap_or(false) {
        return Err(Error::NotReadOnly { volume: volume() });
    }
    if mount.mount_propagation.as_deref().is_some_and(|p| p != "None") {
        return Err(Error::Propagation { volume: volume() });
    }
    match mode {
        "IfPossible" => Ok(supported),
        "Enabled" if supported => Ok(true),
        "Enabled" => Err(Error::Unsupported { volume: volume() }),
        other => Err(Error::Mode { mode: other.to_owned() }),
    }
}

#[cfg(test)]
mod tests;
