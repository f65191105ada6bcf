//! What a container's spec reads from disk besides the manifest ([`ContainerFiles`]): the
//! image's `/etc/passwd` and `/etc/group`, and the container's `Localhost` seccomp
//! profile under `--seccomp-profile-root`.
//!
//! containerd's CRI plugin mounts the container's rootfs read-only for a moment to read
//! the image's user databases. Outpost reads them from the image's unpacked layers
//! instead, which needs no mount (none to leak if the agent dies, no mount namespace to
//! care about): a view of the image's committed snapshot tells where its layers are on
//! disk (overlayfs: `lowerdir=` top first; a single layer: a bind mount), the view is
//! removed at once (the layers belong to the image's snapshots, which the image keeps),
//! and each file is looked up from the top layer down as overlayfs would ([`layers`]:
//! whiteouts hide it, an opaque directory stops the search). A symbolic link on the
//! way is not followed (it would point into the host): it is an error naming the file.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use containerd_client::services::v1::snapshots::{RemoveSnapshotRequest, ViewSnapshotRequest};
use k8s_openapi::api::core::v1::{Container, Pod};

use super::Containerd;
use super::image::SNAPSHOTTER;
use super::spec::seccomp::{self, LocalhostProfile, Profile};
use super::spec::{self, ContainerFiles, EnvFiles};

mod layers;

/// The largest file read (a user database, a seccomp profile).
const MAX_FILE: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("image snapshot {chain_id}: cannot view it to read the image's /etc/passwd")]
    View {
        chain_id: String,
        #[source]
        source: tonic::Status,
    },

    #[error("image snapshot {chain_id}: {source}")]
    MountType {
        chain_id: String,
        #[source]
        source: layers::Error,
    },

    #[error("cannot read the image's /{path}")]
    Image {
        path: &'static str,
        #[source]
        source: layers::Error,
    },

    #[error(
        "cannot read seccomp profile {}; put the profile there (the seccomp profile root is \
         --seccomp-profile-root), or change localhostProfile",
        path.display()
    )]
    SeccompProfile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// KEP-3721: an env file a `fileKeyRef` names could not be read.
    #[error("cannot read environment variable file {}", path.display())]
    EnvFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(transparent)]
    Layout(#[from] spec::layout::Error),

    #[error(transparent)]
    Spec(#[from] spec::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The files `container`'s spec needs: the image's (at the committed snapshot
/// `chain_id`) user databases, and the seccomp profile it names under `seccomp_root`.
pub async fn read(
    containerd: &Containerd,
    chain_id: &str,
    pod: &Pod,
    container: &Container,
    seccomp_root: &Path,
) -> Result<ContainerFiles> {
    let seccomp_profile = match seccomp::profile(pod, container)? {
        Profile::Localhost(name) => Some(localhost_profile(seccomp_root, &name)?),
        Profile::RuntimeDefault | Profile::Unconfined => None,
    };
    let layers = image_layers(containerd, chain_id).await?;
    let read = |path: &'static str| {
        layers::read(&layers, path, MAX_FILE).map_err(|source| Error::Image { path, source })
    };
    Ok(ContainerFiles {
        passwd: read("etc/passwd")?,
        group: read("etc/group")?,
        seccomp_profile,
        ..ContainerFiles::default()
    })
}

/// The env files `container`'s `fileKeyRef` variables name, read from the pod's volumes
/// under `pod_dir` when the container is created (its init containers have written
/// them): a missing file is `None`, which `optional` decides about.
pub fn env_files(pod_dir: &Path, pod: &Pod, container: &Container) -> Result<EnvFiles> {
    let mut files = EnvFiles::new();
    for (volume, path) in spec::file_key_refs(pod, container)? {
        let file = spec::layout::source_path(pod_dir, pod, &volume)?.join(&path);
        let text = match layers::read_limited(&file, MAX_FILE) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => return Err(Error::EnvFile { path: file, source }),
        };
        files.insert((volume, path), text);
    }
    Ok(files)
}

/// `<root>/<name>`, read.
fn localhost_profile(root: &Path, name: &Path) -> Result<LocalhostProfile> {
    let path = root.join(name);
    let json = layers::read_limited(&path, MAX_FILE)
        .map_err(|source| Error::SeccompProfile { path: path.clone(), source })?;
    Ok(LocalhostProfile { path, json })
}

/// The directories of the image's layers, top first.
async fn image_layers(containerd: &Containerd, chain_id: &str) -> Result<Vec<PathBuf>> {
    let key = format!("outpost-etc-{:016x}", fastrand::u64(..));
    let request = ViewSnapshotRequest {
        snapshotter: SNAPSHOTTER.to_owned(),
        key: key.clone(),
        parent: chain_id.to_owned(),
        labels: HashMap::new(),
    };
    let viewed = containerd.snapshots().view(request).await;
    if viewed.is_ok() {
        let request = RemoveSnapshotRequest { snapshotter: SNAPSHOTTER.to_owned(), key };
        if let Err(e) = containerd.snapshots().remove(request).await {
            // An unreferenced view is collected by containerd's GC anyway.
            tracing::debug!(chain_id, error = %e, "cannot remove the view of an image snapshot");
        }
    }
    let mounts = viewed
        .map_err(|source| Error::View { chain_id: chain_id.to_owned(), source })?
        .into_inner()
        .mounts;
    layers::dirs(&mounts)
        .map_err(|source| Error::MountType { chain_id: chain_id.to_owned(), source })
}
