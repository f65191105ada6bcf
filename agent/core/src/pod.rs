//! Pod identity, kubelet's config annotations, and the fingerprints the merge compares.

use std::fmt;
use std::hash::BuildHasher;
use std::io;
use std::sync::{Arc, LazyLock};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde::Serialize;

/// `kubernetes.io/config.source`: which source a pod came from (`file`, `http`, `api`).
pub const CONFIG_SOURCE: &str = "kubernetes.io/config.source";
/// `kubernetes.io/config.hash`: the static pod's content hash (its UID, S6).
pub const CONFIG_HASH: &str = "kubernetes.io/config.hash";
/// `kubernetes.io/config.seen`: when the pod was first seen by the merge (M3).
pub const CONFIG_SEEN: &str = "kubernetes.io/config.seen";
/// `kubernetes.io/config.mirror`: set on mirror pods in the API server (R1).
pub const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";

/// A configured pod source. `Url` and `Push` are both `http` to kubelet's annotation but
/// are separate sources to the merge: each delivers its own SET.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The manifest directory (or single manifest file).
    File,
    /// The manifest URL, polled.
    Url,
    /// Manifests pushed to the local API under `/manifests`.
    Push,
    /// The Kubernetes API server (pods bound to this node).
    Api,
}

impl Source {
    /// The value of `kubernetes.io/config.source` for pods of this source.
    pub fn config_source(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Url | Source::Push => "http",
            Source::Api => "api",
        }
    }

    /// Static pods are every pod not from the API server.
    pub fn is_static(self) -> bool {
        !matches!(self, Source::Api)
    }

    /// A short, stable name for logs, metrics and JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Url => "url",
            Source::Push => "push",
            Source::Api => "api",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `namespace/name`, the key kubelet uses for pod workers and name conflicts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FullName {
    pub namespace: String,
    pub name: String,
}

impl FullName {
    pub fn of(pod: &Pod) -> FullName {
        FullName {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for FullName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The pod's UID (empty when the pod has none; static pods always get one, S5).
pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// The container or init container `name` of the pod's spec.
pub fn container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers.iter().chain(spec.init_containers.iter().flatten()).find(|c| c.name == name)
}

/// An init container with `restartPolicy: Always`: a sidecar (I3).
pub fn is_sidecar(init_container: &Container) -> bool {
    init_container.restart_policy.as_deref() == Some("Always")
}

/// An annotation's value, if present.
pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Sets an annotation, creating the map if needed.
pub fn set_annotation(pod: &mut Pod, key: &str, value: impl Into<String>) {
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(key.to_owned(), value.into());
}

/// Two 128-bit digests that let the merge decide M4/M5 with two integer compares.
///
/// `semantic` covers what M4 says makes an UPDATE: spec, labels, deletionTimestamp,
/// deletionGracePeriodSeconds, and annotations except config.source/mirror/seen.
/// `status` covers the pod's status (M5, RECONCILE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    pub semantic: u128,
    pub status: u128,
}

impl Fingerprint {
    pub fn of(pod: &Pod) -> Fingerprint {
        // No annotations and only bookkeeping annotations are the same thing.
        let annotations: Vec<_> = pod
            .metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), CONFIG_SOURCE | CONFIG_MIRROR | CONFIG_SEEN))
            .collect();
        let semantic = (
            &pod.spec,
            pod.metadata.labels.as_ref().filter(|l| !l.is_empty()),
            &pod.metadata.deletion_timestamp,
            &pod.metadata.deletion_grace_period_seconds,
            annotations,
        );
        Fingerprint { semantic: digest(&semantic), status: digest(&pod.status) }
    }
}

/// XXH3-128 of the value's JSON form, streamed into the hasher (no intermediate buffer).
fn digest<T: Serialize>(value: &T) -> u128 {
    struct Sink(xxhash_rust::xxh3::Xxh3);
    impl io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut sink = Sink(xxhash_rust::xxh3::Xxh3::new());
    // Serializing k8s-openapi types into a writer that never fails cannot fail:
    // they contain only strings, numbers, maps with string keys and sequences.
    let _ = serde_json::to_writer(&mut sink, value);
    sink.0.digest128()
}

/// One hasher for every precomputed UID and name hash, seeded once per process.
static HASHER: LazyLock<foldhash::fast::RandomState> = LazyLock::new(Default::default);

/// Hash of a UID (or any other annotation value).
pub(crate) fn hash_uid(uid: &str) -> u64 {
    HASHER.hash_one(uid)
}

pub(crate) fn hash_name(name: &FullName) -> u64 {
    HASHER.hash_one(name)
}

/// A pod as a source hands it to the merge: shared, never copied again, with what the
/// merge looks at computed once by the source (off the merge's hot path): fingerprints,
/// UID and full name as shared strings, and whether the bookkeeping annotations are there.
#[derive(Debug, Clone)]
pub struct SourcePod {
    pub pod: Arc<Pod>,
    pub fingerprint: Fingerprint,
    pub uid: Arc<str>,
    pub name: Arc<FullName>,
    /// Hashes of `uid` and `name`, computed once so the merge's tables never rehash strings.
    pub(crate) uid_hash: u64,
    pub(crate) name_hash: u64,
    /// The value of `config.source`, if it is one of the known ones.
    pub(crate) stamped_source: Option<&'static str>,
    /// Hash of `config.seen`'s value, if present (compared instead of the strings).
    pub(crate) seen_hash: Option<u64>,
}

impl SourcePod {
    pub fn new(pod: impl Into<Arc<Pod>>) -> SourcePod {
        let pod = pod.into();
        let fingerprint = Fingerprint::of(&pod);
        let stamped_source = match annotation(&pod, CONFIG_SOURCE) {
            Some("file") => Some("file"),
            Some("http") => Some("http"),
            Some("api") => Some("api"),
            _ => None,
        };
        let name = FullName::of(&pod);
        SourcePod {
            fingerprint,
            uid_hash: hash_uid(uid(&pod)),
            name_hash: hash_name(&name),
            uid: uid(&pod).into(),
            name: Arc::new(name),
            stamped_source,
            seen_hash: annotation(&pod, CONFIG_SEEN).map(hash_uid),
            pod,
        }
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// Sets an annotation the fingerprints ignore (config.source, config.seen), copying
    /// the pod only if someone else holds it too.
    pub(crate) fn stamp(&mut self, key: &'static str, value: String) {
        debug_assert!(matches!(key, CONFIG_SOURCE | CONFIG_SEEN));
        match key {
            CONFIG_SOURCE => {
                self.stamped_source = ["file", "http", "api"].into_iter().find(|s| *s == value);
            }
            _ => self.seen_hash = Some(hash_uid(&value)),
        }
        set_annotation(Arc::make_mut(&mut self.pod), key, value);
    }
}

#[cfg(test)]
mod tests;
