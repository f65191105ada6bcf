//! What a container needs from an image already in containerd: its runtime config
//! (entrypoint, cmd, env, user, working dir) and the snapshot its rootfs is prepared on
//! (the top chain ID of its layers, committed by the unpack).

use containerd_client::services::v1::snapshots::StatSnapshotRequest;
use containerd_client::services::v1::{GetImageRequest, ReadContentRequest};
use futures::StreamExt as _;
use oci_spec::image::ImageConfiguration;
use serde::de::DeserializeOwned;

use super::layout::{self, Config, Descriptor, Index, Kind, Manifest};
use super::{SNAPSHOTTER, reference};
use crate::Containerd;

/// The largest JSON document (index, manifest, config) read into memory.
const MAX_DOCUMENT: usize = 16 << 20;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("image {image}: bad image name")]
    Reference {
        image: String,
        #[source]
        source: reference::InvalidReference,
    },
    #[error("image {image}: {step} {object} in containerd")]
    Containerd {
        image: String,
        step: &'static str,
        object: String,
        #[source]
        source: tonic::Status,
    },
    #[error("image {image}: blob {digest} is larger than {MAX_DOCUMENT} bytes")]
    TooLarge { image: String, digest: String },
    #[error("image {image}: blob {digest} is not a valid {document}")]
    Json {
        image: String,
        digest: String,
        document: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "image {image}: {digest} has media type {media_type:?}, not an image index or manifest"
    )]
    MediaType { image: String, digest: String, media_type: String },
    #[error("image {image}: index {digest} has no manifest for {platform}")]
    Platform { image: String, digest: String, platform: String },
    #[error("image {image}: its config lists no layers")]
    NoLayers { image: String },
    #[error(
        "image {image}: layer snapshot {chain_id} is not unpacked; import or pull the image again"
    )]
    NotUnpacked { image: String, chain_id: String },
}

/// An image ready to run.
#[derive(Debug, Clone)]
pub struct Image {
    /// The normalized name, e.g. `docker.io/library/busybox:latest`.
    pub name: String,
    /// The digest of the image record's target (what `imageID` reports).
    pub digest: String,
    pub config: ImageConfiguration,
    /// The committed snapshot (in [`super::SNAPSHOTTER`]) a rootfs is prepared on.
    pub chain_id: String,
}

/// The image `name` (normalized as `docker.io/library/…` references are), or `None` when
/// containerd has no image record of that name.
pub async fn resolve(containerd: &Containerd, name: &str) -> Result<Option<Image>> {
    let normalized = reference::normalize(name)
        .map_err(|source| Error::Reference { image: name.to_owned(), source })?;
    let resolver = Resolver { containerd, image: &normalized };
    let request = GetImageRequest { name: normalized.clone() };
    let record = match containerd.images().get(request).await {
        Ok(response) => response.into_inner().image,
        Err(status) if status.code() == tonic::Code::NotFound => return Ok(None),
        Err(source) => return Err(resolver.containerd("looking up image", &normalized, source)),
    };
    let Some(target) = record.and_then(|image| image.target) else {
        return Ok(None);
    };
    let descriptor = Descriptor {
        media_type: target.media_type,
        digest: target.digest,
        size: target.size,
        annotations: Default::default(),
        platform: None,
    };
    let manifest = resolver.manifest(&descriptor).await?;
    let config_bytes = resolver.read(&manifest.config.digest).await?;
    let layers: Config = resolver.parse(&manifest.config.digest, "image config", &config_bytes)?;
    let config: ImageConfiguration =
        resolver.parse(&manifest.config.digest, "image config", &config_bytes)?;
    let chain_id = layout::chain_ids(&layers.rootfs.diff_ids)
        .pop()
        .ok_or_else(|| Error::NoLayers { image: normalized.clone() })?;
    if !snapshot_committed(containerd, &chain_id)
        .await
        .map_err(|source| resolver.containerd("looking up snapshot", &chain_id, source))?
    {
        return Err(Error::NotUnpacked { image: normalized, chain_id });
    }
    Ok(Some(Image { name: normalized, digest: descriptor.digest, config, chain_id }))
}

/// The bytes of content the image record `name` holds for this host: its target (the
/// manifest, or the index), the config and the layers (what removing it frees in the
/// content store, when no other image shares them).
pub async fn content_size(containerd: &Containerd, name: &str, target: &Descriptor) -> Result<u64> {
    let resolver = Resolver { containerd, image: name };
    let manifest = resolver.manifest(target).await?;
    let size = |d: &Descriptor| u64::try_from(d.size).unwrap_or(0);
    let layers: u64 = manifest.layers.iter().map(size).sum();
    Ok(size(target).saturating_add(size(&manifest.config)).saturating_add(layers))
}

struct Resolver<'a> {
    containerd: &'a Containerd,
    image: &'a str,
}

impl Resolver<'_> {
    /// The manifest for this host behind `descriptor` (itself, or chosen from an index).
    async fn manifest(&self, descriptor: &Descriptor) -> Result<Manifest> {
        let bytes = self.read(&descriptor.digest).await?;
        match layout::kind(&descriptor.media_type) {
            Kind::Manifest => self.parse(&descriptor.digest, "image manifest", &bytes),
            Kind::Index => {
                let index: Index = self.parse(&descriptor.digest, "image index", &bytes)?;
                let platform = layout::host_platform();
                let chosen =
                    layout::select_manifest(&index, &platform).ok_or_else(|| Error::Platform {
                        image: self.image.to_owned(),
                        digest: descriptor.digest.clone(),
                        platform: format!("{}/{}", platform.os, platform.architecture),
                    })?;
                let bytes = self.read(&chosen.digest).await?;
                self.parse(&chosen.digest, "image manifest", &bytes)
            }
            Kind::Other => Err(Error::MediaType {
                image: self.image.to_owned(),
                digest: descriptor.digest.clone(),
                media_type: descriptor.media_type.clone(),
            }),
        }
    }

    async fn read(&self, digest: &str) -> Result<Vec<u8>> {
        let request = ReadContentRequest { digest: digest.to_owned(), offset: 0, size: 0 };
        let mut stream = self
            .containerd
            .content()
            .read(request)
            .await
            .map_err(|source| self.containerd("reading blob", digest, source))?
            .into_inner();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|source| self.containerd("reading blob", digest, source))?;
            bytes.extend_from_slice(&chunk.data);
            if bytes.len() > MAX_DOCUMENT {
                return Err(Error::TooLarge {
                    image: self.image.to_owned(),
                    digest: digest.to_owned(),
                });
            }
        }
        Ok(bytes)
    }

    fn parse<T: DeserializeOwned>(
        &self,
        digest: &str,
        document: &'static str,
        bytes: &[u8],
    ) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|source| Error::Json {
            image: self.image.to_owned(),
            digest: digest.to_owned(),
            document,
            source,
        })
    }

    fn containerd(&self, step: &'static str, object: &str, source: tonic::Status) -> Error {
        Error::Containerd { image: self.image.to_owned(), step, object: object.to_owned(), source }
    }
}

/// Whether the snapshot `key` exists in [`SNAPSHOTTER`].
pub async fn snapshot_committed(containerd: &Containerd, key: &str) -> Result<bool, tonic::Status> {
    let request = StatSnapshotRequest { snapshotter: SNAPSHOTTER.to_owned(), key: key.to_owned() };
    match containerd.snapshots().stat(request).await {
        Ok(_) => Ok(true),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(false),
        Err(status) => Err(status),
    }
}
