//! What an API pod refers to (ConfigMaps, Secrets, its service account's tokens), and the
//! content of the volumes made from those objects and from the pod itself: `configMap`,
//! `secret`, `downwardAPI` and `projected` (SEMANTICS.md V1). Pure: the objects come
//! resolved ([`Resolved`], by the agent's `objects`), the files go to the atomic writer
//! (`outpost_runtime::volumes`).
//!
//! The content follows kubelet's volume plugins: every key of the object (or the listed
//! `items`, each at its `path`) as a file with `mode`, else `defaultMode` (the API server
//! defaults it to 0644); a missing object or key fails the volume unless `optional`
//! (then an absent object gives no files); the downward API's `metadata.labels` and
//! `metadata.annotations` are `key="value"` lines, sorted, values quoted as Go's `%q`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, KeyToPath, PersistentVolume, PersistentVolumeClaim, Pod, Secret,
    ServiceAccountTokenProjection, Volume, VolumeProjection,
};
use k8s_openapi::api::node::v1::RuntimeClass;

mod downward;
mod trust_bundle;

pub use self::trust_bundle::{TrustBundles, selects};

/// An API object a pod refers to, in the pod's namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reference {
    ConfigMap(String),
    Secret(String),
    /// A token of the pod's service account (`spec.serviceAccountName`), bound to the pod,
    /// for `audience` (empty: the API server's own), valid `expiration_seconds`.
    ServiceAccountToken {
        service_account: String,
        audience: String,
        expiration_seconds: i64,
    },
    /// K3: a PersistentVolumeClaim, in the pod's namespace (of a `persistentVolumeClaim`
    /// volume, or the `<pod>-<volume>` claim of a generic `ephemeral` one).
    PersistentVolumeClaim(String),
    /// K3: the PersistentVolume a claim is bound to (cluster-scoped): not in the pod, it
    /// is derived from the claim's `spec.volumeName` ([`crate::claims::bound_volume`]).
    PersistentVolume(String),
    /// D5: the pod's RuntimeClass (cluster-scoped, `spec.runtimeClassName`).
    RuntimeClass(String),
    /// V1: every ClusterTrustBundle (cluster-scoped), which `clusterTrustBundle` sources
    /// select from by name or by signer and labels.
    ClusterTrustBundles,
}

/// A resolved API object.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    ConfigMap(Arc<ConfigMap>),
    Secret(Arc<Secret>),
    /// A token (a JWT).
    Token(Arc<str>),
    PersistentVolumeClaim(Arc<PersistentVolumeClaim>),
    PersistentVolume(Arc<PersistentVolume>),
    /// D5.
    RuntimeClass(Arc<RuntimeClass>),
    /// V1: every ClusterTrustBundle, by name.
    ClusterTrustBundles(Arc<TrustBundles>),
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
    /// V1: a `clusterTrustBundle` source selects no bundle, or the bundles are not known
    /// yet; as kubelet's ClusterTrustBundle manager says it.
    #[error("{0}")]
    TrustAnchors(String),
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
    let mut references = BTreeSet::new();
    for volume in volumes(pod) {
        if let Some(source) = &volume.config_map {
            references.insert(Reference::ConfigMap(source.name.clone()));
        }
        if let Some(source) = &volume.secret {
            references.insert(Reference::Secret(source.secret_name.clone().unwrap_or_default()));
        }
        let sources = volume.projected.iter().flat_map(|p| p.sources.iter().flatten());
        for source in sources {
            if let Some(config_map) = &source.config_map {
                references.insert(Reference::ConfigMap(config_map.name.clone()));
            }
            if let Some(secret) = &source.secret {
                references.insert(Reference::Secret(secret.name.clone()));
            }
            if let Some(token) = &source.service_account_token {
                references.insert(token_reference(pod, token));
            }
            if source.cluster_trust_bundle.is_some() {
                references.insert(Reference::ClusterTrustBundles);
            }
        }
        if let Some(claim) = crate::claims::volume::claim(pod, volume) {
            references.insert(Reference::PersistentVolumeClaim(claim.name));
        }
    }
    references
}

/// Every object the container's `env` and `envFrom` refer to.
pub fn container_references(container: &Container) -> BTreeSet<Reference> {
    let mut references = BTreeSet::new();
    for source in container.env_from.iter().flatten() {
        if let Some(config_map) = &source.config_map_ref {
            references.insert(Reference::ConfigMap(config_map.name.clone()));
        }
        if let Some(secret) = &source.secret_ref {
            references.insert(Reference::Secret(secret.name.clone()));
        }
    }
    for source in container.env.iter().flatten().filter_map(|v| v.value_from.as_ref()) {
        if let Some(key) = &source.config_map_key_ref {
            references.insert(Reference::ConfigMap(key.name.clone()));
        }
        if let Some(key) = &source.secret_key_ref {
            references.insert(Reference::Secret(key.name.clone()));
        }
    }
    references
}

