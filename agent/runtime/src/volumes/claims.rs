//! K3: a pod's claim volumes (`persistentVolumeClaim`, generic `ephemeral`) on the node,
//! as kubelet's hostPath and local plugins set them up: a `hostPath` PersistentVolume is
//! its path, checked (or created) per its `type`; a `local` one is bind-mounted
//! (read-only for a read-only claim) at `<pod dir>/volumes/kubernetes.io~local-volume/<pv>`
//! and given to the pod's `fsGroup` when writable. What the claim and its volume are
//! allowed to be is `spec::claims`' decision. The local mounts go with the pod's
//! directory ([`super::cleanup`]).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use nix::mount::MsFlags;
use outpost_host::Host;

use super::{Error, Result, fs as pod_fs, host_path, mounts, ownership};
use crate::spec::Subject;
use crate::spec::claims::{self, Bound, Claimed, Node, Source};
use crate::spec::layout::is_plain_relative;
use crate::spec::projection::Resolved;

/// Sets up the pod's claim volumes (those its containers mount) from `resolved` (the claims and their volumes): the
/// host path of each, by volume name, for the containers' mounts. A claim not ready
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
    let expected = mounted_volumes(pod);
    let mut bound = Vec::new();
    let mut failed = Vec::new();
    // kubelet's volume manager skips a volume no container mounts.
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    for volume in volumes.filter(|v| expected.contains(&v.name)) {
        match claims::bind(pod, volume, resolved, node) {
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
        set_up_one(host, &at, pod_dir, pod, &name, &bound)?;
        let path = bound.path(pod_dir);
        sub_paths(&at, pod, &name, &path)?;
        claimed.insert(name, Claimed { path, read_only: bound.read_only });
    }
    Ok(claimed)
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

/// The volumes the pod's containers mount (kubelet's expected volumes), by name.
fn mounted_volumes(pod: &Pod) -> Vec<String> {
    let spec = pod.spec.iter();
    let containers =
        spec.flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
    containers.flat_map(|c| c.volume_mounts.iter().flatten()).map(|m| m.name.clone()).collect()
}
