//! A pod's directory and volumes on the node, in kubelet's layout:
//!
//! ```text
//! <state>/pods/<uid>/                                   0750
//!     etc-hosts, resolv.conf                            the pod's files (spec::etc_hosts, spec::resolv_conf)
//!     volumes/kubernetes.io~empty-dir/<name>/           emptyDir, 0777 (a tmpfs for medium: Memory)
//!     volumes/kubernetes.io~configmap/<name>/           configMap, 0777
//!     volumes/kubernetes.io~downward-api/<name>/        downwardAPI, 0777
//!     volumes/kubernetes.io~secret/<name>/              secret, a tmpfs (1777)
//!     volumes/kubernetes.io~projected/<name>/           projected, a tmpfs (1777)
//!     volumes/kubernetes.io~image/<name>/               image, a read-only snapshot view (V4)
//! ```
//!
//! `hostPath` volumes are the host's paths, checked (or created) per their `type`. The
//! content of configMap, secret, downwardAPI and projected volumes
//! (`spec::projection`) is written by kubelet's atomic writer ([`atomic_writer`]), and
//! rewritten in place by [`refresh`] when the objects change (SEMANTICS.md V1). Other
//! volume types (nfs, ...) are refused, naming the volume. Claim volumes
//! (`persistentVolumeClaim`, `ephemeral`) are [`set_up_claims`]' (K3):
//!
//! ```text
//!     volumes/kubernetes.io~local-volume/<pv name>/     a local PersistentVolume, bind-mounted
//!     volumeDevices/kubernetes.io~local-volume/<pv name> a link to a local Block volume's device
//! ```
//!
//! [`prepare`] is idempotent: after an agent restart it keeps the volumes' data and
//! their tmpfs mounts (after a reboot it mounts and writes them again). [`cleanup`]
//! unmounts whatever is mounted under the pod's directory (what a container mounted in
//! a `Bidirectional` volume too) and removes it. [`make_rshared`] makes the state
//! directory a shared mount at start (D6).

use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Pod, Volume};
use outpost_host::Host;

use super::spec::projection::{self, Kind, Resolved};
use super::spec::{self, Subject, layout};

mod atomic_writer;
mod claims;
mod fs;
mod host_path;
pub mod image;
mod mounts;
mod ownership;

pub use self::claims::set_up as set_up_claims;
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

    /// D6: the state directory could not be made a shared mount.
    #[error(
        "cannot make the state directory {} a shared mount ({operation}), which a \
         Bidirectional mount of a pod's own volume needs; run the agent as root, or make it \
         one before: mount --bind {} {} && mount --make-rshared {}",
        path.display(), path.display(), path.display(), path.display()
    )]
    Share {
        path: PathBuf,
        operation: &'static str,
        #[source]
        source: nix::Error,
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

    /// kubelet's `FailedMount` message.
    #[error("MountVolume.SetUp failed for volume {volume:?} : {source}")]
    SetUp {
        at: Subject,
        volume: String,
        #[source]
        source: Box<projection::Error>,
    },

    /// K3: kubelet's `FailedMount` for claims not ready (missing, unbound, ...).
    #[error("{message}")]
    Claims { at: Subject, message: String },

    /// K3: a claim's volume refused (node affinity, its type), as kubelet says it.
    #[error("{message}")]
    Claim { at: Subject, volume: String, message: String },

    #[error("MountVolume.SetUp failed for volume {volume:?} : {source}")]
    Write {
        at: Subject,
        volume: String,
        #[source]
        source: atomic_writer::Error,
    },
}