/// The secrets of `spec.imagePullSecrets` (kubelet skips an entry with no name).
pub fn pull_secret_references(pod: &Pod) -> BTreeSet<Reference> {
    let secrets = pod.spec.iter().flat_map(|s| s.image_pull_secrets.iter().flatten());
    secrets.filter(|s| !s.name.is_empty()).map(|s| Reference::Secret(s.name.clone())).collect()
}

/// The pod's RuntimeClass, if it names one (D5).
pub fn runtime_class_reference(pod: &Pod) -> Option<Reference> {
    let name = pod.spec.as_ref()?.runtime_class_name.as_deref().filter(|n| !n.is_empty())?;
    Some(Reference::RuntimeClass(name.to_owned()))
}

/// Every object the pod refers to: volumes, every container's env, pull secrets, its
/// RuntimeClass.
pub fn references(pod: &Pod) -> BTreeSet<Reference> {
    let spec = pod.spec.iter();
    let containers =
        spec.flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
    let mut all = volume_references(pod);
    all.extend(containers.flat_map(container_references));
    all.extend(pull_secret_references(pod));
    all.extend(runtime_class_reference(pod));
    all
}

/// The files of the pod's `volume`, when it is one of [`Kind`] (`None` otherwise).
pub fn payload(pod: &Pod, volume: &Volume, resolved: &Resolved) -> Result<Option<Payload>, Error> {
    let namespace = namespace(pod);
    let mut payload = Payload::new();
    if let Some(source) = &volume.config_map {
        let default_mode = mode(source.default_mode, DEFAULT_MODE)?;
        let keys = Keys { items: source.items.as_deref(), default_mode, optional: source.optional };
        config_map_files(resolved, namespace, &source.name, &keys, &mut payload)?;
    } else if let Some(source) = &volume.secret {
        let default_mode = mode(source.default_mode, DEFAULT_MODE)?;
        let keys = Keys { items: source.items.as_deref(), default_mode, optional: source.optional };
        let name = source.secret_name.as_deref().unwrap_or_default();
        secret_files(resolved, namespace, name, &keys, &mut payload)?;
    } else if let Some(source) = &volume.downward_api {
        let default_mode = mode(source.default_mode, DEFAULT_MODE)?;
        let items = source.items.as_deref().unwrap_or_default();
        downward::files(pod, &volume.name, items, default_mode, &mut payload)?;
    } else if let Some(source) = &volume.projected {
        let default_mode = mode(source.default_mode, DEFAULT_MODE)?;
        for projection in source.sources.iter().flatten() {
            project(pod, &volume.name, projection, default_mode, resolved, &mut payload)?;
        }
    } else {
        return Ok(None);
    }
    Ok(Some(payload))
}

/// One source of a projected volume, into `payload` (a later source's file replaces an
/// earlier one at the same path, as in kubelet).
fn project(
    pod: &Pod,
    volume: &str,
    projection: &VolumeProjection,
    default_mode: u32,
    resolved: &Resolved,
    payload: &mut Payload,
) -> Result<(), Error> {
    let namespace = namespace(pod);
    if let Some(source) = &projection.config_map {
        let keys = Keys { items: source.items.as_deref(), default_mode, optional: source.optional };
        config_map_files(resolved, namespace, &source.name, &keys, payload)
    } else if let Some(source) = &projection.secret {
        let keys = Keys { items: source.items.as_deref(), default_mode, optional: source.optional };
        secret_files(resolved, namespace, &source.name, &keys, payload)
    } else if let Some(source) = &projection.downward_api {
        let items = source.items.as_deref().unwrap_or_default();
        downward::files(pod, volume, items, default_mode, payload)
    } else if let Some(source) = &projection.service_account_token {
        let token = token(resolved, pod, source)?;
        let file = File { data: token.as_bytes().to_vec(), mode: owned_mode(pod, default_mode) };
        payload.insert(clean(&source.path)?, file);
        Ok(())
    } else if let Some(source) = &projection.cluster_trust_bundle {
        let data = trust_bundle::anchors(resolved, source)?;
        payload.insert(clean(&source.path)?, File { data, mode: owned_mode(pod, default_mode) });
        Ok(())
    } else {
        Ok(())
    }
}

/// The API server's `defaultMode` of configMap, secret, downwardAPI and projected
/// volumes (0644).
pub const DEFAULT_MODE: u32 = 0o644;
/// The API server's `expirationSeconds` of a projected service-account token (an hour).
pub const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;
/// The service account of a pod that names none.
const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// kubelet's limits on a file's path in a volume, and on each of its names.
const MAX_PATH_LENGTH: usize = 4096;
const MAX_NAME_LENGTH: usize = 255;

