//! Importing image tarballs into containerd, as `ctr images import` does, through the gRPC
//! API: an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/...`) or a
//! docker-archive (`docker save`: `manifest.json`, config, layer tars).
//!
//! Every blob goes into the content store (streamed from the tarball; blobs already
//! there are kept), with the GC labels that tie an index to its manifests and a manifest
//! to its config and layers; a docker-archive gets a synthesized docker v2 schema 2
//! manifest. Then the image record is created (or updated), and the layers are unpacked
//! into the overlayfs snapshotter, one committed snapshot per chain ID. All of it happens
//! inside a lease, so containerd's GC cannot collect half-imported content; the image
//! record and the labels keep everything once the lease is gone.

mod archive;
mod content;
pub mod credentials;
pub mod layout;
pub mod pull;
pub mod reference;
pub mod resolve;
mod unpack;
pub mod watch;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use containerd_client::services::v1::{CreateImageRequest, Image, UpdateImageRequest};
use containerd_client::services::v1::{CreateRequest as CreateLease, DeleteRequest as DeleteLease};
use serde::de::DeserializeOwned;

use self::archive::{Archive, Span};
use self::layout::{Config, Descriptor, DockerArchiveImage, Index, Kind, Manifest};
use self::reference::InvalidReference;
use super::containerd::{self, Containerd};

/// The snapshotter images are unpacked into.
pub const SNAPSHOTTER: &str = "overlayfs";

/// The largest JSON document (index, manifest, config) read into memory.
const MAX_DOCUMENT: u64 = 16 << 20;

/// How long an import's lease protects its content if the import dies without deleting
/// it (containerd's GC deletes expired leases).
const LEASE_EXPIRY: Duration = Duration::from_secs(3600);

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: cannot read the tarball", tarball.display())]
    Read {
        tarball: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: the tarball is {compression}-compressed; decompress it first", tarball.display())]
    Compressed { tarball: PathBuf, compression: &'static str },
    #[error(
        "{}: not an image tarball: it has neither index.json (OCI image layout) nor manifest.json (docker-archive)",
        tarball.display()
    )]
    UnknownFormat { tarball: PathBuf },
    #[error("{}: {entry} is missing from the tarball", tarball.display())]
    Missing { tarball: PathBuf, entry: String },
    #[error("{}: cannot read {entry}", tarball.display())]
    ReadEntry {
        tarball: PathBuf,
        entry: String,
        #[source]
        source: io::Error,
    },
    #[error("{}: {entry} is not a valid {document}", tarball.display())]
    Json {
        tarball: PathBuf,
        entry: String,
        document: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: {digest:?} is not a sha256:<64 hex digits> digest", tarball.display())]
    Digest { tarball: PathBuf, digest: String },
    #[error("{}: blob {digest} has media type {media_type:?}, which is neither an image index nor a manifest", tarball.display())]
    MediaType { tarball: PathBuf, digest: String, media_type: String },
    #[error("{}: index {digest} has no manifest for {platform}", tarball.display())]
    Platform { tarball: PathBuf, digest: String, platform: String },
    #[error("{}: manifest {manifest} has {layers} layers but its config lists {diff_ids} diff IDs", tarball.display())]
    DiffIds { tarball: PathBuf, manifest: String, layers: usize, diff_ids: usize },
    #[error(
        "{}: no image in the tarball has a name (index.json annotation io.containerd.image.name or a full \
         org.opencontainers.image.ref.name; RepoTags in a docker-archive's manifest.json)",
        tarball.display()
    )]
    NoName { tarball: PathBuf },
    #[error("{}: bad image name", tarball.display())]
    Reference {
        tarball: PathBuf,
        #[source]
        source: InvalidReference,
    },
    #[error("{}: {step} {object}", tarball.display())]
    Containerd {
        tarball: PathBuf,
        step: &'static str,
        object: String,
        #[source]
        source: tonic::Status,
    },
    #[error("{}: layer {layer} unpacked to {applied}, but the image config says its diff ID is {expected}", tarball.display())]
    DiffIdMismatch { tarball: PathBuf, layer: String, expected: String, applied: String },
    #[error("{}: starting the import's lease", tarball.display())]
    Lease {
        tarball: PathBuf,
        #[source]
        source: containerd::Error,
    },
    #[error("{}: a blocking read of the tarball panicked or was cancelled", tarball.display())]
    Blocking {
        tarball: PathBuf,
        #[source]
        source: tokio::task::JoinError,
    },
}

/// An image record the import created or updated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The normalized name, e.g. `docker.io/library/busybox:latest`.
    pub name: String,
    /// The digest of the image's target (its manifest, or index).
    pub digest: String,
}

