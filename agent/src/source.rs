//! Pod sources: each is a stream of [`SourceEvent`]s for the merge (SEMANTICS.md S*, M*).

pub mod api;
pub mod file;
pub mod local;
pub mod metrics;
pub mod problems;
pub mod push;
pub mod url;

use futures::stream::BoxStream;
use serde::Serialize;

pub use outpost_core::merge::{Op, SourceUpdate};

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

/// A source as the merge task takes it.
pub type EventStream = BoxStream<'static, SourceEvent>;

/// Asks a polling source to fetch now instead of at its next tick (SIGHUP,
/// `POST /refresh`). Requests made while a fetch runs coalesce into one more fetch.
#[derive(Debug, Clone, Default)]
pub struct Refresh(std::sync::Arc<tokio::sync::Notify>);

impl Refresh {
    pub fn request(&self) {
        self.0.notify_one();
    }

    /// Resolves once a refresh has been requested since the last call.
    pub async fn requested(&self) {
        self.0.notified().await;
    }
}
