//! K3: a pod's claim volumes (`persistentVolumeClaim`, generic `ephemeral`) on the node,
//! as kubelet's hostPath and local plugins set them up: a `hostPath` PersistentVolume is
//! its path, checked (or created) per its `type`; a `local` one is bind-mounted
//! (read-only for a read-only claim) at `<pod dir>/volumes/kubernetes.io~local-volume/<pv>`
//! and given to the pod's `fsGroup` when writable. What the claim and its volume are
//! allowed to be is `spec::claims`' decision. The local mounts go with the pod's
//! directory ([`super::cleanup`]).
//!
//! A `local` volume in `Block` mode (a container's `volumeDevices`) is its `local.path`,
//! which must be a block device: kubelet's per-pod link
//! `<pod dir>/volumeDevices/kubernetes.io~local-volume/<pv>` is made to it (and goes with
//! the pod's directory), and its node (type, numbers, mode, owner) is read for the
//! containers' specs. Not done, unlike kubelet: the bind mount of the device on its
//! global map path (`plugins/kubernetes.io~local-volume/volumeDevices/<pv>/<pod uid>`)
//! and the loop device kubelet opens on it to keep it from being detached while in use;
//! the per-pod link is all the containers need, and nothing else here would detach it.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use nix::mount::MsFlags;
use oci_spec::runtime::LinuxDevice;
use outpost_host::Host;

use super::{Error, Result, fs as pod_fs, host_path, mounts, ownership};
use crate::device_node;
use crate::spec::Subject;
use crate::spec::claims::{self, Bound, Claimed, Node, Source, Usage};
use crate::spec::layout::is_plain_relative;
use crate::spec::projection::Resolved;

/// Sets up the pod's claim volumes (those its containers mount or take as devices) from
/// `resolved` (the claims and their volumes): the host path of each, by volume name, for
/// the containers' mounts, and a block volume's device node. A claim not ready
/// (missing, unbound, its volume missing) fails with kubelet's FailedMount text; the pod
/// waits, and is set up again when the claim changes. Safe to call again. `host` shows
/// the mounts and gives a writable volume to the `fsGroup`.
pub fn set_up(
    host: &dyn Host,
    pod_dir: &Path,
    pod: &Pod,
    resolved: &Resolved,
    node: Node<'_>,
) -> Result<BTreeMap<String, Claimed>> {
    let at = Subject::pod(pod);
    let usage = Usage::of(pod);
    let expected = usage.expected();
    let mut bound = Vec::new();
    let mut failed = Vec::new();
    // kubelet's volume manager skips a volume no container uses.
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    for volume in volumes.filter(|v| usage.uses(&v.name)) {
        match claims::bind(pod, volume, &usage, resolved, node) {
            Ok(Some(b)) => bound.push((volume.name.clone(), b)),
            Ok(None) => {}
            Err(claims::Error::Processing(why)) => failed.push((volume.name.clone(), why)),
            Err(other) => {
                let (volume, message) = (volume.name.clone(), other.to_string());
                return Err(Error::Claim { at, volume, message });
            }
        }
    }
    if !failed.is_empty() {
        let message = claims::failed_mount(&expected, &failed);
        return Err(Error::Claims { at, message });
    }
    let mut claimed = BTreeMap::new();
    for (name, bound) in bound {
        let path = bound.path(pod_dir);
        let device = match &bound.source {
            Source::Local { path: device } if bound.block => {
                Some(map_device(&at, &path, &name, &bound, Path::new(device))?)
            }
            _ => {
                set_up_one(host, &at, pod_dir, pod, &name, &bound)?;
                sub_paths(&at, pod, &name, &path)?;
                None
            }
        };
        claimed.insert(name, Claimed { path, read_only: bound.read_only, device });
    }
    Ok(claimed)
}