/// Imports every named image of the tarball, unpacked; returns them in tarball order.
pub async fn import(containerd: &Containerd, tarball: &Path) -> Result<Vec<Imported>> {
    let archive = open(tarball).await?;
    let lease = format!("outpost-import-{}", fastrand::u64(..));
    let expires = jiff::Timestamp::now()
        + jiff::SignedDuration::try_from(LEASE_EXPIRY)
            .unwrap_or(jiff::SignedDuration::from_hours(1));
    let labels = [(
        "containerd.io/gc.expire".to_owned(),
        expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )];
    containerd
        .leases()
        .create(CreateLease { id: lease.clone(), labels: labels.into_iter().collect() })
        .await
        .map_err(|source| Error::Containerd {
            tarball: tarball.to_owned(),
            step: "creating lease",
            object: lease.clone(),
            source,
        })?;
    let leased = containerd
        .with_lease(&lease)
        .map_err(|source| Error::Lease { tarball: tarball.to_owned(), source })?;
    let mut import = Import {
        tarball: tarball.to_owned(),
        archive,
        containerd: leased,
        written: HashSet::new(),
    };
    let result = import.run().await;
    // Without the lease, what the image record and labels reference stays; the rest is
    // garbage. Failing to delete it only delays that until it expires.
    if let Err(e) = containerd.leases().delete(DeleteLease { id: lease.clone(), sync: false }).await
    {
        tracing::warn!(lease, error = %e, "cannot delete the import's lease; it expires in an hour");
    }
    result
}

async fn open(tarball: &Path) -> Result<Arc<Archive>> {
    let path = tarball.to_owned();
    let opened =
        tokio::task::spawn_blocking(move || -> io::Result<Result<Archive, &'static str>> {
            use std::io::Read;
            let mut magic = [0u8; 4];
            let n = std::fs::File::open(&path)?.read(&mut magic)?;
            let compression = match &magic[..n] {
                [0x1f, 0x8b, ..] => Some("gzip"),
                [0x28, 0xb5, 0x2f, 0xfd] => Some("zstd"),
                [b'B', b'Z', b'h', ..] => Some("bzip2"),
                [0xfd, b'7', b'z', b'X'] => Some("xz"),
                _ => None,
            };
            match compression {
                Some(compression) => Ok(Err(compression)),
                None => Archive::open(&path).map(Ok),
            }
        })
        .await
        .map_err(|source| Error::Blocking { tarball: tarball.to_owned(), source })?;
    match opened {
        Ok(Ok(archive)) => Ok(Arc::new(archive)),
        Ok(Err(compression)) => Err(Error::Compressed { tarball: tarball.to_owned(), compression }),
        Err(source) => Err(Error::Read { tarball: tarball.to_owned(), source }),
    }
}

/// One import: the tarball, the leased connection, and the blobs already stored.
struct Import {
    tarball: PathBuf,
    archive: Arc<Archive>,
    containerd: Containerd,
    written: HashSet<String>,
}

/// What an image record points at, and what to unpack for it.
struct Target {
    descriptor: Descriptor,
    manifest: Manifest,
    config: Config,
}

impl Import {
    async fn run(&mut self) -> Result<Vec<Imported>> {
        let oci = self.archive.contains("index.json")
            && (self.archive.contains("oci-layout") || !self.archive.contains("manifest.json"));
        if oci {
            self.import_oci().await
        } else if self.archive.contains("manifest.json") {
            self.import_docker().await
        } else {
            Err(Error::UnknownFormat { tarball: self.tarball.clone() })
        }
    }

    async fn import_oci(&mut self) -> Result<Vec<Imported>> {
        let index: Index = self.read_json("index.json", "OCI image index").await?;
        let mut imported = Vec::new();
        for descriptor in &index.manifests {
            let Some(name) = self.oci_name(descriptor)? else {
                tracing::warn!(
                    tarball = %self.tarball.display(),
                    digest = descriptor.digest,
                    "skipping an image of index.json that has no name"
                );
                continue;
            };
            let target = self.store_tree(descriptor).await?;
            imported.push(self.create_image(&name, &target).await?);
            self.unpack(&target).await?;
        }
        if imported.is_empty() {
            return Err(Error::NoName { tarball: self.tarball.clone() });
        }
        Ok(imported)
    }

    /// An index.json entry's image name: containerd's annotation, else the OCI ref name
    /// if it is a full reference (a bare `latest` names no image).
    fn oci_name(&self, descriptor: &Descriptor) -> Result<Option<String>> {
        let name = descriptor.annotations.get(layout::ANNOTATION_IMAGE_NAME).or_else(|| {
            descriptor
                .annotations
                .get(layout::ANNOTATION_REF_NAME)
                .filter(|name| reference::is_full_reference(name))
        });
        name.map(|name| self.normalize(name)).transpose()
    }

