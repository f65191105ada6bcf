//! The push source's state with no IO (manifests PUT to the local API under
//! `/manifests/{key}`): the pushed manifests by key, and the transitions a PUT or DELETE
//! makes. Each transition returns a new [`Manifests`] (copy on write, the manifests
//! themselves are shared), so the caller can persist it before publishing it. The
//! agent's executor (`outpost::source::push`) checkpoints, publishes and sends.
//! [`Problems`]: the keys whose last push was rejected or is stored with warnings.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::problems::{self, ManifestProblem};
use crate::manifest::{self, Origin};
use crate::merge::{Op, SourceUpdate};
use crate::pod::{FullName, Source, SourcePod};

/// Why a push or a delete is refused: the key, the body, or what the other keys hold.
/// Nothing changes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "push key {key:?} {reason}; a key is 1 to 253 letters, digits, '.', '_' or '-', and not \".\", \"..\" or \"audit\""
    )]
    Key { key: String, reason: &'static str },
    #[error("manifest {key}: the body is empty; to remove pushed pods, DELETE /manifests/{key}")]
    Empty { key: String },
    #[error("manifest {key} is rejected, nothing changed:\n{}", problems::error_lines(key, errors).join("\n"))]
    Manifest { key: String, errors: manifest::Errors },
    #[error(
        "manifest {key} holds pod {pod} twice; each pod of a manifest needs its own namespace/name"
    )]
    Duplicate { key: String, pod: FullName },
    #[error(
        "manifest {key}: pod {pod} is already pushed under key {other}; delete /manifests/{other} first, or push the pod under {other}"
    )]
    Conflict { key: String, pod: FullName, other: String },
    #[error("no manifest is pushed under key {key}")]
    NotFound { key: String },
}

impl Error {
    /// The manifest's problems, one per line as `<key>:L:C: message`; empty for errors
    /// that are not about the manifest's content.
    pub fn details(&self) -> Vec<String> {
        match self {
            Error::Manifest { key, errors } => problems::error_lines(key, errors),
            _ => Vec::new(),
        }
    }

    /// Whether the body was over the size limit (S8).
    pub fn is_too_large(&self) -> bool {
        matches!(self, Error::Manifest { errors, .. }
            if errors.0.iter().any(|e| matches!(e, manifest::Error::TooLarge { .. })))
    }
}

/// The longest push key (a DNS subdomain's length, so a key can be a pod or app name).
pub const MAX_KEY_LEN: usize = 253;

/// Checks that `key` can name a pushed manifest: one URL path segment of
/// `[A-Za-z0-9._-]`, 1 to 253 characters, not `.` or `..`.
pub fn validate_key(key: &str) -> Result<(), Error> {
    let reason = if key.is_empty() {
        "is empty"
    } else if key.len() > MAX_KEY_LEN {
        "is longer than 253 characters"
    } else if key == "." || key == ".." {
        "is a path step"
    } else if key == "audit" {
        "is reserved: GET /manifests/audit is the manifest audit log"
    } else if !key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        "has a character other than a letter, digit, '.', '_' or '-'"
    } else {
        return Ok(());
    };
    // A long key is shown cut short: the message names it, it does not repeat it.
    let shown = match key.char_indices().nth(64) {
        Some((end, _)) => format!("{}...", &key[..end]),
        None => key.to_owned(),
    };
    Err(Error::Key { key: shown, reason })
}

/// One pushed manifest: its decoded, defaulted pods and what identifies the body.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The pods in the order of the manifest, ready for the merge.
    pub pods: Vec<SourcePod>,
    pub pushed_at: Timestamp,
    /// The body's size in bytes.
    pub size: u64,
    /// `sha256:<hex>` of the body, so a caller can compare it with what it sent.
    pub digest: String,
    /// What the decoder warned about (`<key>:L:C: warning: …`): the pods run, but these
    /// fields are not honoured as written.
    pub warnings: Vec<String>,
}

impl Pushed {
    /// Whether `other` would run exactly the same pods (same body, same UIDs and content).
    fn same_as(&self, other: &Pushed) -> bool {
        self.digest == other.digest
            && self.pods.len() == other.pods.len()
            && self
                .pods
                .iter()
                .zip(&other.pods)
                .all(|(a, b)| a.uid == b.uid && a.fingerprint == b.fingerprint)
    }
}

