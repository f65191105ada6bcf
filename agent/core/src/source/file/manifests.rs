//! What the manifest directory holds, file by file: the last good pods of each file, and
//! the error or the warnings of its latest read. No IO here: the caller reads files and
//! hands over bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use k8s_openapi::jiff::Timestamp;
use xxhash_rust::xxh3::xxh3_128;

use crate::manifest::{self, Origin};
use crate::pod::{self, CONFIG_SEEN, SourcePod};
use crate::source::problems::{self, ManifestProblem};

/// The result of offering one file's current content.
#[derive(Debug)]
pub enum Outcome {
    /// Same bytes as before: nothing decoded.
    Unchanged,
    /// The file's pods changed (added, edited, or now absent).
    Changed,
    /// New bytes, decoded, with the same pods (a comment, or a field the decoder drops
    /// with a warning).
    SamePods,
    /// The content is not a valid manifest; the file's last good pods (if any) stay.
    Rejected(String),
    /// A zero-length file: most likely a writer that truncated and has not written
    /// yet. The last good pods stay until real content arrives.
    Empty,
}

#[derive(Debug, Default)]
struct Entry {
    /// XXH3-128 of the bytes last decoded (good or bad), to skip re-decoding.
    digest: Option<u128>,
    pods: Vec<SourcePod>,
    error: Option<String>,
    /// The warnings about the latest content, when it was good (`file:L:C: warning: …`).
    warnings: Vec<String>,
}

/// The manifests of one directory (or one manifest file), keyed by file name.
#[derive(Debug)]
pub struct Manifests {
    dir: PathBuf,
    node_name: String,
    entries: BTreeMap<OsString, Entry>,
}

impl Manifests {
    /// `dir` is the directory as configured (not symlink-resolved): file paths built from
    /// it are the S5 locations, so they stay stable when a `..data` symlink swaps.
    pub fn new(dir: PathBuf, node_name: String) -> Manifests {
        Manifests { dir, node_name, entries: BTreeMap::new() }
    }

    pub fn path_of(&self, name: &OsStr) -> PathBuf {
        self.dir.join(name)
    }

    /// Offers the current bytes of `name`, read at `now`.
    pub fn offer(&mut self, name: &OsStr, bytes: &[u8], now: Timestamp) -> Outcome {
        let path = self.path_of(name);
        let digest = xxh3_128(bytes);
        let entry = self.entries.entry(name.to_owned()).or_default();
        if entry.digest == Some(digest) {
            return Outcome::Unchanged;
        }
        if bytes.is_empty() && !entry.pods.is_empty() {
            return Outcome::Empty;
        }
        entry.digest = Some(digest);
        match manifest::decode_with_warnings(bytes, Origin::File(&path), &self.node_name) {
            Ok(manifest::Decoded { pods, warnings }) => {
                entry.error = None;
                entry.warnings = problems::warning_lines(&path.display(), &warnings);
                let seen = now.to_string();
                let new: Vec<SourcePod> = pods
                    .into_iter()
                    .map(|mut p| {
                        pod::set_annotation(&mut p, CONFIG_SEEN, seen.as_str());
                        SourcePod::new(p)
                    })
                    .collect();
                if same_pods(&entry.pods, &new) {
                    return Outcome::SamePods;
                }
                entry.pods = new;
                Outcome::Changed
            }
            Err(errors) => {
                let report = problems::error_lines(&path.display(), &errors).join("\n");
                entry.error = Some(report.clone());
                entry.warnings.clear();
                Outcome::Rejected(report)
            }
        }
    }

    /// Records that `name` could not be read at all (not a regular file, I/O error...).
    /// Like a rejection: last good pods stay only while the file still exists, so the
    /// caller uses [`Manifests::forget`] when it is gone.
    pub fn unreadable(&mut self, name: &OsStr, error: String) -> Outcome {
        let entry = self.entries.entry(name.to_owned()).or_default();
        entry.digest = None;
        entry.error = Some(error.clone());
        entry.warnings.clear();
        Outcome::Rejected(error)
    }

    /// The file is gone (deleted, renamed away, no longer a manifest). True if it had pods.
    pub fn forget(&mut self, name: &OsStr) -> bool {
        self.entries.remove(name).is_some_and(|e| !e.pods.is_empty())
    }

    /// Replaces the set of known files after a full scan: files not in `present` are forgotten.
    pub fn retain(&mut self, present: &BTreeSet<OsString>) -> bool {
        let mut changed = false;
        self.entries.retain(|name, e| {
            let keep = present.contains(name);
            changed |= !keep && !e.pods.is_empty();
            keep
        });
        changed
    }

    pub fn contains(&self, name: &OsStr) -> bool {
        self.entries.contains_key(name)
    }

    /// Every file known (read at least once and not forgotten).
    pub fn names(&self) -> Vec<OsString> {
        self.entries.keys().cloned().collect()
    }

    /// `namespace/name` of the last good pods of `name`, in document order.
    pub fn pod_names(&self, name: &OsStr) -> Vec<String> {
        self.entries
            .get(name)
            .map(|e| e.pods.iter().map(|p| p.name.to_string()).collect())
            .unwrap_or_default()
    }

    /// The last good pods of `name`, in document order.
    pub fn pods_of(&self, name: &OsStr) -> &[SourcePod] {
        self.entries.get(name).map(|e| e.pods.as_slice()).unwrap_or_default()
    }

    /// Every pod of every file, in file-name order then document order: the SET.
    pub fn pods(&self) -> Vec<SourcePod> {
        self.entries.values().flat_map(|e| e.pods.iter().cloned()).collect()
    }

    /// The warnings about the latest content of `name` (none if it was rejected).
    pub fn warnings_of(&self, name: &OsStr) -> &[String] {
        self.entries.get(name).map(|e| e.warnings.as_slice()).unwrap_or_default()
    }

    /// Every file rejected, unreadable or warned about, in file-name order, each with its
    /// first problem.
    pub fn problems(&self) -> Vec<ManifestProblem> {
        self.entries
            .iter()
            .filter(|(_, e)| e.error.is_some() || !e.warnings.is_empty())
            .filter_map(|(name, e)| {
                let path = self.path_of(name).display().to_string();
                match &e.error {
                    Some(report) => {
                        let lines: Vec<String> = report.lines().map(str::to_owned).collect();
                        ManifestProblem::rejected(&path, &lines)
                    }
                    None => ManifestProblem::warned(&path, &e.warnings),
                }
            })
            .collect()
    }

    /// Files whose latest content was rejected or unreadable, with the report.
    pub fn errors(&self) -> impl Iterator<Item = (&OsStr, &str)> + '_ {
        self.entries.iter().filter_map(|(name, e)| Some((name.as_os_str(), e.error.as_deref()?)))
    }
}

/// Same pods in the same order, by UID and fingerprint (config.seen aside).
fn same_pods(a: &[SourcePod], b: &[SourcePod]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| x.uid() == y.uid() && x.fingerprint == y.fingerprint)
}

#[cfg(test)]
mod tests;
