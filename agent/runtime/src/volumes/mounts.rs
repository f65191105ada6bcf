//! emptyDir volumes, the tmpfs mounts of memory-backed ones and of secret and projected
//! volumes, and finding and undoing the mounts under a pod's directory.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::EmptyDirVolumeSource;
use nix::mount::{MntFlags, MsFlags};
use outpost_core::quantity::Quantity;
use outpost_host::Host;
use outpost_host::proc::MOUNTINFO;

use super::{Error, Result, fs as pod_fs};
use crate::spec::Subject;

/// An emptyDir's directory, mode 0777 as kubelet makes it; for `medium: Memory` a tmpfs
/// is mounted on it (with `size=` from `sizeLimit`) unless one already is.
pub(super) fn empty_dir(
    host: &dyn Host,
    at: &Subject,
    volume: &str,
    dir: &Path,
    source: &EmptyDirVolumeSource,
) -> Result<()> {
    let medium = source.medium.as_deref().unwrap_or_default();
    if !matches!(medium, "" | "Memory") {
        return Err(Error::Medium {
            at: at.clone(),
            volume: volume.to_owned(),
            medium: medium.to_owned(),
        });
    }
    pod_fs::make_dir(at, dir, 0o777)?;
    if medium != "Memory" || mounted(host, dir)? {
        return Ok(());
    }
    let mut options = "mode=0777".to_owned();
    if let Some(limit) = &source.size_limit {
        let bytes = Quantity::parse(&limit.0).and_then(|q| q.value()).map_err(|source| {
            Error::SizeLimit {
                at: at.clone(),
                volume: volume.to_owned(),
                value: limit.0.clone(),
                source,
            }
        })?;
        if bytes > 0 {
            options.push_str(&format!(",size={bytes}"));
        }
    }
    tmpfs(at, volume, dir, &options)
}

/// A secret's or projected volume's directory: a tmpfs (kubelet's memory-backed
/// emptyDir under them: mode 1777, as the kernel makes it), mounted unless one already
/// is.
pub(super) fn memory_volume(host: &dyn Host, at: &Subject, volume: &str, dir: &Path) -> Result<()> {
    if dir.exists() && mounted(host, dir)? {
        return Ok(());
    }
    pod_fs::make_dir(at, dir, 0o777)?;
    tmpfs(at, volume, dir, "mode=1777")
}

fn tmpfs(at: &Subject, volume: &str, dir: &Path, options: &str) -> Result<()> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    nix::mount::mount(Some("tmpfs"), dir, Some("tmpfs"), flags, Some(options)).map_err(
        |source| Error::Mount { operation: "mount a tmpfs on", path: dir.to_path_buf(), source },
    )?;
    tracing::info!(pod.namespace = at.namespace(), pod.name = at.name(), volume, path = %dir.display(), %options, "mounted volume tmpfs");
    Ok(())
}

/// containerd CRI's sandbox `/dev/shm`: a tmpfs of 64 MiB (`size=65536k`, mode 1777,
/// nosuid, nodev, noexec) on `dir` (0700), unless one already is.
pub(super) fn dev_shm(host: &dyn Host, at: &Subject, dir: &Path) -> Result<()> {
    pod_fs::make_dir(at, dir, 0o700)?;
    if mounted(host, dir)? {
        return Ok(());
    }
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    nix::mount::mount(Some("shm"), dir, Some("tmpfs"), flags, Some("mode=1777,size=65536k"))
        .map_err(|source| Error::Mount {
            operation: "mount the pod's /dev/shm tmpfs on",
            path: dir.to_path_buf(),
            source,
        })?;
    tracing::debug!(pod.namespace = at.namespace(), pod.name = at.name(), path = %dir.display(), "mounted the pod's /dev/shm");
    Ok(())
}

/// Whether something is mounted on `dir` itself.
pub(super) fn mounted(host: &dyn Host, dir: &Path) -> Result<bool> {
    let dir = dir.canonicalize().map_err(|source| Error::Cleanup {
        operation: "resolve",
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(under(host, &dir)?.contains(&dir))
}

/// The mount points at or under `dir` (a canonical path), as the kernel lists them.
pub(super) fn under(host: &dyn Host, dir: &Path) -> Result<Vec<PathBuf>> {
    let mounts = host.mountinfo().map_err(|source| Error::Cleanup {
        operation: "read",
        path: MOUNTINFO.into(),
        source,
    })?;
    let mount_points = mounts.into_iter().map(|m| m.mount_point);
    Ok(mount_points.filter(|mount_point| mount_point.starts_with(dir)).collect())
}

/// Unmounts everything at or under `dir`, deepest first.
pub(super) fn unmount_all(host: &dyn Host, dir: &Path) -> Result<()> {
    let mut mounts = under(host, dir)?;
    mounts.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    for mount in mounts {
        match nix::mount::umount2(&mount, MntFlags::MNT_DETACH) {
            // EINVAL: no longer a mount point (a stacked mount went with the one above).
            Ok(()) | Err(nix::Error::EINVAL | nix::Error::ENOENT) => {
                tracing::info!(path = %mount.display(), "unmounted");
            }
            Err(source) => {
                return Err(Error::Mount { operation: "unmount", path: mount, source });
            }
        }
    }
    Ok(())
}
