//! emptyDir volumes, the tmpfs mounts of memory-backed ones and of secret and projected
//! volumes, finding and undoing the mounts under a pod's directory, and the state
//! directory made a shared mount (D6).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::EmptyDirVolumeSource;
use nix::mount::{MntFlags, MsFlags};
use outpost_core::quantity::Quantity;
use outpost_host::Host;
use outpost_host::proc::{MOUNTINFO, Mount};

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

/// D6: what making `dir` a shared mount takes, as kubelet's `MakeRShared` decides it from
/// the mount table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sharing {
    /// The mount `dir` is on is shared already: nothing to do.
    Shared,
    /// `dir` is a mount point of its own, not shared: make it `rshared`.
    MakeShared,
    /// `dir` is on a mount that is not shared (or on none listed): bind-mount it on
    /// itself, then make that `rshared`.
    BindAndShare,
}

/// The [`Sharing`] of `dir` (a canonical path) among `mounts`: by the mount it is on,
/// the deepest mount point at or above it (the last listed, of several there).
pub(super) fn sharing(mounts: &[Mount], dir: &Path) -> Sharing {
    let on = mounts.iter().filter(|m| dir.starts_with(&m.mount_point)).fold(
        None::<&Mount>,
        |deepest, m| match deepest {
            Some(d) if d.mount_point.components().count() > m.mount_point.components().count() => {
                Some(d)
            }
            _ => Some(m),
        },
    );
    match on {
        Some(mount) if mount.shared => Sharing::Shared,
        Some(mount) if mount.mount_point == dir => Sharing::MakeShared,
        _ => Sharing::BindAndShare,
    }
}

/// D6: makes `dir` a shared mount, as [`sharing`] says: bound on itself (recursively, so
/// the mounts already under it stay in view) unless it is a mount point, then `rshared`.
pub(super) fn make_rshared(host: &dyn Host, dir: &Path) -> Result<()> {
    let share = |operation, source| Error::Share { path: dir.to_path_buf(), operation, source };
    let mounts = host.mountinfo().map_err(|source| Error::Cleanup {
        operation: "read",
        path: MOUNTINFO.into(),
        source,
    })?;
    let sharing = sharing(&mounts, dir);
    if sharing == Sharing::Shared {
        tracing::debug!(path = %dir.display(), "the state directory is on a shared mount");
        return Ok(());
    }
    if sharing == Sharing::BindAndShare {
        let flags = MsFlags::MS_BIND | MsFlags::MS_REC;
        nix::mount::mount(Some(dir), dir, None::<&str>, flags, None::<&str>)
            .map_err(|source| share("bind-mount it on itself", source))?;
    }
    let flags = MsFlags::MS_SHARED | MsFlags::MS_REC;
    nix::mount::mount(None::<&str>, dir, None::<&str>, flags, None::<&str>)
        .map_err(|source| share("make it rshared", source))?;
    tracing::info!(path = %dir.display(), bound = sharing == Sharing::BindAndShare, "made the state directory a shared mount");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(point: &str, shared: bool) -> Mount {
        Mount { mount_point: point.into(), fstype: "ext4".into(), shared, slave: false }
    }

    /// D6: the state directory is made shared as kubelet's `MakeRShared` makes its root
    /// directory: not at all on a shared mount, by itself when it is a mount point, bound
    /// on itself first otherwise.
    #[test]
    fn d6_the_state_directory_is_shared_as_kubelet_shares_its_root() {
        let dir = Path::new("/var/lib/outpost");
        let systemd = [mount("/", true), mount("/run", true)];
        assert_eq!(sharing(&systemd, dir), Sharing::Shared, "systemd mounts / shared");
        let private = [mount("/", false), mount("/var/lib", true)];
        assert_eq!(sharing(&private, Path::new("/srv/state")), Sharing::BindAndShare);
        assert_eq!(sharing(&private, dir), Sharing::Shared, "the deepest mount above");
        let own = [mount("/", false), mount("/var/lib/outpost", false)];
        assert_eq!(sharing(&own, dir), Sharing::MakeShared, "a mount point of its own");
        let bound = [mount("/", false), mount("/var/lib/outpost", true)];
        assert_eq!(sharing(&bound, dir), Sharing::Shared, "after the first start");
        // A mount under the directory is not the one it is on.
        let under = [mount("/", false), mount("/var/lib/outpost/pods/u/volumes/v", true)];
        assert_eq!(sharing(&under, dir), Sharing::BindAndShare);
        // Of two mounts on the same point, the last listed is the one seen.
        let stacked = [
            mount("/", false),
            mount(dir.to_str().unwrap(), true),
            mount("/var/lib/outpost", false),
        ];
        assert_eq!(sharing(&stacked, dir), Sharing::MakeShared);
        assert_eq!(sharing(&[], dir), Sharing::BindAndShare, "no mount listed");
    }
}