    fn normalize(&self, name: &str) -> Result<String> {
        reference::normalize(name)
            .map_err(|source| Error::Reference { tarball: self.tarball.clone(), source })
    }

    /// Stores an index or manifest and what it references (for an index: the manifest for
    /// this host's platform); returns what to unpack.
    async fn store_tree(&mut self, descriptor: &Descriptor) -> Result<Target> {
        self.check_digest(&descriptor.digest)?;
        let blob = layout::blob_path(&descriptor.digest);
        match layout::kind(&descriptor.media_type) {
            Kind::Index => {
                let index: Index = self.read_json(&blob, "image index").await?;
                let platform = layout::host_platform();
                let Some(chosen) = layout::select_manifest(&index, &platform) else {
                    return Err(Error::Platform {
                        tarball: self.tarball.clone(),
                        digest: descriptor.digest.clone(),
                        platform: format!("{}/{}", platform.os, platform.architecture),
                    });
                };
                let chosen = chosen.clone();
                let Target { manifest, config, .. } = Box::pin(self.store_tree(&chosen)).await?;
                let labels = layout::index_gc_labels(&index);
                self.store_blob(descriptor, &blob, labels).await?;
                Ok(Target { descriptor: descriptor.clone(), manifest, config })
            }
            Kind::Manifest => {
                let manifest: Manifest = self.read_json(&blob, "image manifest").await?;
                let config = self.store_manifest_children(&manifest).await?;
                self.store_blob(descriptor, &blob, layout::manifest_gc_labels(&manifest)).await?;
                Ok(Target { descriptor: descriptor.clone(), manifest, config })
            }
            Kind::Other => Err(Error::MediaType {
                tarball: self.tarball.clone(),
                digest: descriptor.digest.clone(),
                media_type: descriptor.media_type.clone(),
            }),
        }
    }

    /// Stores a manifest's layers and config (from `blobs/`); returns the config.
    async fn store_manifest_children(&mut self, manifest: &Manifest) -> Result<Config> {
        for layer in &manifest.layers {
            self.check_digest(&layer.digest)?;
            self.store_blob(layer, &layout::blob_path(&layer.digest), BTreeMap::new()).await?;
        }
        let config_path = layout::blob_path(&manifest.config.digest);
        self.check_digest(&manifest.config.digest)?;
        let config: Config = self.read_json(&config_path, "image config").await?;
        self.store_blob(&manifest.config, &config_path, BTreeMap::new()).await?;
        self.check_layers(manifest, &config)?;
        Ok(config)
    }

    async fn import_docker(&mut self) -> Result<Vec<Imported>> {
        let images: Vec<DockerArchiveImage> =
            self.read_json("manifest.json", "docker-archive manifest.json").await?;
        let mut imported = Vec::new();
        for image in &images {
            let names = image
                .repo_tags
                .iter()
                .flatten()
                .map(|tag| self.normalize(tag))
                .collect::<Result<Vec<_>>>()?;
            if names.is_empty() {
                tracing::warn!(tarball = %self.tarball.display(), config = image.config, "skipping an image without RepoTags");
                continue;
            }
            let target = self.store_docker_image(image).await?;
            for name in &names {
                imported.push(self.create_image(name, &target).await?);
            }
            self.unpack(&target).await?;
        }
        if imported.is_empty() {
            return Err(Error::NoName { tarball: self.tarball.clone() });
        }
        Ok(imported)
    }

    /// Stores a docker-archive image's layers and config, and a docker v2 schema 2
    /// manifest made for them.
    async fn store_docker_image(&mut self, image: &DockerArchiveImage) -> Result<Target> {
        let mut layers = Vec::with_capacity(image.layers.len());
        for path in &image.layers {
            let span = self.span(path)?;
            let archive = Arc::clone(&self.archive);
            let (magic, digest) = self
                .blocking(path, move || Ok((archive.magic(span)?, archive.sha256(span)?)))
                .await?;
            let layer = Descriptor {
                media_type: layout::docker_layer_media_type(&magic).to_owned(),
                digest,
                size: size_of(span),
                annotations: BTreeMap::new(),
                platform: None,
            };
            self.store_blob(&layer, path, BTreeMap::new()).await?;
            layers.push(layer);
        }
        let config_span = self.span(&image.config)?;
        let config_bytes = self.read_bytes(&image.config).await?;
        let config: Config = self.parse_json(&image.config, "image config", &config_bytes)?;
        let config_descriptor = Descriptor {
            media_type: layout::DOCKER_CONFIG.to_owned(),
            digest: layout::sha256_digest(&config_bytes),
            size: size_of(config_span),
            annotations: BTreeMap::new(),
            platform: None,
        };
        self.store_blob(&config_descriptor, &image.config, BTreeMap::new()).await?;
        let manifest = layout::docker_manifest(config_descriptor, layers);
        self.check_layers(&manifest, &config)?;
        // Serializing plain strings and integers cannot fail.
        let manifest_bytes = serde_json::to_vec(&manifest).unwrap_or_default();
        let descriptor = Descriptor {
            media_type: layout::DOCKER_MANIFEST.to_owned(),
            digest: layout::sha256_digest(&manifest_bytes),
            size: manifest_bytes.len() as i64,
            annotations: BTreeMap::new(),
            platform: None,
        };
        self.store_bytes(&descriptor, manifest_bytes, layout::manifest_gc_labels(&manifest))
            .await?;
        Ok(Target { descriptor, manifest, config })
    }

