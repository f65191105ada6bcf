//! A pod's directory and volumes on the node, in kubelet's layout:
//!
//! ```text
//! <state>/pods/<uid>/                                   0750
//!     etc-hosts, resolv.conf                            the pod's files (spec::etc_hosts, spec::resolv_conf)
//!     volumes/kubernetes.io~empty-dir/<name>/           emptyDir, 0777 (a tmpfs for medium: Memory)
//! ```
//!
//! `hostPath` volumes are the host's paths, checked (or created) per their `type`. Other
//! volume types (configMap, secret, projected, persistentVolumeClaim, ...) need API
//! objects that static pods do not have here: they are refused, naming the volume.
//!
//! [`prepare`] is idempotent: after an agent restart it keeps the volumes' data and
//! their tmpfs mounts. [`cleanup`] unmounts whatever is mounted under the pod's directory
//! and removes it.

use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use super::spec::{self, Subject, layout};

mod atomic_writer;
mod fs;
mod host_path;
mod mounts;
mod ownership;

pub use super::spec::layout::{EMPTY_DIR, ETC_HOSTS, RESOLV_CONF, is_plain_relative, source_path};
/// The node's hosts file, the base of a `hostNetwork` pod's.
const HOST_ETC_HOSTS: &str = "/etc/hosts";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Layout(#[from] layout::Error),

    #[error(
        "{at}: volume {volume:?}: emptyDir medium {medium:?} is not supported; use \"\" (disk) \
         or \"Memory\" (tmpfs)"
    )]
    Medium { at: Subject, volume: String, medium: String },

    #[error("{at}: volume {volume:?}: emptyDir.sizeLimit {value:?} is not a valid quantity")]
    SizeLimit {
        at: Subject,
        volume: String,
        value: String,
        #[source]
        source: spec::QuantityError,
    },

    #[error(
        "{at}: volume {volume:?}: hostPath type {kind:?} is not valid; use \"\", \
         DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice or BlockDevice"
    )]
    HostPathType { at: Subject, volume: String, kind: String },

    #[error("{at}: volume {volume:?}: hostPath {} {problem}", path.display())]
    HostPath { at: Subject, volume: String, path: PathBuf, problem: String },

    #[error("{at}: cannot {operation} {}", path.display())]
    Io {
        at: Subject,
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("cannot {operation} {}", path.display())]
    Mount {
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: nix::Error,
    },

    #[error("cannot {operation} {}", path.display())]
    Cleanup {
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "cannot remove pod directory {}: {} is still mounted; unmount it by hand",
        pod_dir.display(),
        mount.display()
    )]
    StillMounted { pod_dir: PathBuf, mount: PathBuf },

    #[error("{at}: securityContext.fsGroup: {value} is not a valid group id; use 0 to 4294967294")]
    FsGroup { at: Subject, value: i64 },

    #[error("cannot write the pod's resolv.conf")]
    Dns(#[source] spec::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Makes the pod's directory (0750), writes its `etc-hosts` and `resolv.conf`
/// atomically, and sets up its volumes: emptyDir directories (0777; a tmpfs with the
/// `sizeLimit` for `medium: Memory`; given to the pod's `fsGroup`, see [`ownership`],
/// as kubelet does for writable volumes, never for hostPath), hostPath checks per `type`, and the `subPath`
/// directories the containers mount. Safe to call again: data and mounts are kept.
pub fn prepare(
    pod_dir: &Path,
    pod: &Pod,
    pod_ips: &[IpAddr],
    host_resolv_conf: &Path,
) -> Result<()> {
    let at = Subject::pod(pod);
    fs::make_dir(&at, pod_dir, 0o750)?;

    let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
    let hosts = if host_network {
        spec::host_network_etc_hosts(pod, &fs::read_or_empty(&at, Path::new(HOST_ETC_HOSTS))?)
    } else {
        spec::etc_hosts(pod, pod_ips)
    };
    fs::write_atomic(&at, &pod_dir.join(ETC_HOSTS), &hosts)?;
    let resolv =
        spec::resolv_conf(pod, &fs::read_or_empty(&at, host_resolv_conf)?).map_err(Error::Dns)?;
    fs::write_atomic(&at, &pod_dir.join(RESOLV_CONF), &resolv)?;

    let security = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let fs_group = match security.and_then(|s| s.fs_group) {
        Some(value) => Some(
            u32::try_from(value)
                .ok()
                .filter(|gid| *gid != u32::MAX)
                .ok_or(Error::FsGroup { at: at.clone(), value })?,
        ),
        None => None,
    };
    let change_policy = security.and_then(|s| s.fs_group_change_policy.as_deref());
    for volume in pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default() {
        if let Some(empty_dir) = &volume.empty_dir {
            let dir = pod_dir.join(EMPTY_DIR).join(&volume.name);
            mounts::empty_dir(&at, &volume.name, &dir, empty_dir)?;
            if let Some(fs_group) = fs_group {
                ownership::set(&at, &dir, fs_group, change_policy, ownership::Access::ReadWrite)?;
            }
        } else if let Some(host_path) = &volume.host_path {
            host_path::check(&at, &volume.name, host_path)?;
        } else {
            return Err(layout::unsupported(pod, volume).into());
        }
    }
    sub_paths(pod_dir, pod, &at)
}

/// Creates the missing `subPath` directories of the containers' volume mounts, with the
/// mode of their volume's directory, as kubelet does before starting a container. A
/// `subPath` that is not a plain relative path is left to the spec to refuse.
fn sub_paths(pod_dir: &Path, pod: &Pod, at: &Subject) -> Result<()> {
    let spec = pod.spec.iter();
    let containers =
        spec.flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
    for mount in containers.flat_map(|c| c.volume_mounts.iter().flatten()) {
        let Some(sub_path) = mount.sub_path.as_deref().filter(|p| is_plain_relative(p)) else {
            continue;
        };
        let volume = source_path(pod_dir, pod, &mount.name)?;
        let path = volume.join(sub_path);
        if !path.exists() {
            let mode = fs::mode(at, &volume)?;
            fs::make_dir(at, &path, mode)?;
        }
    }
    Ok(())
}

/// Mounts the pod's `/dev/shm` tmpfs on `dir` (in its run directory), as containerd's
/// CRI plugin does for a sandbox; the containers bind it. Safe to call again: a mounted
/// one (and its data) is kept. [`cleanup`] of the run directory unmounts it.
pub fn dev_shm(pod: &Pod, dir: &Path) -> Result<()> {
    mounts::dev_shm(&Subject::pod(pod), dir)
}

/// Unmounts everything mounted under `pod_dir` (deepest first), then removes it. Safe to
/// call again, and on a directory that does not exist.
pub fn cleanup(pod_dir: &Path) -> Result<()> {
    let pod_dir = match pod_dir.canonicalize() {
        Ok(dir) => dir,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            let path = pod_dir.to_path_buf();
            return Err(Error::Cleanup { operation: "resolve", path, source });
        }
    };
    mounts::unmount_all(&pod_dir)?;
    if let Some(mount) = mounts::under(&pod_dir)?.into_iter().next() {
        return Err(Error::StillMounted { pod_dir, mount });
    }
    std::fs::remove_dir_all(&pod_dir).or_else(|error| match error.kind() {
        io::ErrorKind::NotFound => Ok(()),
        _ => Err(Error::Cleanup { operation: "remove", path: pod_dir.clone(), source: error }),
    })
}

#[cfg(test)]
mod tests;
