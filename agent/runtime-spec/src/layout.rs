//! Where a pod's files and volumes are, in kubelet's layout under the pod's directory
//! (`<state-dir>/pods/<uid>`). Pure: the OCI spec mounts these paths, `outpost_runtime::volumes`
//! makes them.

use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use super::projection::{self, Kind};
use super::subject::Subject;

/// The pod's hosts file, in its directory.
pub const ETC_HOSTS: &str = "etc-hosts";
/// The pod's resolv.conf, in its directory.
pub const RESOLV_CONF: &str = "resolv.conf";
/// Where each container instance's termination-message file lives, under the pod's
/// directory: `containers/<container name>/<container id>` (kubelet's layout, with the
/// container's ID for kubelet's random one).
pub const CONTAINERS: &str = "containers";
/// `terminationMessagePath`'s default (the API server's).
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// Where emptyDir volumes live, under the pod's directory.
pub const EMPTY_DIR: &str = "volumes/kubernetes.io~empty-dir";
/// Where configMap, secret, downwardAPI and projected volumes live, under the pod's
/// directory (kubelet's plugin names).
pub const CONFIG_MAP: &str = "volumes/kubernetes.io~configmap";
pub const SECRET: &str = "volumes/kubernetes.io~secret";
pub const DOWNWARD_API: &str = "volumes/kubernetes.io~downward-api";
pub const PROJECTED: &str = "volumes/kubernetes.io~projected";
/// Where image volumes (KEP-4639) are mounted, under the pod's directory: a read-only
/// view of the image's snapshot each (V4).
pub const IMAGE: &str = "volumes/kubernetes.io~image";
/// The prefix of the snapshot keys of a pod's image volumes ([`image_volume_key`]).
pub const IMAGE_VOLUME_KEY_PREFIX: &str = "outpost-image-volume";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{at}: volume {volume:?} is not declared in spec.volumes; add it or fix the name")]
    NotDeclared { at: Subject, volume: String },

    #[error(
        "{at}: volume {volume:?} is of type {kind}, which Outpost does not support; use \
         emptyDir, hostPath, configMap, secret, downwardAPI, projected, image, or a \
         persistentVolumeClaim of a hostPath or local PersistentVolume"
    )]
    Unsupported { at: Subject, volume: String, kind: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The host path of the pod's volume `volume_name`: an emptyDir's, configMap's,
/// secret's, downwardAPI's or projected volume's directory under `pod_dir`, or a
/// hostPath's path. Pure: nothing is checked on disk.
pub fn source_path(pod_dir: &Path, pod: &Pod, volume_name: &str) -> Result<PathBuf> {
    let volume = find(pod, volume_name)?;
    if volume.empty_dir.is_some() {
        Ok(pod_dir.join(EMPTY_DIR).join(&volume.name))
    } else if let Some(host_path) = &volume.host_path {
        Ok(PathBuf::from(&host_path.path))
    } else if let Some(kind) = projection::kind(volume) {
        Ok(pod_dir.join(kind_dir(kind)).join(&volume.name))
    } else if volume.image.is_some() {
        Ok(pod_dir.join(IMAGE).join(&volume.name))
    } else {
        Err(unsupported(pod, volume))
    }
}

/// Whether the pod's volume `volume_name` is an image volume (V4): kubelet mounts it
/// read-only whatever `readOnly` says, and makes no `subPath` directory in it.
pub fn is_image(pod: &Pod, volume_name: &str) -> bool {
    find(pod, volume_name).is_ok_and(|v| v.image.is_some())
}

/// The key of the read-only snapshot view the pod `uid`'s image volume `volume` is
/// mounted from (V4): owned by the pod (its UID), so the pod's teardown finds and
/// removes it, also after an agent restart ([`image_volume_key_prefix`]).
pub fn image_volume_key(uid: &str, volume: &str) -> String {
    format!("{}{volume}", image_volume_key_prefix(uid))
}

/// The prefix every snapshot key of the pod `uid`'s image volumes starts with.
pub fn image_volume_key_prefix(uid: &str) -> String {
    format!("{IMAGE_VOLUME_KEY_PREFIX}/{uid}/")
}

/// Where the volumes of `kind` live, under the pod's directory.
pub fn kind_dir(kind: Kind) -> &'static str {
    match kind {
        Kind::ConfigMap => CONFIG_MAP,
        Kind::Secret => SECRET,
        Kind::DownwardApi => DOWNWARD_API,
        Kind::Projected => PROJECTED,
    }
}

/// Whether the pod's volume `volume_name` is made from API objects or the pod
/// (configMap, secret, downwardAPI, projected): kubelet mounts those read-only and
/// makes no `subPath` directory in them.
pub fn is_projection(pod: &Pod, volume_name: &str) -> bool {
    find(pod, volume_name).ok().and_then(projection::kind).is_some()
}

/// Whether the pod's volume `volume_name` is a claim's (`persistentVolumeClaim`,
/// `ephemeral`): its host path is known once the claim is (K3, `claims`).
pub fn is_claim(pod: &Pod, volume_name: &str) -> bool {
    find(pod, volume_name).ok().and_then(|v| crate::claims::claim(pod, v)).is_some()
}

fn find<'p>(pod: &'p Pod, name: &str) -> Result<&'p Volume> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    volumes
        .iter()
        .find(|v| v.name == name)
        .ok_or_else(|| Error::NotDeclared { at: Subject::pod(pod), volume: name.to_owned() })
}

/// The error for a volume of a type Outpost does not support, naming its type as the
/// manifest does (`persistentVolumeClaim`, `nfs`, ...).
pub fn unsupported(pod: &Pod, volume: &Volume) -> Error {
    let kind = serde_json::to_value(volume)
        .ok()
        .and_then(|value| value.as_object()?.keys().find(|k| *k != "name").cloned())
        .unwrap_or_else(|| "(none)".to_owned());
    Error::Unsupported { at: Subject::pod(pod), volume: volume.name.clone(), kind }
}

/// The host file bound at the container's `terminationMessagePath`, for the container
/// instance `container_id`.
pub fn termination_message_file(pod_dir: &Path, container: &str, container_id: &str) -> PathBuf {
    pod_dir.join(CONTAINERS).join(container).join(container_id)
}

/// The container's `terminationMessagePath`, defaulted as the API server does.
pub fn termination_message_path(container: &Container) -> &str {
    container
        .termination_message_path
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or(DEFAULT_TERMINATION_MESSAGE_PATH)
}

/// Whether a `subPath` is a relative path made only of names (no `..`, no root).
pub fn is_plain_relative(path: &str) -> bool {
    let path = Path::new(path);
    !path.as_os_str().is_empty()
        && path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}