impl Resolved {
    /// The ConfigMap `name`: `Ok(None)` when the API server says it does not exist.
    pub fn config_map(&self, namespace: &str, name: &str) -> Result<Option<&ConfigMap>, Error> {
        let reference = Reference::ConfigMap(name.to_owned());
        self.object(namespace, name, "configMap", &reference, |object| match object {
            Object::ConfigMap(config_map) => Some(config_map),
            _ => None,
        })
    }

    /// The Secret `name`: `Ok(None)` when the API server says it does not exist.
    pub fn secret(&self, namespace: &str, name: &str) -> Result<Option<&Secret>, Error> {
        let reference = Reference::Secret(name.to_owned());
        self.object(namespace, name, "secret", &reference, |object| match object {
            Object::Secret(secret) => Some(secret),
            _ => None,
        })
    }

    /// The object `reference` (of `kind`, `namespace/name`) as `pick` takes it from its
    /// resolution: `Ok(None)` when absent, an error when unknown or of another kind.
    fn object<'r, T>(
        &'r self,
        namespace: &str,
        name: &str,
        kind: &'static str,
        reference: &Reference,
        pick: impl FnOnce(&'r Object) -> Option<&'r Arc<T>>,
    ) -> Result<Option<&'r T>, Error> {
        let unavailable = |why| Error::Unavailable {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            why,
        };
        match lookup(self, reference).map_err(unavailable)? {
            Some(object) => match pick(object) {
                Some(found) => Ok(Some(found)),
                None => Err(unavailable(wrong_kind(object))),
            },
            None => Ok(None),
        }
    }
}

/// The resolved object of `reference`, `None` when absent; `Err` says why it is not
/// known.
pub(crate) fn lookup<'r>(
    resolved: &'r Resolved,
    reference: &Reference,
) -> Result<Option<&'r Object>, String> {
    match resolved.0.get(reference) {
        Some(Resolution::Found(object)) => Ok(Some(object)),
        Some(Resolution::Absent) => Ok(None),
        Some(Resolution::Unavailable(why)) => Err(why.clone()),
        None => Err("not fetched yet".to_owned()),
    }
}

pub(crate) fn wrong_kind(object: &Object) -> String {
    let kind = match object {
        Object::ConfigMap(_) => "a ConfigMap",
        Object::Secret(_) => "a Secret",
        Object::Token(_) => "a token",
        Object::PersistentVolumeClaim(_) => "a PersistentVolumeClaim",
        Object::PersistentVolume(_) => "a PersistentVolume",
        Object::RuntimeClass(_) => "a RuntimeClass",
        Object::ClusterTrustBundles(_) => "the ClusterTrustBundles",
    };
    format!("resolved to {kind}")
}

/// The token of the pod's service account for `source`.
fn token<'r>(
    resolved: &'r Resolved,
    pod: &Pod,
    source: &ServiceAccountTokenProjection,
) -> Result<&'r str, Error> {
    let service_account = service_account(pod);
    let unavailable = |why| Error::Unavailable {
        kind: "token of serviceaccount",
        namespace: namespace(pod).to_owned(),
        name: service_account.to_owned(),
        why,
    };
    match lookup(resolved, &token_reference(pod, source)).map_err(unavailable)? {
        Some(Object::Token(token)) => Ok(token),
        Some(other) => Err(unavailable(wrong_kind(other))),
        None => Err(Error::NotFound { kind: "serviceaccount", name: service_account.to_owned() }),
    }
}

fn token_reference(pod: &Pod, source: &ServiceAccountTokenProjection) -> Reference {
    Reference::ServiceAccountToken {
        service_account: service_account(pod).to_owned(),
        audience: source.audience.clone().unwrap_or_default(),
        expiration_seconds: source.expiration_seconds.unwrap_or(DEFAULT_TOKEN_EXPIRATION_SECONDS),
    }
}

/// `spec.serviceAccountName`, defaulted as the API server does.
fn service_account(pod: &Pod) -> &str {
    let name = pod.spec.as_ref().and_then(|s| s.service_account_name.as_deref());
    name.filter(|n| !n.is_empty()).unwrap_or(DEFAULT_SERVICE_ACCOUNT)
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// The mode kubelet gives a token's or a trust bundle's file: 0600 when the pod has an
/// `fsGroup` (the group then reads it through the volume's ownership, the world does
/// not), else the volume's `defaultMode`.
fn owned_mode(pod: &Pod, default_mode: u32) -> u32 {
    if fs_group(pod).is_some() { 0o600 } else { default_mode }
}

fn fs_group(pod: &Pod) -> Option<i64> {
    pod.spec.as_ref()?.security_context.as_ref()?.fs_group
}

fn volumes(pod: &Pod) -> impl Iterator<Item = &Volume> {
    pod.spec.iter().flat_map(|s| s.volumes.iter().flatten())
}

/// How an object's keys become files: the listed `items`, else every key.
struct Keys<'s> {
    items: Option<&'s [KeyToPath]>,
    default_mode: u32,
    optional: Option<bool>,
}

