//! Storing an image's tree of blobs, wherever its bytes come from (a tarball, a
//! registry): an index (only its manifest for this host's platform is followed), a
//! manifest, its config and layers, each with the GC labels that tie it to its children.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use super::content::{Chunks, in_memory};
use super::layout::{self, Config, Descriptor, Index, Kind, Manifest};
use super::store::{self, Store};

/// Where the blobs come from. Errors are the source's own; [`Blobs::error`] puts one of
/// this module's into them (with the source's context: tarball, image, registry).
pub(super) trait Blobs {
    type Error;
    /// The whole blob (an index, manifest or config: small), as the descriptor says it is.
    async fn document(&self, descriptor: &Descriptor) -> Result<Vec<u8>, Self::Error>;
    /// The blob's bytes, streamed (a layer).
    async fn chunks(&self, descriptor: &Descriptor) -> Result<Chunks, Self::Error>;
    fn error(&self, error: Error) -> Self::Error;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("{digest:?} is not a sha256:<64 hex digits> digest")]
    Digest { digest: String },
    #[error(
        "blob {digest} has media type {media_type:?}, which is neither an image index nor a manifest"
    )]
    MediaType { digest: String, media_type: String },
    #[error("index {digest} has no manifest for {platform}")]
    Platform { digest: String, platform: String },
    #[error("manifest {manifest} has {layers} layers but its config lists {diff_ids} diff IDs")]
    DiffIds { manifest: String, layers: usize, diff_ids: usize },
    #[error("blob {digest} is not a valid {document}")]
    Json {
        digest: String,
        document: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    /// Whether the content itself is wrong (rather than containerd failing).
    pub fn is_bad_content(&self) -> bool {
        match self {
            Error::Store(error) => error.is_bad_content(),
            _ => true,
        }
    }
}

/// What an image record points at, and what to unpack for it.
#[derive(Debug)]
pub(super) struct Target {
    pub descriptor: Descriptor,
    pub manifest: Manifest,
    pub config: Config,
}

/// Stores an index or manifest and what it references; returns what to unpack.
pub(super) async fn store_tree<B: Blobs>(
    store: &mut Store,
    blobs: &B,
    descriptor: &Descriptor,
) -> Result<Target, B::Error> {
    check_digest(&descriptor.digest).map_err(|e| blobs.error(e))?;
    match layout::kind(&descriptor.media_type) {
        Kind::Index => {
            let bytes = document(store, blobs, descriptor).await?;
            let index: Index =
                parse(descriptor, "image index", &bytes).map_err(|e| blobs.error(e))?;
            let platform = layout::host_platform();
            let Some(chosen) = layout::select_manifest(&index, &platform) else {
                return Err(blobs.error(Error::Platform {
                    digest: descriptor.digest.clone(),
                    platform: format!("{}/{}", platform.os, platform.architecture),
                }));
            };
            let chosen = chosen.clone();
            let Target { manifest, config, .. } =
                Box::pin(store_tree(store, blobs, &chosen)).await?;
            store_document(store, descriptor, bytes, layout::index_gc_labels(&index))
                .await
                .map_err(|e| blobs.error(e.into()))?;
            Ok(Target { descriptor: descriptor.clone(), manifest, config })
        }
        Kind::Manifest => {
            let bytes = document(store, blobs, descriptor).await?;
            let manifest: Manifest =
                parse(descriptor, "image manifest", &bytes).map_err(|e| blobs.error(e))?;
            let config = store_manifest_children(store, blobs, &manifest).await?;
            store_document(store, descriptor, bytes, layout::manifest_gc_labels(&manifest))
                .await
                .map_err(|e| blobs.error(e.into()))?;
            Ok(Target { descriptor: descriptor.clone(), manifest, config })
        }
        Kind::Other => Err(blobs.error(Error::MediaType {
            digest: descriptor.digest.clone(),
            media_type: descriptor.media_type.clone(),
        })),
    }
}

/// Stores a manifest's layers and config; returns the config.
async fn store_manifest_children<B: Blobs>(
    store: &mut Store,
    blobs: &B,
    manifest: &Manifest,
) -> Result<Config, B::Error> {
    for layer in &manifest.layers {
        check_digest(&layer.digest).map_err(|e| blobs.error(e))?;
        let present = store.has_blob(&layer.digest).await.map_err(|e| blobs.error(e.into()))?;
        if !present {
            let chunks = blobs.chunks(layer).await?;
            store
                .write_blob(layer, chunks, &BTreeMap::new())
                .await
                .map_err(|e| blobs.error(e.into()))?;
        }
    }
    check_digest(&manifest.config.digest).map_err(|e| blobs.error(e))?;
    let bytes = document(store, blobs, &manifest.config).await?;
    let config: Config =
        parse(&manifest.config, "image config", &bytes).map_err(|e| blobs.error(e))?;
    store_document(store, &manifest.config, bytes, BTreeMap::new())
        .await
        .map_err(|e| blobs.error(e.into()))?;
    check_layers(manifest, &config).map_err(|e| blobs.error(e))?;
    Ok(config)
}

/// A document's bytes: from the store if it has them (a pull need not fetch them
/// again), else from the source.
async fn document<B: Blobs>(
    store: &mut Store,
    blobs: &B,
    descriptor: &Descriptor,
) -> Result<Vec<u8>, B::Error> {
    let stored = async {
        match store.has_blob(&descriptor.digest).await? {
            true => store.read_blob(&descriptor.digest).await.map(Some),
            false => Ok(None),
        }
    };
    match stored.await.map_err(|e| blobs.error(e.into()))? {
        Some(bytes) => Ok(bytes),
        None => blobs.document(descriptor).await,
    }
}

/// Stores a document held in memory (unless the store has it), then sets `labels` on it.
pub(super) async fn store_document(
    store: &mut Store,
    descriptor: &Descriptor,
    bytes: Vec<u8>,
    labels: BTreeMap<String, String>,
) -> Result<(), store::Error> {
    if !store.has_blob(&descriptor.digest).await? {
        store.write_blob(descriptor, in_memory(bytes), &labels).await?;
    }
    store.label_blob(&descriptor.digest, labels).await
}

/// A manifest must have as many layers as its config has diff IDs.
pub(super) fn check_layers(manifest: &Manifest, config: &Config) -> Result<(), Error> {
    if manifest.layers.len() == config.rootfs.diff_ids.len() {
        return Ok(());
    }
    Err(Error::DiffIds {
        manifest: manifest.config.digest.clone(),
        layers: manifest.layers.len(),
        diff_ids: config.rootfs.diff_ids.len(),
    })
}

pub(super) fn check_digest(digest: &str) -> Result<(), Error> {
    if layout::is_sha256_digest(digest) {
        Ok(())
    } else {
        Err(Error::Digest { digest: digest.to_owned() })
    }
}

fn parse<T: DeserializeOwned>(
    descriptor: &Descriptor,
    document: &'static str,
    bytes: &[u8],
) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|source| Error::Json {
        digest: descriptor.digest.clone(),
        document,
        source,
    })
}
