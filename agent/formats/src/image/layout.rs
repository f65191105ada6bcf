//! The JSON documents of image tarballs (OCI index, manifest and config; docker-archive's
//! `manifest.json`), the labels containerd's garbage collector follows, and chain IDs.
//! No IO.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar";
pub const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
pub const OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";

/// containerd's annotation with the full image name (`ctr export` writes it).
pub const ANNOTATION_IMAGE_NAME: &str = "io.containerd.image.name";
/// The OCI reference annotation: a full reference, or just a tag.
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Labels containerd's garbage collector follows from a blob or snapshot to what it needs.
pub const LABEL_UNCOMPRESSED: &str = "containerd.io/uncompressed";
pub const LABEL_SNAPSHOT_REF: &str = "containerd.io/snapshot.ref";

/// The label on an image config that keeps its unpacked snapshot chain alive.
pub fn snapshot_gc_label(snapshotter: &str) -> String {
    format!("containerd.io/gc.ref.snapshot.{snapshotter}")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    pub architecture: String,
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// An OCI image index (also a docker manifest list, and `index.json` of a layout).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    pub manifests: Vec<Descriptor>,
}

/// An OCI image manifest or docker v2 schema 2 manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

/// The part of an image config that unpacking needs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Config {
    pub rootfs: RootFs,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RootFs {
    pub diff_ids: Vec<String>,
}

/// One image of a docker-archive's `manifest.json` (`docker save`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DockerArchiveImage {
    /// Path of the config in the tarball.
    pub config: String,
    /// `null` when the image was saved by ID.
    #[serde(default)]
    pub repo_tags: Option<Vec<String>>,
    /// Paths of the layer tars in the tarball, base layer first.
    pub layers: Vec<String>,
}

/// What a descriptor points at, by media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Index,
    Manifest,
    Other,
}

pub fn kind(media_type: &str) -> Kind {
    match media_type {
        OCI_INDEX | DOCKER_MANIFEST_LIST => Kind::Index,
        OCI_MANIFEST | DOCKER_MANIFEST => Kind::Manifest,
        _ => Kind::Other,
    }
}

/// Whether a `sha256:<64 hex>` digest (the only algorithm containerd's store uses here).
pub fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Where an OCI image layout keeps the blob with this digest.
pub fn blob_path(digest: &str) -> String {
    format!("blobs/{}", digest.replacen(':', "/", 1))
}

/// `sha256:<hex>` of bytes.
pub fn sha256_digest(bytes: &[u8]) -> String {
    hex_digest(Sha256::digest(bytes).as_slice())
}

pub fn hex_digest(hash: &[u8]) -> String {
    let mut out = String::with_capacity(7 + 2 * hash.len());
    out.push_str("sha256:");
    for b in hash {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The chain IDs of a layer stack (OCI image spec, "ChainID"): the first is the first
/// diff ID; each next is `sha256(previous + " " + diff ID)`. Snapshots are named by them.
pub fn chain_ids(diff_ids: &[String]) -> Vec<String> {
    let mut chain: Vec<String> = Vec::with_capacity(diff_ids.len());
    for diff_id in diff_ids {
        let next = match chain.last() {
            None => diff_id.clone(),
            Some(parent) => sha256_digest(format!("{parent} {diff_id}").as_bytes()),
        };
        chain.push(next);
    }
    chain
}

/// The labels that keep a manifest's config and layers alive while the manifest is
/// (containerd's `images.ChildGCLabels`).
pub fn manifest_gc_labels(manifest: &Manifest) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    labels.insert("containerd.io/gc.ref.content.config".to_owned(), manifest.config.digest.clone());
    for (i, layer) in manifest.layers.iter().enumerate() {
        labels.insert(format!("containerd.io/gc.ref.content.l.{i}"), layer.digest.clone());
    }
    labels
}

/// The labels that keep an index's manifests alive while the index is.
pub fn index_gc_labels(index: &Index) -> BTreeMap<String, String> {
    index
        .manifests
        .iter()
        .enumerate()
        .map(|(i, m)| (format!("containerd.io/gc.ref.content.m.{i}"), m.digest.clone()))
        .collect()
}

/// The platform this agent runs images for, in OCI terms (`linux`, `amd64`, ...).
pub fn host_platform() -> Platform {
    let architecture = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    };
    Platform {
        architecture: architecture.to_owned(),
        os: std::env::consts::OS.to_owned(),
        variant: None,
    }
}

/// The manifest of an index to run on `platform`: the first whose platform matches (a
/// manifest without a platform matches anything).
pub fn select_manifest<'a>(index: &'a Index, platform: &Platform) -> Option<&'a Descriptor> {
    let candidates = || index.manifests.iter().filter(|m| kind(&m.media_type) != Kind::Other);
    candidates()
        .find(|m| {
            m.platform.as_ref().is_some_and(|p| {
                p.os == platform.os
                    && p.architecture == platform.architecture
                    && (platform.variant.is_none() || p.variant == platform.variant)
            })
        })
        .or_else(|| candidates().find(|m| m.platform.is_none()))
}

/// The layer media type of a docker-archive layer, from its first bytes.
pub fn docker_layer_media_type(magic: &[u8]) -> &'static str {
    match magic {
        [0x1f, 0x8b, ..] => DOCKER_LAYER_GZIP,
        [0x28, 0xb5, 0x2f, 0xfd, ..] => OCI_LAYER_ZSTD,
        _ => DOCKER_LAYER,
    }
}

/// The docker v2 schema 2 manifest for a docker-archive image (what `docker push` would
/// have sent), so that containerd sees an ordinary image.
pub fn docker_manifest(config: Descriptor, layers: Vec<Descriptor>) -> Manifest {
    Manifest { schema_version: 2, media_type: Some(DOCKER_MANIFEST.to_owned()), config, layers }
}
