//! Image volumes (KEP-4639, SEMANTICS.md V4): an image's files mounted read-only in the
//! pod's directory, as containerd's CRI plugin mounts them for kubelet.
//!
//! The image (pulled by the caller, per the volume's `pullPolicy`) is unpacked in the
//! agent's snapshotter; a read-only view of its top snapshot (its chain ID) is made
//! under a key the pod owns ([`image_volume_key`]: its UID and the volume's name), and
//! the mounts the snapshotter gives for it are made on
//! `<pod dir>/volumes/kubernetes.io~image/<volume>` with the `mount` syscall. The
//! containers bind that directory (or a `subPath` in it) read-only. [`super::cleanup`]
//! unmounts it with the pod's other mounts, and [`remove_views`] then removes the pod's
//! views (found by their keys, so also after an agent restart).
//!
//! The view is labelled a GC root: containerd's garbage collector would otherwise
//! remove a snapshot no container nor lease refers to, under the mount.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use containerd_client::services::v1::snapshots::{
    ListSnapshotsRequest, MountsRequest, RemoveSnapshotRequest, ViewSnapshotRequest,
};
use containerd_client::types::Mount;
use k8s_openapi::api::core::v1::Pod;
use nix::mount::MsFlags;
use outpost_host::Host;

use super::{fs as pod_fs, mounts};
use crate::Containerd;
use crate::image::SNAPSHOTTER;
use crate::spec::Subject;
use crate::spec::layout::{self, image_volume_key, image_volume_key_prefix};