/// A `local` block volume: its `device` must be a block device; `link` (the pod's device
/// map path) is made to point at it. The device's node, as the host has it.
fn map_device(
    at: &Subject,
    link: &Path,
    volume: &str,
    bound: &Bound,
    device: &Path,
) -> Result<LinuxDevice> {
    let failed = |problem: String| Error::Claim {
        at: at.clone(),
        volume: volume.to_owned(),
        message: format!(
            "MapVolume.MapBlockVolume failed for volume {:?} : {problem}",
            bound.volume
        ),
    };
    let metadata = std::fs::metadata(device)
        .map_err(|e| failed(format!("cannot stat local volume path {}: {e}", device.display())))?;
    let node = device_node::from_metadata(&metadata, device)
        .filter(|_| metadata.file_type().is_block_device());
    let Some(node) = node else {
        return Err(failed(format!(
            "local volume path {} is not a block device; a PersistentVolume in volumeMode \
             Block must name one (e.g. /dev/sdb, a loop device)",
            device.display()
        )));
    };
    if let Some(dir) = link.parent() {
        pod_fs::make_dir(at, dir, 0o750)?;
    }
    let io_error = |operation, source| Error::Io {
        at: at.clone(),
        operation,
        path: link.to_path_buf(),
        source,
    };
    match std::fs::read_link(link) {
        Ok(target) if target == device => return Ok(node),
        Ok(_) => std::fs::remove_file(link).map_err(|e| io_error("remove the stale link", e))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error("read the link", e)),
    }
    std::os::unix::fs::symlink(device, link).map_err(|e| io_error("make the device link", e))?;
    tracing::info!(pod.namespace = at.namespace(), pod.name = at.name(), volume, persistent_volume = %bound.volume, device = %device.display(), "mapped local block volume");
    Ok(node)
}

fn set_up_one(
    host: &dyn Host,
    at: &Subject,
    pod_dir: &Path,
    pod: &Pod,
    volume: &str,
    bound: &Bound,
) -> Result<()> {
    match &bound.source {
        Source::HostPath(source) => host_path::check(at, volume, source),
        Source::Local { path } => {
            let dir = bound.path(pod_dir);
            pod_fs::make_dir(at, &dir, 0o750)?;
            if !mounts::mounted(host, &dir)? {
                bind(Path::new(path), &dir, bound.read_only)?;
                tracing::info!(pod.namespace = at.namespace(), pod.name = at.name(), volume, persistent_volume = %bound.volume, source = %path, "mounted local volume");
            }
            let security = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
            let fs_group = super::fs_group(at, pod)?;
            if let Some(fs_group) = fs_group.filter(|_| bound.takes_fs_group()) {
                let policy = security.and_then(|s| s.fs_group_change_policy.as_deref());
                ownership::set(host, at, &dir, fs_group, policy, ownership::Access::ReadWrite)?;
            }
            Ok(())
        }
    }
}

/// kubelet's local volume mount: `mount -o bind[,ro] <path> <dir>` (a read-only bind
/// is a bind, then its remount read-only).
fn bind(source: &Path, dir: &Path, read_only: bool) -> Result<()> {
    let failed = |operation, source| Error::Mount { operation, path: dir.to_path_buf(), source };
    nix::mount::mount(Some(source), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|e| failed("bind-mount the local volume on", e))?;
    if read_only {
        let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        nix::mount::mount(None::<&str>, dir, None::<&str>, flags, None::<&str>)
            .map_err(|e| failed("remount read-only", e))?;
    }
    Ok(())
}

/// The `subPath` directories the containers mount in the claim's volume at `path`.
fn sub_paths(at: &Subject, pod: &Pod, volume: &str, path: &Path) -> Result<()> {
    let spec = pod.spec.iter();
    let containers =
        spec.flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
    let mounts = containers.flat_map(|c| c.volume_mounts.iter().flatten());
    for mount in mounts.filter(|m| m.name == volume) {
        let Some(sub_path) = mount.sub_path.as_deref().filter(|p| is_plain_relative(p)) else {
            continue;
        };
        let dir = path.join(sub_path);
        if !dir.exists() {
            let mode = pod_fs::mode(at, path)?;
            pod_fs::make_dir(at, &dir, mode)?;
        }
    }
    Ok(())
}