/// Decodes a pushed body into a [`Pushed`] for `key` (S1–S11 through the manifest
/// decoder, with the key as the location hashed into the UID, S5). CPU-bound: callers
/// on an async runtime run it on the blocking pool.
pub fn prepare(key: &str, body: &[u8], node_name: &str, now: Timestamp) -> Result<Pushed, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::Empty { key: key.to_owned() });
    }
    let manifest::Decoded { pods, warnings } =
        manifest::decode_with_warnings(body, Origin::Push(key), node_name)
            .map_err(|errors| Error::Manifest { key: key.to_owned(), errors })?;
    let warnings = problems::warning_lines(&key, &warnings);
    let pods: Vec<SourcePod> = pods.into_iter().map(SourcePod::new).collect();
    let mut names = HashSet::with_capacity(pods.len());
    for pod in &pods {
        if !names.insert(&pod.name) {
            return Err(Error::Duplicate { key: key.to_owned(), pod: (*pod.name).clone() });
        }
    }
    let digest = format!("sha256:{:x}", Sha256::digest(body));
    Ok(Pushed { pods, pushed_at: now, size: body.len() as u64, digest, warnings })
}

/// What a PUT did.
#[derive(Debug)]
pub enum Put {
    /// A new key.
    Created(Manifests),
    /// The key's manifest was replaced by a different one.
    Replaced(Manifests),
    /// The key already holds exactly this manifest: nothing to store or send.
    Unchanged(Arc<Pushed>),
}

/// Every pushed manifest, by key (sorted, so the SET lists pods in a stable order).
#[derive(Debug, Clone, Default)]
pub struct Manifests(BTreeMap<String, Arc<Pushed>>);

impl Manifests {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Arc<Pushed>> {
        self.0.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<Pushed>)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The number of pods over all keys.
    pub fn pod_count(&self) -> usize {
        self.0.values().map(|p| p.pods.len()).sum()
    }

    /// Stores `pushed` under `key`. A pod whose namespace/name another key already
    /// pushes is refused (409): two keys never fight over one pod, which the merge would
    /// otherwise settle silently by order (M2).
    pub fn put(&self, key: &str, pushed: Pushed) -> Result<Put, Error> {
        if let Some(current) = self.0.get(key)
            && current.same_as(&pushed)
        {
            return Ok(Put::Unchanged(current.clone()));
        }
        for (other, manifest) in self.0.iter().filter(|(k, _)| k.as_str() != key) {
            if let Some(pod) =
                pushed.pods.iter().find(|p| manifest.pods.iter().any(|q| q.name == p.name))
            {
                return Err(Error::Conflict {
                    key: key.to_owned(),
                    pod: (*pod.name).clone(),
                    other: other.clone(),
                });
            }
        }
        let mut next = self.clone();
        let replaced = next.0.insert(key.to_owned(), Arc::new(pushed)).is_some();
        Ok(if replaced { Put::Replaced(next) } else { Put::Created(next) })
    }

    /// Removes `key`: the remaining manifests and the removed one.
    pub fn delete(&self, key: &str) -> Result<(Manifests, Arc<Pushed>), Error> {
        let mut next = self.clone();
        match next.0.remove(key) {
            Some(removed) => Ok((next, removed)),
            None => Err(Error::NotFound { key: key.to_owned() }),
        }
    }

    /// The source's full state for the merge: every key's pods, keys in sorted order.
    pub fn set(&self) -> SourceUpdate {
        SourceUpdate {
            source: Source::Push,
            op: Op::Set,
            pods: self.0.values().flat_map(|p| p.pods.iter().cloned()).collect(),
        }
    }

    /// What the checkpoint file holds.
    pub fn checkpoint(&self, node_name: &str) -> Checkpoint {
        Checkpoint {
            node_name: node_name.to_owned(),
            manifests: self
                .0
                .iter()
                .map(|(key, p)| {
                    let entry = Entry {
                        pushed_at: p.pushed_at,
                        size: p.size,
                        digest: p.digest.clone(),
                        warnings: p.warnings.clone(),
                        pods: p.pods.iter().map(|sp| sp.pod.clone()).collect(),
                    };
                    (key.clone(), entry)
                })
                .collect(),
        }
    }

