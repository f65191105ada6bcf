//! The static pod sources' decisions (SEMANTICS.md S*, O1, O2), and what a source tells
//! the merge. Each source is a pure state machine or state here; the agent's executors
//! (`outpost::source::{file, url, push}`) do its IO and feed the results back.
//!
//! - [`file`]: the manifest directory source's state machine, and the manifests it read.
//! - [`url`]: the manifest URL source's state machine.
//! - [`push`]: the pushed manifests and the transitions a PUT or DELETE makes.
//! - [`problems`]: the manifests a source rejects or warns about.
//! - [`checkpoint`]: a checkpoint the agent could not read or write, as data.

pub mod checkpoint;
pub mod file;
pub mod problems;
pub mod push;
pub mod url;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::merge::SourceUpdate;

/// Where the pods of an update were read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Freshness {
    /// From the source itself (the directory, the URL, a push, the API server).
    Live,
    /// Replayed from the source's checkpoint at start, with the source unreachable (O2).
    Checkpoint,
}

/// What a source tells the merge.
#[derive(Debug)]
pub enum SourceEvent {
    /// Pods to merge.
    Update(SourceUpdate, Freshness),
    /// The source reached its origin and what the merge has is current (an HTTP 304,
    /// an unchanged body): it is live again, with no update to merge.
    Confirmed,
    /// The source could not reach or read its origin. Its pods stay as they are; the
    /// error is logged and reported on `/readyz` until the source recovers.
    Failed(Box<dyn std::error::Error + Send + Sync>),
    /// The manifests the source rejects or warns about now, all of them (empty: none).
    /// Sent when the list changes; shown on `/readyz?verbose` and `/status`, never a
    /// failure: the other manifests' pods run.
    Problems(Vec<problems::ManifestProblem>),
}

/// A short content hash, as the manifest audit records it: `sha256:` and the first 16
/// hex digits.
pub fn short_sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests;
