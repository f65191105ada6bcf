//! Pod sources: each is a stream of [`SourceEvent`]s for the merge (SEMANTICS.md S*, M*).
//! The file, URL and push sources' decisions are pure, in `outpost_core::source`; their
//! executors are here.

pub mod api;
pub mod file;
pub mod local;
pub mod metrics;
pub mod push;
pub mod url;

use futures::stream::BoxStream;

pub use outpost_core::merge::{Op, SourceUpdate};
pub use outpost_core::source::{Freshness, SourceEvent, problems};

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