    /// The manifests a checkpoint holds, exactly as they were pushed (the pods are not
    /// decoded again, so their UIDs are those the merge saw before the restart).
    pub fn from_checkpoint(checkpoint: Checkpoint) -> Manifests {
        Manifests(
            checkpoint
                .manifests
                .into_iter()
                .map(|(key, entry)| {
                    let pushed = Pushed {
                        pods: entry.pods.into_iter().map(SourcePod::new).collect(),
                        pushed_at: entry.pushed_at,
                        size: entry.size,
                        digest: entry.digest,
                        warnings: entry.warnings,
                    };
                    (key, Arc::new(pushed))
                })
                .collect(),
        )
    }
}

/// The checkpoint (`<state-dir>/checkpoints/push.json`): every pushed manifest's pods as
/// decoded and defaulted, with the node name they were defaulted for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub node_name: String,
    pub manifests: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub pushed_at: Timestamp,
    pub size: u64,
    pub digest: String,
    /// The decoder's warnings (absent in checkpoints written before they were kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub pods: Vec<Arc<Pod>>,
}

/// How `GET /manifests` shows one pushed manifest.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub key: String,
    pub pushed_at: Timestamp,
    pub size: u64,
    pub digest: String,
    pub pods: Vec<PodRef>,
    /// What the decoder warned about: the pods run, but these fields are not honoured
    /// as written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One pod of a pushed manifest, as the merge knows it.
#[derive(Debug, Clone, Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl Summary {
    pub fn of(key: &str, pushed: &Pushed) -> Summary {
        Summary {
            key: key.to_owned(),
            pushed_at: pushed.pushed_at,
            size: pushed.size,
            digest: pushed.digest.clone(),
            pods: pushed
                .pods
                .iter()
                .map(|p| PodRef {
                    namespace: p.name.namespace.clone(),
                    name: p.name.name.clone(),
                    uid: p.uid().to_owned(),
                })
                .collect(),
            warnings: pushed.warnings.clone(),
        }
    }
}

/// The keys with problems: the last push of a key was rejected (what it stores, if
/// anything, stays), or what it stores decoded with warnings. A key leaves when a push of
/// it is accepted without warnings, or when it is deleted.
#[derive(Debug, Clone, Default)]
pub struct Problems(BTreeMap<String, ManifestProblem>);

impl Problems {
    /// The problems of what `manifests` stores (after a restart).
    pub fn of(manifests: &Manifests) -> Problems {
        let warned = manifests.iter().filter_map(|(key, p)| {
            Some((key.to_owned(), ManifestProblem::warned(key, &p.warnings)?))
        });
        Problems(warned.collect())
    }

    /// A push of `key` was refused with `error`. Only a body's problems count (not a bad
    /// key); true if the list changed.
    pub fn rejected(&mut self, key: &str, error: &Error) -> bool {
        let lines = match error {
            Error::Manifest { .. } => error.details(),
            Error::Empty { .. } | Error::Duplicate { .. } | Error::Conflict { .. } => {
                vec![error.to_string()]
            }
            _ => return false,
        };
        self.set(key, ManifestProblem::rejected(key, &lines))
    }

    /// `key` now stores `pushed`; true if the list changed.
    pub fn stored(&mut self, key: &str, pushed: &Pushed) -> bool {
        self.set(key, ManifestProblem::warned(key, &pushed.warnings))
    }

    /// `key` was deleted (or holds nothing); true if the list changed.
    pub fn removed(&mut self, key: &str) -> bool {
        self.set(key, None)
    }

    /// Every key with problems, in key order.
    pub fn list(&self) -> Vec<ManifestProblem> {
        self.0.values().cloned().collect()
    }

    fn set(&mut self, key: &str, problem: Option<ManifestProblem>) -> bool {
        match problem {
            Some(problem) => {
                self.0.insert(key.to_owned(), problem.clone()).as_ref() != Some(&problem)
            }
            None => self.0.remove(key).is_some(),
        }
    }
}

#[cfg(test)]
mod tests;