impl Error {
    /// The volume the error is about, when it is one volume's set-up.
    pub fn volume(&self) -> Option<&str> {
        match self {
            Error::SetUp { volume, .. } | Error::Write { volume, .. } => Some(volume),
            Error::Claim { volume, .. } => Some(volume),
            Error::Medium { volume, .. }
            | Error::SizeLimit { volume, .. }
            | Error::HostPathType { volume, .. }
            | Error::HostPath { volume, .. } => Some(volume),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Makes the pod's directory (0750), writes its `etc-hosts` and `resolv.conf` (K2: from
/// the node's DNS settings and its resolv.conf, a missing one read as empty) atomically,
/// and sets up its volumes: emptyDir directories (0777; a tmpfs with the
/// `sizeLimit` for `medium: Memory`; given to the pod's `fsGroup`, see [`ownership`],
/// as kubelet does for writable volumes, never for hostPath), hostPath checks per `type`,
/// configMap, secret, downwardAPI and projected volumes from `resolved` (secret and
/// projected ones on a tmpfs; given to the `fsGroup` read-only), and the `subPath`
/// directories the containers mount. Safe to call again: data and mounts are kept.
/// Returns the Warning Events forming the resolv.conf gave (kubelet's `MissingClusterDNS`
/// and `DNSConfigForming`), for the caller to record. `host` shows the mounts and gives
/// files to the `fsGroup`.
pub fn prepare(
    host: &dyn Host,
    pod_dir: &Path,
    pod: &Pod,
    pod_ips: &[IpAddr],
    dns: &spec::NodeDns,
    resolved: &Resolved,
) -> Result<Vec<spec::DnsEvent>> {
    let at = Subject::pod(pod);
    fs::make_dir(&at, pod_dir, 0o750)?;

    let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
    let hosts = if host_network {
        spec::host_network_etc_hosts(pod, &fs::read_or_empty(&at, Path::new(HOST_ETC_HOSTS))?)
    } else {
        spec::etc_hosts(pod, pod_ips, &dns.cluster_domain)
    };
    fs::write_atomic(&at, &pod_dir.join(ETC_HOSTS), &hosts)?;
    let node_resolv_conf = match &dns.resolv_conf {
        Some(path) => Some(fs::read_or_empty(&at, path)?),
        None => None,
    };
    let formed = spec::resolv_conf(pod, dns, node_resolv_conf.as_deref()).map_err(Error::Dns)?;
    fs::write_atomic(&at, &pod_dir.join(RESOLV_CONF), &formed.resolv_conf)?;

    let fs_group = fs_group(&at, pod)?;
    let security = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let change_policy = security.and_then(|s| s.fs_group_change_policy.as_deref());
    for volume in volumes(pod) {
        if let Some(empty_dir) = &volume.empty_dir {
            let dir = pod_dir.join(EMPTY_DIR).join(&volume.name);
            mounts::empty_dir(host, &at, &volume.name, &dir, empty_dir)?;
            if let Some(fs_group) = fs_group {
                let access = ownership::Access::ReadWrite;
                ownership::set(host, &at, &dir, fs_group, change_policy, access)?;
            }
        } else if let Some(host_path) = &volume.host_path {
            host_path::check(&at, &volume.name, host_path)?;
        } else if layout::is_claim(pod, &volume.name) {
            // Set up by `set_up_claims` (K3).
        } else if volume.image.is_some() {
            // Mounted by `image::mount` once its image is pulled, before a container
            // mounting it is created (V4).
        } else if let Some(kind) = projection::kind(volume) {
            let dir = source_path(pod_dir, pod, &volume.name)?;
            if in_memory(kind) {
                mounts::memory_volume(host, &at, &volume.name, &dir)?;
            } else {
                fs::make_dir(&at, &dir, 0o777)?;
            }
            write_volume(host, &at, pod, volume, &dir, resolved, fs_group)?;
        } else {
            return Err(layout::unsupported(pod, volume).into());
        }
    }
    sub_paths(pod_dir, pod, &at)?;
    Ok(formed.events)
}

/// Writes again the configMap, secret, downwardAPI and projected volumes of a pod that
/// is set up, from `resolved` (SEMANTICS.md V1): what changed is swapped in atomically,
/// an optional object now absent empties its volume, and a volume whose objects cannot
/// be had (a required one absent, or unavailable) keeps its content, as kubelet keeps
/// it, and is reported. Nothing is done for a pod whose directory does not exist, nor
/// for a volume not set up yet (a secret or projected volume with no tmpfs after a
/// reboot is left to [`prepare`]: its content must not reach the disk).
pub fn refresh(
    host: &dyn Host,
    pod_dir: &Path,
    pod: &Pod,
    resolved: &Resolved,
) -> Result<(), Vec<Error>> {
    if !pod_dir.is_dir() {
        return Ok(());
    }
    let at = Subject::pod(pod);
    let fs_group = fs_group(&at, pod).map_err(|error| vec![error])?;
    let mut errors = Vec::new();
    for volume in volumes(pod) {
        let Some(kind) = projection::kind(volume) else { continue };
        let refreshed =
            source_path(pod_dir, pod, &volume.name).map_err(Error::from).and_then(|dir| {
                let set_up = dir.is_dir() && (!in_memory(kind) || mounts::mounted(host, &dir)?);
                if set_up {
                    write_volume(host, &at, pod, volume, &dir, resolved, fs_group)?;
                }
                Ok(())
            });
        if let Err(error) = refreshed {
            errors.push(error);
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// Whether volumes of `kind` live on a tmpfs (kubelet's secret and projected volumes).
fn in_memory(kind: Kind) -> bool {
    matches!(kind, Kind::Secret | Kind::Projected)
}

/// Writes `volume`'s payload into `dir` with the atomic writer, and gives it to the
/// pod's `fsGroup` as kubelet gives a read-only volume.
fn write_volume(
    host: &dyn Host,
    at: &Subject,
    pod: &Pod,
    volume: &Volume,
    dir: &Path,
    resolved: &Resolved,
    fs_group: Option<u32>,
) -> Result<()> {
    let name = || volume.name.clone();
    let payload = projection::payload(pod, volume, resolved)
        .map_err(|source| Error::SetUp {
            at: at.clone(),
            volume: name(),
            source: Box::new(source),
        })?
        .unwrap_or_default();
    let written = atomic_writer::write(host, dir, &payload, fs_group)
        .map_err(|source| Error::Write { at: at.clone(), volume: name(), source })?;
    if written {
        tracing::info!(pod.namespace = at.namespace(), pod.name = at.name(), volume = %volume.name, files = payload.len(), "volume written");
    }
    if let Some(fs_group) = fs_group {
        ownership::set(host, at, dir, fs_group, None, ownership::Access::ReadOnly)?;
    }
    Ok(())
}

/// The pod's `securityContext.fsGroup`, checked.
fn fs_group(at: &Subject, pod: &Pod) -> Result<Option<u32>> {
    let security = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    match security.and_then(|s| s.fs_group) {
        Some(value) => u32::try_from(value)
            .ok()
            .filter(|gid| *gid != u32::MAX)
            .map(Some)
            .ok_or(Error::FsGroup { at: at.clone(), value }),
        None => Ok(None),
    }
}

fn volumes(pod: &Pod) -> impl Iterator<Item = &Volume> {
    pod.spec.iter().flat_map(|s| s.volumes.iter().flatten())
}

/// Creates the missing `subPath` directories of the containers' volume mounts, with the
/// mode of their volume's directory, as kubelet does before starting a container (not in
/// configMap, secret, downwardAPI and projected volumes: only their writer writes
/// there). A `subPath` that is not a plain relative path is left to the spec to refuse.
fn sub_paths(pod_dir: &Path, pod: &Pod, at: &Subject) -> Result<()> {
    let spec = pod.spec.iter();
    let containers =
        spec.flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
    for mount in containers.flat_map(|c| c.volume_mounts.iter().flatten()) {
        let Some(sub_path) = mount.sub_path.as_deref().filter(|p| is_plain_relative(p)) else {
            continue;
        };
        if layout::is_projection(pod, &mount.name)
            || layout::is_claim(pod, &mount.name)
            || layout::is_image(pod, &mount.name)
        {
            continue;
        }
        let volume = source_path(pod_dir, pod, &mount.name)?;
        let path = volume.join(sub_path);
        if !path.exists() {
            let mode = fs::mode(at, &volume)?;
            fs::make_dir(at, &path, mode)?;
        }
    }
    Ok(())
}

/// Makes the missing directories a container's `subPathExpr` mounts bind
/// ([`spec::sub_path_dirs`]), with the mode of their volume's directory, as kubelet makes
/// them before it creates the container.
pub fn make_sub_path_dirs(pod: &Pod, dirs: &[spec::SubPathDir]) -> Result<()> {
    let at = Subject::pod(pod);
    for dir in dirs.iter().filter(|d| !d.path.exists()) {
        let mode = fs::mode(&at, &dir.volume)?;
        fs::make_dir(&at, &dir.path, mode)?;
    }
    Ok(())
}

/// Mounts the pod's `/dev/shm` tmpfs on `dir` (in its run directory), as containerd's
/// CRI plugin does for a sandbox; the containers bind it. Safe to call again: a mounted
/// one (and its data) is kept. [`cleanup`] of the run directory unmounts it.
pub fn dev_shm(host: &dyn Host, pod: &Pod, dir: &Path) -> Result<()> {
    mounts::dev_shm(host, &Subject::pod(pod), dir)
}

/// D6: makes `state_dir` (the pods' directories are under it) a shared mount at start,
/// as kubelet makes its root directory (`MakeRShared`), so that a `Bidirectional` mount
/// of a pod's own volume (an emptyDir, as CSI node plugins use) propagates: nothing if the
/// mount it is on is shared already; else it is bind-mounted on itself (unless it is a
/// mount point already) and made `rshared`. The bind is recursive (kubelet's is not), so
/// the volume mounts already under it, of pods running from before, stay in view. Safe
/// to call again (then nothing changes); nothing undoes it at exit, as with kubelet.
pub fn make_rshared(host: &dyn Host, state_dir: &Path) -> Result<()> {
    let dir = state_dir.canonicalize().map_err(|source| Error::Cleanup {
        operation: "resolve",
        path: state_dir.to_path_buf(),
        source,
    })?;
    mounts::make_rshared(host, &dir)
}

/// Unmounts everything mounted under `pod_dir` (deepest first, as `host`'s mount table
/// lists them), then removes it. Safe to call again, and on a directory that does not
/// exist.
pub fn cleanup(host: &dyn Host, pod_dir: &Path) -> Result<()> {
    let pod_dir = match pod_dir.canonicalize() {
        Ok(dir) => dir,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            let path = pod_dir.to_path_buf();
            return Err(Error::Cleanup { operation: "resolve", path, source });
        }
    };
    mounts::unmount_all(host, &pod_dir)?;
    if let Some(mount) = mounts::under(host, &pod_dir)?.into_iter().next() {
        return Err(Error::StillMounted { pod_dir, mount });
    }
    std::fs::remove_dir_all(&pod_dir).or_else(|error| match error.kind() {
        io::ErrorKind::NotFound => Ok(()),
        _ => Err(Error::Cleanup { operation: "remove", path: pod_dir.clone(), source: error }),
    })
}

#[cfg(test)]
mod tests;