    fn check_layers(&self, manifest: &Manifest, config: &Config) -> Result<()> {
        if manifest.layers.len() == config.rootfs.diff_ids.len() {
            return Ok(());
        }
        Err(Error::DiffIds {
            tarball: self.tarball.clone(),
            manifest: manifest.config.digest.clone(),
            layers: manifest.layers.len(),
            diff_ids: config.rootfs.diff_ids.len(),
        })
    }

    /// Creates the image record, or updates it to this target if the name exists.
    async fn create_image(&self, name: &str, target: &Target) -> Result<Imported> {
        let image = Image {
            name: name.to_owned(),
            labels: Default::default(),
            target: Some(to_proto(&target.descriptor)),
            created_at: None,
            updated_at: None,
        };
        let mut images = self.containerd.images();
        let created = images
            .create(CreateImageRequest { image: Some(image.clone()), source_date_epoch: None })
            .await;
        match created {
            Ok(_) => {}
            Err(status) if status.code() == tonic::Code::AlreadyExists => {
                images
                    .update(UpdateImageRequest {
                        image: Some(image),
                        update_mask: None,
                        source_date_epoch: None,
                    })
                    .await
                    .map_err(|source| self.containerd_error("updating image", name, source))?;
            }
            Err(source) => return Err(self.containerd_error("creating image", name, source)),
        }
        Ok(Imported { name: name.to_owned(), digest: target.descriptor.digest.clone() })
    }

    fn check_digest(&self, digest: &str) -> Result<()> {
        if layout::is_sha256_digest(digest) {
            Ok(())
        } else {
            Err(Error::Digest { tarball: self.tarball.clone(), digest: digest.to_owned() })
        }
    }

    fn span(&self, entry: &str) -> Result<Span> {
        self.archive.span(entry).ok_or_else(|| Error::Missing {
            tarball: self.tarball.clone(),
            entry: entry.to_owned(),
        })
    }

    async fn read_bytes(&self, entry: &str) -> Result<Vec<u8>> {
        let span = self.span(entry)?;
        let archive = Arc::clone(&self.archive);
        self.blocking(entry, move || archive.read_small(span, MAX_DOCUMENT)).await
    }

    fn parse_json<T: DeserializeOwned>(
        &self,
        entry: &str,
        document: &'static str,
        bytes: &[u8],
    ) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|source| Error::Json {
            tarball: self.tarball.clone(),
            entry: entry.to_owned(),
            document,
            source,
        })
    }

    async fn read_json<T: DeserializeOwned>(
        &self,
        entry: &str,
        document: &'static str,
    ) -> Result<T> {
        let bytes = self.read_bytes(entry).await?;
        self.parse_json(entry, document, &bytes)
    }

    /// Runs a blocking read of `entry` off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        entry: &str,
        read: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> Result<T> {
        tokio::task::spawn_blocking(read)
            .await
            .map_err(|source| Error::Blocking { tarball: self.tarball.clone(), source })?
            .map_err(|source| Error::ReadEntry {
                tarball: self.tarball.clone(),
                entry: entry.to_owned(),
                source,
            })
    }

    fn containerd_error(&self, step: &'static str, object: &str, source: tonic::Status) -> Error {
        Error::Containerd { tarball: self.tarball.clone(), step, object: object.to_owned(), source }
    }
}

fn size_of(span: Span) -> i64 {
    i64::try_from(span.size).unwrap_or(i64::MAX)
}

fn to_proto(descriptor: &Descriptor) -> containerd_client::types::Descriptor {
    containerd_client::types::Descriptor {
        media_type: descriptor.media_type.clone(),
        digest: descriptor.digest.clone(),
        size: descriptor.size,
        annotations: descriptor.annotations.clone().into_iter().collect(),
    }
}
