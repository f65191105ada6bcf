//! What an API pod refers to (ConfigMaps, Secrets, its service account's tokens), and the
//! content of the volumes made from those objects and from the pod itself: `configMap`,
//! `secret`, `downwardAPI` and `projected` (SEMANTICS.md V1). Pure: the objects come
//! resolved ([`Resolved`], by `crate::objects`), the files go to the atomic writer
//! (`runtime::volumes`).
//!
//! The content follows kubelet's volume plugins: every key of the object (or the listed
//! `items`, each at its `path`) as a file with `mode`, else `defaultMode` (the API server
//! defaults it to 0644); a missing object or key fails the volume unless `optional`
//! (then an absent object gives no files); the downward API's `metadata.labels` and
//! `metadata.annotations` are `key="value"` lines, sorted, values quoted as Go's `%q`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, Volume};

/// An API object a pod refers to, in the pod's namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reference {
    ConfigMap(String),
    Secret(String),
    /// A token of the pod's service account (`spec.serviceAccountName`), bound to the pod,
    /// for `audience` (empty: the API server's own), valid `expiration_seconds`.
    ServiceAccountToken { service_account: String, audience: String, expiration_seconds: i64 },
}

/// A resolved API object.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    ConfigMap(Arc<ConfigMap>),
    Secret(Arc<Secret>),
    /// A token (a JWT).
    Token(Arc<str>),
}

/// What is known of a referenced object.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    Found(Object),
    /// The API server says it does not exist.
    Absent,
    /// Neither the API server nor the cache can tell (offline and never seen, or an
    /// error): why, for the pod's events.
    Unavailable(String),
}

/// The pod's references, resolved. A reference missing from the map is `Unavailable`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved(pub BTreeMap<Reference, Resolution>);

/// One file of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub data: Vec<u8>,
    /// Permission bits (0644, 0400, ...).
    pub mode: u32,
}

/// A volume's files, by path relative to the volume (`key`, `dir/key`).
pub type Payload = BTreeMap<String, File>;

/// The volume kinds made from API objects or the pod, as the atomic writer fills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ConfigMap,
    Secret,
    DownwardApi,
    Projected,
}

/// Why a volume or a variable cannot be made; displays as kubelet says it (the
/// runtime adds `MountVolume.SetUp failed for volume "x" : ` or the container).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `configmap "x" not found`, `secret "x" not found`.
    #[error("{kind} {name:?} not found")]
    NotFound { kind: &'static str, name: String },
    /// `configmap references non-existent config key: k`, `references non-existent secret key: k`.
    #[error("{0}")]
    MissingKey(String),
    /// The object could not be had: `couldn't get configMap default/x: <why>`.
    #[error("couldn't get {kind} {namespace}/{name}: {why}")]
    Unavailable { kind: &'static str, namespace: String, name: String, why: String },
    /// A downward API item kubelet would also refuse (bad fieldPath, resource, path).
    #[error("{0}")]
    Invalid(String),
}

/// The kind of an API-object volume, `None` for every other volume (emptyDir, hostPath).
pub fn kind(volume: &Volume) -> Option<Kind> {
    if volume.config_map.is_some() {
        Some(Kind::ConfigMap)
    } else if volume.secret.is_some() {
        Some(Kind::Secret)
    } else if volume.downward_api.is_some() {
        Some(Kind::DownwardApi)
    } else if volume.projected.is_some() {
        Some(Kind::Projected)
    } else {
        None
    }
}

/// Every object the pod's volumes refer to (not the containers' env: see
/// [`container_references`]).
pub fn volume_references(pod: &Pod) -> BTreeSet<Reference> {
    let _ = pod;
    unimplemented!("H2")
}

/// Every object the container's `env` and `envFrom` refer to.
pub fn container_references(container: &Container) -> BTreeSet<Reference> {
    let _ = container;
    unimplemented!("H2")
}

/// The secrets of `spec.imagePullSecrets`.
pub fn pull_secret_references(pod: &Pod) -> BTreeSet<Reference> {
    let _ = pod;
    unimplemented!("H2")
}

/// Every object the pod refers to: volumes, every container's env, pull secrets.
pub fn references(pod: &Pod) -> BTreeSet<Reference> {
    let spec = pod.spec.iter();
    let containers =
        spec.flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
    let mut all = volume_references(pod);
    all.extend(containers.flat_map(container_references));
    all.extend(pull_secret_references(pod));
    all
}

/// The files of the pod's `volume`, when it is one of [`Kind`] (`None` otherwise).
pub fn payload(pod: &Pod, volume: &Volume, resolved: &Resolved) -> Result<Option<Payload>, Error> {
    let _ = (pod, volume, resolved);
    unimplemented!("H2")
}
