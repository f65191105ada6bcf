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
pub mod metrics;
pub mod pull;
pub mod resolve;
pub mod store;
mod tree;
mod unpack;
pub mod watch;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;

use self::archive::{Archive, Span};
use self::content::Chunks;
use self::layout::{Config, Descriptor, DockerArchiveImage, Index};
use self::reference::InvalidReference;
use self::store::Store;
use self::tree::{Blobs, Target};
use super::containerd::Containerd;

pub use super::containerd::SNAPSHOTTER;
/// The images' documents and references, parsed without IO (the crate `outpost-formats`).
pub use outpost_formats::image::{layout, reference};

/// The largest JSON document (index, manifest, config) read into memory.
const MAX_DOCUMENT: u64 = 16 << 20;

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
    #[error("{}: bad image content", tarball.display())]
    Content {
        tarball: PathBuf,
        #[source]
        source: tree::Error,
    },
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
    #[error("{}: storing the image in containerd", tarball.display())]
    Store {
        tarball: PathBuf,
        #[source]
        source: store::Error,
    },
    #[error("{}: a blocking read of the tarball panicked or was cancelled", tarball.display())]
    Blocking {
        tarball: PathBuf,
        #[source]
        source: tokio::task::JoinError,
    },
}

impl Error {
    /// containerd did not answer (rather than the tarball being bad): worth retrying.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Store { source: store::Error::Containerd { source, .. }, .. }
            if source.code() == tonic::Code::DeadlineExceeded
                || super::containerd::unreachable(source))
    }
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
    let tarball = Tarball { path: tarball.to_owned(), archive: open(tarball).await? };
    let mut store = Store::begin(containerd, "import").await.map_err(|e| tarball.store_error(e))?;
    let result = tarball.import(&mut store).await;
    store.end().await;
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

/// The tarball being imported.
struct Tarball {
    path: PathBuf,
    archive: Arc<Archive>,
}

/// An OCI image layout's blobs are its `blobs/sha256/<hex>` files.
impl Blobs for Tarball {
    type Error = Error;

    async fn document(&self, descriptor: &Descriptor) -> Result<Vec<u8>> {
        self.read_bytes(&layout::blob_path(&descriptor.digest)).await
    }

    async fn chunks(&self, descriptor: &Descriptor) -> Result<Chunks> {
        let span = self.span(&layout::blob_path(&descriptor.digest))?;
        Ok(archive::chunks(Arc::clone(&self.archive), span))
    }

    fn error(&self, error: tree::Error) -> Error {
        match error {
            tree::Error::Store(source) => self.store_error(source),
            source => Error::Content { tarball: self.path.clone(), source },
        }
    }
}

impl Tarball {
    async fn import(&self, store: &mut Store) -> Result<Vec<Imported>> {
        let oci = self.archive.contains("index.json")
            && (self.archive.contains("oci-layout") || !self.archive.contains("manifest.json"));
        let imported = if oci {
            self.import_oci(store).await?
        } else if self.archive.contains("manifest.json") {
            self.import_docker(store).await?
        } else {
            return Err(Error::UnknownFormat { tarball: self.path.clone() });
        };
        if imported.is_empty() {
            return Err(Error::NoName { tarball: self.path.clone() });
        }
        Ok(imported)
    }

    async fn import_oci(&self, store: &mut Store) -> Result<Vec<Imported>> {
        let index: Index = self.read_json("index.json", "OCI image index").await?;
        let mut imported = Vec::new();
        for descriptor in &index.manifests {
            let Some(name) = self.oci_name(descriptor)? else {
                tracing::warn!(
                    tarball = %self.path.display(),
                    digest = descriptor.digest,
                    "skipping an image of index.json that has no name"
                );
                continue;
            };
            let target = tree::store_tree(store, self, descriptor).await?;
            imported.push(self.finish(store, &name, &target).await?);
        }
        Ok(imported)
    }

    /// Creates the image record `name` for a stored target and unpacks it.
    async fn finish(&self, store: &Store, name: &str, target: &Target) -> Result<Imported> {
        let imported =
            store.create_image(name, &target.descriptor).await.map_err(|e| self.store_error(e))?;
        store.unpack(&target.manifest, &target.config).await.map_err(|e| self.store_error(e))?;
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
            .map_err(|source| Error::Reference { tarball: self.path.clone(), source })
    }

    async fn import_docker(&self, store: &mut Store) -> Result<Vec<Imported>> {
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
                tracing::warn!(tarball = %self.path.display(), config = image.config, "skipping an image without RepoTags");
                continue;
            }
            let target = self.store_docker_image(store, image).await?;
            for name in &names {
                imported.push(self.finish(store, name, &target).await?);
            }
        }
        Ok(imported)
    }

    /// Stores a docker-archive image's layers and config, and a docker v2 schema 2
    /// manifest made for them.
    async fn store_docker_image(
        &self,
        store: &mut Store,
        image: &DockerArchiveImage,
    ) -> Result<Target> {
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
            if !store.has_blob(&layer.digest).await.map_err(|e| self.store_error(e))? {
                let chunks = archive::chunks(Arc::clone(&self.archive), span);
                store
                    .write_blob(&layer, chunks, &BTreeMap::new())
                    .await
                    .map_err(|e| self.store_error(e))?;
            }
            layers.push(layer);
        }
        let config_bytes = self.read_bytes(&image.config).await?;
        let config: Config = self.parse_json(&image.config, "image config", &config_bytes)?;
        let config_descriptor = document_descriptor(layout::DOCKER_CONFIG, &config_bytes);
        tree::store_document(store, &config_descriptor, config_bytes, BTreeMap::new())
            .await
            .map_err(|e| self.store_error(e))?;
        let manifest = layout::docker_manifest(config_descriptor, layers);
        tree::check_layers(&manifest, &config).map_err(|e| self.error(e))?;
        // Serializing plain strings and integers cannot fail.
        let manifest_bytes = serde_json::to_vec(&manifest).unwrap_or_default();
        let descriptor = document_descriptor(layout::DOCKER_MANIFEST, &manifest_bytes);
        let labels = layout::manifest_gc_labels(&manifest);
        tree::store_document(store, &descriptor, manifest_bytes, labels)
            .await
            .map_err(|e| self.store_error(e))?;
        Ok(Target { descriptor, manifest, config })
    }

    fn store_error(&self, source: store::Error) -> Error {
        Error::Store { tarball: self.path.clone(), source }
    }

    fn span(&self, entry: &str) -> Result<Span> {
        self.archive
            .span(entry)
            .ok_or_else(|| Error::Missing { tarball: self.path.clone(), entry: entry.to_owned() })
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
            tarball: self.path.clone(),
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
            .map_err(|source| Error::Blocking { tarball: self.path.clone(), source })?
            .map_err(|source| Error::ReadEntry {
                tarball: self.path.clone(),
                entry: entry.to_owned(),
                source,
            })
    }
}

/// The descriptor of a document held in memory.
fn document_descriptor(media_type: &str, bytes: &[u8]) -> Descriptor {
    Descriptor {
        media_type: media_type.to_owned(),
        digest: layout::sha256_digest(bytes),
        size: bytes.len() as i64,
        annotations: BTreeMap::new(),
        platform: None,
    }
}

fn size_of(span: Span) -> i64 {
    i64::try_from(span.size).unwrap_or(i64::MAX)
}
