//! The push source: manifests PUT to the local API under `/manifests/{key}` (an Outpost
//! extension; kubelet has none). Its pods are static pods of config source `http`, and
//! the push key is the location hashed into their UIDs (S5), so the same body under the
//! same key on the same node always makes the same pods.
//!
//! Pushed manifests exist only on this node, so every change is checkpointed before it
//! is acted on or acknowledged (O1): a PUT or DELETE writes the checkpoint, then sends
//! the source's full state (a SET) to the merge, then answers. A change whose checkpoint
//! cannot be written fails and changes nothing. At start the checkpoint is replayed as
//! the source's first SET; without one the source starts empty and is seen at once (M9),
//! as it has nothing remote to wait for.
//!
//! A push whose body is rejected changes nothing but is listed, with its first problem,
//! among the source's manifests with problems ([`SourceEvent::Problems`]) until the key
//! is pushed again or deleted; so is a key whose manifest decoded with warnings (logged
//! once, when it is stored, and answered with the manifest).
//!
//! - `outpost_core::source::push`: the pushed manifests and their transitions, with no IO;
//! - this module: the executor, which checkpoints, publishes and sends them.

use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;
use futures::StreamExt as _;
use k8s_openapi::jiff::Timestamp;
use outpost_core::pod::Source;
use outpost_core::source::push::{self as state, Checkpoint, Manifests, Problems, Put};
use tokio::sync::{Mutex, mpsc};
use tracing::{Instrument, error, info, info_span, warn};

use crate::checkpoint::{self, Checkpoints};
use crate::source::metrics::SourceMetrics;
use crate::source::{EventStream, Freshness, SourceEvent};
pub use outpost_core::source::push::{MAX_KEY_LEN, PodRef, Summary, validate_key};

/// The checkpoint's name (`<state-dir>/checkpoints/push.json`).
const CHECKPOINT: &str = "push";
/// SETs waiting for the merge; a writer waits when it is this far behind.
const QUEUE: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key, the body or what the other keys hold refuses the change.
    #[error(transparent)]
    Refused(#[from] state::Error),
    #[error("manifest {key}: nothing changed: {source}")]
    Checkpoint {
        key: String,
        #[source]
        source: checkpoint::Error,
    },
    #[error(
        "manifest {key}: the change failed unexpectedly: {source}; GET /manifests shows what is stored"
    )]
    Task {
        key: String,
        #[source]
        source: tokio::task::JoinError,
    },
    #[error(
        "manifest {key} is stored but the agent is shutting down; it applies when the agent starts again"
    )]
    Stopped { key: String },
    #[error(
        "cannot restore the pushed manifests, starting with none: {source}; {}; push the manifests again",
        aside.as_ref().map_or_else(
            || "the file could not be moved aside and is overwritten by the next push".to_owned(),
            |p| format!("the file was moved to {}", p.display()),
        )
    )]
    Restore {
        aside: Option<PathBuf>,
        #[source]
        source: checkpoint::Error,
    },
}

impl Error {
    /// The manifest's problems, one per line as `<key>:L:C: message`; empty for errors
    /// that are not about the manifest's content.
    pub fn details(&self) -> Vec<String> {
        match self {
            Error::Refused(refusal) => refusal.details(),
            _ => Vec::new(),
        }
    }

    /// Whether the body was over the size limit (S8).
    pub fn is_too_large(&self) -> bool {
        matches!(self, Error::Refused(refusal) if refusal.is_too_large())
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub node_name: String,
    pub checkpoints: Checkpoints,
    /// Counts rejected bodies.
    pub metrics: SourceMetrics,
}

/// What a PUT did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Replaced,
    /// The key already held exactly this manifest.
    Unchanged,
}

/// What the HTTP handlers hold to change the pushed manifests. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PushHandle {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    node_name: String,
    checkpoints: Checkpoints,
    /// The manifests as last stored; replaced only by a writer holding `writer`.
    current: ArcSwap<Manifests>,
    /// Serialises writes, so checkpoints and SETs go out in the order of the changes.
    writer: Mutex<Writer>,
    metrics: SourceMetrics,
}

/// What only the writer touches.
#[derive(Debug)]
struct Writer {
    tx: mpsc::Sender<SourceEvent>,
    /// The keys with problems, as last sent.
    problems: Problems,
}