fn config_map_files(
    resolved: &Resolved,
    namespace: &str,
    name: &str,
    keys: &Keys<'_>,
    payload: &mut Payload,
) -> Result<(), Error> {
    let data = match resolved.config_map(namespace, name)? {
        Some(config_map) => {
            let text = config_map.data.iter().flatten().map(|(k, v)| (k.as_str(), v.as_bytes()));
            let binary = config_map.binary_data.iter().flatten();
            text.chain(binary.map(|(k, v)| (k.as_str(), v.0.as_slice()))).collect()
        }
        None if keys.optional == Some(true) => BTreeMap::new(),
        None => return Err(Error::NotFound { kind: "configmap", name: name.to_owned() }),
    };
    project_keys(&data, keys, "configmap references non-existent config key", payload)
}

fn secret_files(
    resolved: &Resolved,
    namespace: &str,
    name: &str,
    keys: &Keys<'_>,
    payload: &mut Payload,
) -> Result<(), Error> {
    let data = match resolved.secret(namespace, name)? {
        Some(secret) => {
            let data = secret.data.iter().flatten();
            data.map(|(k, v)| (k.as_str(), v.0.as_slice())).collect()
        }
        None if keys.optional == Some(true) => BTreeMap::new(),
        None => return Err(Error::NotFound { kind: "secret", name: name.to_owned() }),
    };
    project_keys(&data, keys, "references non-existent secret key", payload)
}

/// kubelet's `MakePayload` of the configMap and secret plugins.
fn project_keys(
    data: &BTreeMap<&str, &[u8]>,
    keys: &Keys<'_>,
    missing: &str,
    payload: &mut Payload,
) -> Result<(), Error> {
    let Some(items) = keys.items.filter(|items| !items.is_empty()) else {
        for (key, value) in data {
            let file = File { data: value.to_vec(), mode: keys.default_mode };
            payload.insert(clean(key)?, file);
        }
        return Ok(());
    };
    for item in items {
        let Some(value) = data.get(item.key.as_str()) else {
            if keys.optional == Some(true) {
                continue;
            }
            return Err(Error::MissingKey(format!("{missing}: {}", item.key)));
        };
        let file = File { data: value.to_vec(), mode: mode(item.mode, keys.default_mode)? };
        payload.insert(clean(&item.path)?, file);
    }
    Ok(())
}

/// A file's mode: `mode` if set, else `default`.
fn mode(mode: Option<i32>, default: u32) -> Result<u32, Error> {
    match mode {
        None => Ok(default),
        Some(mode) => u32::try_from(mode).ok().filter(|m| *m <= 0o777).ok_or_else(|| {
            Error::Invalid(format!("mode {mode} is not valid: it must be between 0 and 0777"))
        }),
    }
}

/// A file's path in a volume, checked and cleaned as kubelet's atomic writer does: not
/// empty, relative, no `..` name, no first name that starts with `..` (the writer's
/// own), names of at most 255 bytes, 4096 in all; `.` names and doubled slashes go.
fn clean(path: &str) -> Result<String, Error> {
    let invalid = |why: String| Err(Error::Invalid(format!("invalid path {path:?}: {why}")));
    if path.is_empty() {
        return invalid("must not be empty".to_owned());
    }
    if path.starts_with('/') {
        return invalid("must be a relative path".to_owned());
    }
    if path.len() > MAX_PATH_LENGTH {
        return invalid(format!("must be at most {MAX_PATH_LENGTH} characters"));
    }
    let names: Vec<&str> = path.split('/').filter(|n| !n.is_empty() && *n != ".").collect();
    if names.contains(&"..") {
        return invalid("must not contain '..'".to_owned());
    }
    if names.iter().any(|n| n.len() > MAX_NAME_LENGTH) {
        return invalid(format!("file names must be at most {MAX_NAME_LENGTH} characters"));
    }
    match names.first() {
        None => invalid("must name a file".to_owned()),
        Some(first) if first.starts_with("..") => invalid("must not start with '..'".to_owned()),
        Some(_) => Ok(names.join("/")),
    }
}

#[cfg(test)]
mod tests;