/// containerd's label that keeps a snapshot from its garbage collector.
const GC_ROOT: &str = "containerd.io/gc.root";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{at}: image volume {volume:?}: cannot make a read-only view of snapshot {chain_id}")]
    View {
        at: Subject,
        volume: String,
        chain_id: String,
        #[source]
        source: tonic::Status,
    },

    #[error(
        "{at}: image volume {volume:?}: the snapshotter mounts it with {kind:?}, which \
         Outpost does not mount (overlay or bind)"
    )]
    MountType { at: Subject, volume: String, kind: String },

    #[error("{at}: image volume {volume:?}: cannot mount it on {}", path.display())]
    Mount {
        at: Subject,
        volume: String,
        path: PathBuf,
        #[source]
        source: nix::Error,
    },

    /// containerd's rule: an image volume's `subPath` is a directory in the image.
    #[error(
        "image volume {volume:?}: subPath {sub_path:?} {problem}; only a directory of the \
         image can be mounted by subPath"
    )]
    SubPath { volume: String, sub_path: String, problem: &'static str },

    #[error(transparent)]
    Volumes(#[from] Box<super::Error>),

    #[error("cannot list the snapshots of the pod {uid}'s image volumes to remove them")]
    List {
        uid: String,
        #[source]
        source: tonic::Status,
    },

    #[error("cannot remove snapshot {key} of an image volume")]
    Remove {
        key: String,
        #[source]
        source: tonic::Status,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One mount the snapshotter asks for, as the `mount` syscall takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Syscall {
    pub source: String,
    pub fs_type: Option<String>,
    pub flags: MsFlags,
    pub data: Option<String>,
    /// A bind mount is made read-only by a remount after it.
    pub remount_read_only: bool,
}

/// The `mount` calls of a snapshot view's mounts, every one read-only: overlay (the
/// layers as `lowerdir`s) or a bind of a single layer's directory. The flag options
/// (`ro`, `rbind`, ...) become flags; overlay's others are its data.
pub(super) fn syscalls(mounts: &[Mount]) -> std::result::Result<Vec<Syscall>, String> {
    mounts
        .iter()
        .map(|mount| {
            let data: Vec<&str> = mount
                .options
                .iter()
                .map(String::as_str)
                .filter(|o| !matches!(*o, "ro" | "rw" | "bind" | "rbind"))
                .collect();
            match mount.r#type.as_str() {
                "bind" | "rbind" => {
                    let recursive =
                        mount.r#type == "rbind" || mount.options.iter().any(|o| o == "rbind");
                    let mut flags = MsFlags::MS_BIND;
                    flags.set(MsFlags::MS_REC, recursive);
                    Ok(Syscall {
                        source: mount.source.clone(),
                        fs_type: None,
                        flags,
                        data: None,
                        remount_read_only: true,
                    })
                }
                "overlay" => Ok(Syscall {
                    source: "overlay".to_owned(),
                    fs_type: Some("overlay".to_owned()),
                    flags: MsFlags::MS_RDONLY,
                    data: Some(data.join(",")),
                    remount_read_only: false,
                }),
                other => Err(other.to_owned()),
            }
        })
        .collect()
}

/// Mounts the pod's image volume `volume` from the image whose top snapshot is
/// `chain_id`, unless it is mounted already (another container of the pod mounts it, or
/// an earlier run of the agent did). Returns the directory.
pub async fn mount(
    containerd: &Containerd,
    host: &dyn Host,
    pod_dir: &Path,
    pod: &Pod,
    volume: &str,
    chain_id: &str,
) -> Result<PathBuf> {
    let at = Subject::pod(pod);
    let dir = pod_dir.join(layout::IMAGE).join(volume);
    // Mounted: its root is the image's, read-only (not to be made again).
    if dir.exists() && mounts::mounted(host, &dir).map_err(Box::new)? {
        return Ok(dir);
    }
    pod_fs::make_dir(&at, pod_dir, 0o750).map_err(Box::new)?;
    pod_fs::make_dir(&at, &dir, 0o755).map_err(Box::new)?;
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let key = image_volume_key(uid, volume);
    let view_error = |source| Error::View {
        at: at.clone(),
        volume: volume.to_owned(),
        chain_id: chain_id.to_owned(),
        source,
    };
    let labels = HashMap::from([(GC_ROOT.to_owned(), jiff::Timestamp::now().to_string())]);
    let request = ViewSnapshotRequest {
        snapshotter: SNAPSHOTTER.to_owned(),
        key: key.clone(),
        parent: chain_id.to_owned(),
        labels,
    };
    let viewed = match containerd.snapshots().view(request).await {
        Ok(viewed) => viewed.into_inner().mounts,
        Err(status) if status.code() == tonic::Code::AlreadyExists => {
            let request = MountsRequest { snapshotter: SNAPSHOTTER.to_owned(), key };
            containerd.snapshots().mounts(request).await.map_err(view_error)?.into_inner().mounts
        }
        Err(status) => return Err(view_error(status)),
    };
    let calls = syscalls(&viewed).map_err(|kind| Error::MountType {
        at: at.clone(),
        volume: volume.to_owned(),
        kind,
    })?;
    for call in calls {
        let failed = |source| Error::Mount {
            at: at.clone(),
            volume: volume.to_owned(),
            path: dir.clone(),
            source,
        };
        let source = Some(call.source.as_str());
        nix::mount::mount(source, &dir, call.fs_type.as_deref(), call.flags, call.data.as_deref())
            .map_err(failed)?;
        if call.remount_read_only {
            let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
            nix::mount::mount(None::<&str>, &dir, None::<&str>, flags, None::<&str>)
                .map_err(failed)?;
        }
    }
    tracing::info!(
        pod.namespace = at.namespace(),
        pod.name = at.name(),
        volume,
        chain_id,
        "image volume mounted"
    );
    Ok(dir)
}

/// Checks that `sub_path` is a directory in the mounted image volume `dir`, as
/// containerd's CRI plugin checks it (symbolic links resolved, staying in the volume).
pub fn check_sub_path(dir: &Path, volume: &str, sub_path: &str) -> Result<()> {
    let refuse = |problem| Error::SubPath {
        volume: volume.to_owned(),
        sub_path: sub_path.to_owned(),
        problem,
    };
    let root = dir.canonicalize().map_err(|_| refuse("cannot be resolved"))?;
    let path = root.join(sub_path).canonicalize().map_err(|_| refuse("is not in the image"))?;
    if !path.starts_with(&root) {
        return Err(refuse("leads out of the image"));
    }
    if !path.is_dir() {
        return Err(refuse("is not a directory"));
    }
    Ok(())
}

/// Removes the snapshot views of the pod `uid`'s image volumes, once
/// [`super::cleanup`] has unmounted them. Safe to call again.
pub async fn remove_views(containerd: &Containerd, uid: &str) -> Result<()> {
    let prefix = image_volume_key_prefix(uid);
    let request = ListSnapshotsRequest { snapshotter: SNAPSHOTTER.to_owned(), filters: Vec::new() };
    let list_error = |source| Error::List { uid: uid.to_owned(), source };
    let mut stream = containerd.snapshots().list(request).await.map_err(list_error)?.into_inner();
    let mut keys = Vec::new();
    while let Some(listed) = stream.message().await.map_err(list_error)? {
        keys.extend(listed.info.into_iter().map(|i| i.name).filter(|k| k.starts_with(&prefix)));
    }
    for key in keys {
        let request =
            RemoveSnapshotRequest { snapshotter: SNAPSHOTTER.to_owned(), key: key.clone() };
        match containerd.snapshots().remove(request).await {
            Ok(_) => tracing::info!(pod.uid = uid, key, "image volume snapshot removed"),
            Err(status) if status.code() == tonic::Code::NotFound => {}
            Err(source) => return Err(Error::Remove { key, source }),
        }
    }
    Ok(())
}