/// Loads the pushed manifests' checkpoint and returns the handle for the HTTP
/// handlers and the source's event stream (which starts with the checkpoint's SET).
pub fn open(config: Config) -> Result<(PushHandle, EventStream), Error> {
    let (manifests, mut first) = restore(&config);
    let problems = Problems::of(&manifests);
    if !problems.list().is_empty() {
        first.push(SourceEvent::Problems(problems.list()));
    }
    let (tx, rx) = mpsc::channel(QUEUE);
    let handle = PushHandle {
        inner: Arc::new(Inner {
            node_name: config.node_name,
            checkpoints: config.checkpoints,
            current: ArcSwap::from_pointee(manifests),
            writer: Mutex::new(Writer { tx, problems }),
            metrics: config.metrics,
        }),
    };
    let stream =
        futures::stream::iter(first).chain(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok((handle, Box::pin(stream)))
}

/// The manifests in the checkpoint and the source's first events. A checkpoint that
/// cannot be read is moved aside (`push.json.corrupt`) for the operator, reported, and
/// the source starts empty: the agent never stops over it.
fn restore(config: &Config) -> (Manifests, Vec<SourceEvent>) {
    let path = config.checkpoints.path(CHECKPOINT);
    match config.checkpoints.read::<Checkpoint>(CHECKPOINT) {
        Ok(Some(checkpoint)) => {
            if checkpoint.node_name != config.node_name {
                warn!(
                    checkpoint = %path.display(), pushed_for = %checkpoint.node_name, node = %config.node_name,
                    "pushed manifests were defaulted for another node name; they run as they were pushed until pushed again"
                );
            }
            let manifests = Manifests::from_checkpoint(checkpoint);
            info!(
                manifests = manifests.len(), pods = manifests.pod_count(), checkpoint = %path.display(),
                "pushed manifests restored from the checkpoint"
            );
            let set = manifests.set();
            (manifests, vec![SourceEvent::Update(set, Freshness::Checkpoint)])
        }
        Ok(None) => {
            let manifests = Manifests::default();
            let set = manifests.set();
            (manifests, vec![SourceEvent::Update(set, Freshness::Live)])
        }
        Err(source) => {
            let target = path.with_extension("json.corrupt");
            let aside = match std::fs::rename(&path, &target) {
                Ok(()) => Some(target),
                Err(e) => {
                    error!(checkpoint = %path.display(), error = %e, "cannot move the unreadable checkpoint aside");
                    None
                }
            };
            let error = Error::Restore { aside, source };
            error!(error = %error, "pushed manifests lost");
            let manifests = Manifests::default();
            let set = manifests.set();
            // Seen at once (empty), then failing until the next push, so /readyz shows it.
            (
                manifests,
                vec![
                    SourceEvent::Update(set, Freshness::Live),
                    SourceEvent::Failed(Box::new(error)),
                ],
            )
        }
    }
}

impl PushHandle {
    /// Stores the manifest `body` (a Pod or PodList, YAML or JSON) under `key`, replacing
    /// what the key held. Returns once the change is checkpointed and sent to the merge.
    pub async fn put(
        &self,
        key: &str,
        body: impl AsRef<[u8]> + Send + 'static,
    ) -> Result<(Summary, Change), Error> {
        validate_key(key)?;
        let this = self.clone();
        let owned = key.to_owned();
        self.detached(key, async move { this.put_now(&owned, body).await }).await
    }

    /// Removes the manifest under `key` and its pods. Returns what was removed once the
    /// change is checkpointed and sent to the merge.
    pub async fn delete(&self, key: &str) -> Result<Summary, Error> {
        validate_key(key)?;
        let this = self.clone();
        let owned = key.to_owned();
        self.detached(key, async move { this.delete_now(&owned).await }).await
    }

    /// Runs a change on its own task, in a span naming the key. A caller that goes away
    /// midway (an HTTP handler dropped with its connection) cannot stop a change between
    /// its checkpoint, its publication and its SET, which would leave them disagreeing.
    async fn detached<T: Send + 'static>(
        &self,
        key: &str,
        change: impl Future<Output = Result<T, Error>> + Send + 'static,
    ) -> Result<T, Error> {
        let span = info_span!("push", push.key = %key);
        tokio::spawn(change.instrument(span))
            .await
            .map_err(|source| Error::Task { key: key.to_owned(), source })?
    }

    async fn put_now(
        &self,
        key: &str,
        body: impl AsRef<[u8]> + Send + 'static,
    ) -> Result<(Summary, Change), Error> {
        let node_name = self.inner.node_name.clone();
        let owned = key.to_owned();
        let prepared = tokio::task::spawn_blocking(move || {
            // Clock: the local wall clock, for the times the pushed pods record.
            state::prepare(&owned, body.as_ref(), &node_name, Timestamp::now())
        })
        .await
        .map_err(|source| Error::Task { key: key.to_owned(), source })?;
        let prepared = prepared.inspect_err(|_| self.inner.metrics.manifest_rejected(Source::Push));

        let mut writer = self.inner.writer.lock().await;
        let put = match prepared {
            Ok(pushed) => self.put_locked(key, pushed, &writer.tx).await,
            Err(refusal) => Err(refusal.into()),
        };
        let changed = match &put {
            Ok((summary, _)) => match self.inner.current.load().get(key) {
                Some(pushed) => writer.problems.stored(key, pushed),
                None => {
                    error!(key, pods = summary.pods.len(), "a manifest just pushed is not stored");
                    false
                }
            },
            Err(Error::Refused(refusal)) => writer.problems.rejected(key, refusal),
            Err(_) => false,
        };
        if changed {
            report(&writer).await;
        }
        put
    }

    /// Stores `pushed` under `key`. Called with the writer lock.
    async fn put_locked(
        &self,
        key: &str,
        pushed: state::Pushed,
        tx: &mpsc::Sender<SourceEvent>,
    ) -> Result<(Summary, Change), Error> {
        let (next, change) = match self.inner.current.load().put(key, pushed)? {
            Put::Unchanged(pushed) => {
                info!("manifest pushed again unchanged");
                return Ok((Summary::of(key, &pushed), Change::Unchanged));
            }
            Put::Created(next) => (next, Change::Created),
            Put::Replaced(next) => (next, Change::Replaced),
        };
        let summary = next
            .get(key)
            .map(|pushed| Summary::of(key, pushed))
            .ok_or_else(|| state::Error::NotFound { key: key.to_owned() })?;
        self.store(key, tx, next).await?;
        info!(pods = summary.pods.len(), ?change, digest = %summary.digest, "manifest pushed");
        if !summary.warnings.is_empty() {
            warn!(
                warnings = summary.warnings.len(),
                "pushed manifest accepted with warnings; its pods run, but these fields are not honoured as written:\n{}",
                summary.warnings.join("\n")
            );
        }
        Ok((summary, change))
    }

    async fn delete_now(&self, key: &str) -> Result<Summary, Error> {
        let mut writer = self.inner.writer.lock().await;
        let deleted = match self.inner.current.load().delete(key) {
            Ok((next, removed)) => self.store(key, &writer.tx, next).await.map(|()| removed),
            Err(refusal) => Err(refusal.into()),
        };
        // A key deleted, or never stored, has no problem left to show.
        let gone = matches!(deleted, Ok(_) | Err(Error::Refused(state::Error::NotFound { .. })));
        if gone && writer.problems.removed(key) {
            report(&writer).await;
        }
        let removed = deleted?;
        info!(pods = removed.pods.len(), "pushed manifest deleted");
        Ok(Summary::of(key, &removed))
    }

    /// Checkpoints `next`, publishes it, and sends its SET. Called with the writer lock.
    async fn store(
        &self,
        key: &str,
        tx: &mpsc::Sender<SourceEvent>,
        next: Manifests,
    ) -> Result<(), Error> {
        let checkpoint = next.checkpoint(&self.inner.node_name);
        self.inner
            .checkpoints
            .write_async(CHECKPOINT, checkpoint)
            .await
            .map_err(|source| Error::Checkpoint { key: key.to_owned(), source })?;
        let set = next.set();
        self.inner.current.store(Arc::new(next));
        tx.send(SourceEvent::Update(set, Freshness::Live))
            .await
            .map_err(|_| Error::Stopped { key: key.to_owned() })
    }

    /// Every pushed manifest, by key.
    pub fn list(&self) -> Vec<Summary> {
        self.inner.current.load().iter().map(|(key, pushed)| Summary::of(key, pushed)).collect()
    }

    /// The pods of the manifest pushed under `key`, in manifest order.
    pub fn pods(&self, key: &str) -> Vec<Arc<k8s_openapi::api::core::v1::Pod>> {
        let current = self.inner.current.load();
        current.get(key).map(|p| p.pods.iter().map(|p| p.pod.clone()).collect()).unwrap_or_default()
    }

    /// The manifest pushed under `key`.
    pub fn summary(&self, key: &str) -> Option<Summary> {
        self.inner.current.load().get(key).map(|pushed| Summary::of(key, pushed))
    }
}

/// Sends the keys with problems, all of them. Called with the writer lock; a source
/// that is shutting down has nobody left to tell.
async fn report(writer: &Writer) {
    let _ = writer.tx.send(SourceEvent::Problems(writer.problems.list())).await;
}

#[cfg(test)]
mod tests;
