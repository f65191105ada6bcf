//! The manifest URL source (`--manifest-url`, kubelet's `staticPodURL`): a Pod or
//! PodList fetched over HTTP(S) at a jittered interval, and at once on a refresh request
//! (SIGHUP, `POST /refresh`).
//!
//! Each fetch is a conditional GET (`If-None-Match`, `If-Modified-Since`), so an
//! unchanged document costs a 304. A 304, or a 200 whose body hashes like the last good
//! one, is [`SourceEvent::Confirmed`]: nothing is merged again. A new good document is
//! checkpointed first and then sent as a SET (O1). At start a checkpoint of the same URL
//! is replayed as the source's SET before the first fetch (O2).
//!
//! Nothing that goes wrong removes pods: an unreachable server, an HTTP error status
//! (404 included, as kubelet's http source does), a document that does not decode, one
//! over 10 MiB (S8) or an empty body are each reported as [`SourceEvent::Failed`] and
//! the last good pods stay. A source that never got a good document stays "never seen"
//! (M9) rather than claiming an empty set.

mod client;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use outpost_core::manifest::{self, MAX_MANIFEST_BYTES, Origin};
use outpost_core::merge::{Op, SourceUpdate};
use outpost_core::pod::{Source, SourcePod};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tracing::{Instrument, debug, error, info, warn};

use self::client::{Client, Fetched, Validators};
use crate::audit::admission::Manifest;
use crate::audit::{self, ManifestAudit, ManifestSource, Writer};
use crate::checkpoint::{self, Checkpoints};
use crate::source::metrics::SourceMetrics;
use crate::source::{EventStream, Freshness, Refresh, SourceEvent};

pub use self::client::{CONNECT_TIMEOUT, MAX_REDIRECTS, SYSTEM_CA_BUNDLE, TOTAL_TIMEOUT};

/// The checkpoint's name: `<state-dir>/checkpoints/url.json`.
pub const CHECKPOINT: &str = "url";
/// Each wait is the interval times a factor drawn from `[1, 1 + JITTER)`, so agents
/// started together do not fetch together (kubelet's `wait.Jitter`).
pub const JITTER: f64 = 0.1;
/// The shortest interval between fetches, whatever is configured (no busy loop).
pub const MIN_INTERVAL: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--manifest-url {url:?} is not a valid URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("--manifest-url {url}: scheme {scheme:?} is not supported; use http:// or https://")]
    Scheme { url: String, scheme: String },
    #[error("--manifest-url-header {name:?}: {reason}")]
    Header { name: String, reason: &'static str },
    #[error("cannot read --manifest-url-ca-file {path}: {source}")]
    CaFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "--manifest-url-ca-file {path}: {reason}; it must hold PEM CA certificates (-----BEGIN CERTIFICATE-----)"
    )]
    CaPem { path: PathBuf, reason: String },
    #[error("cannot set up TLS for {url}: {source}")]
    Tls {
        url: String,
        #[source]
        source: rustls::Error,
    },
    #[error("cannot build the HTTP client for {url}: {source}")]
    Client {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error(
        "cannot fetch {url}: no CA to check its certificate against: no --manifest-url-ca-file \
         given and no system bundle at {SYSTEM_CA_BUNDLE}; pass --manifest-url-ca-file"
    )]
    NoTrustRoots { url: String },
    #[error("cannot fetch {url}: {detail}")]
    /// `detail` is reqwest's cause chain in words, with advice (see `client::describe`).
    /// It is the error itself, not a cause: reqwest's own top line ("error sending
    /// request for url") says nothing more, so the reqwest error is not kept as a
    /// `source` that readers of the chain would print a second time.
    Fetch { url: String, detail: String },
    #[error("more than {max} redirects; point --manifest-url at the document itself")]
    TooManyRedirects { max: usize },
    #[error("refusing a redirect from https to {to}: it would drop TLS")]
    Downgrade { to: String },
    #[error(
        "cannot fetch {url}: the server answered {status}; only 200 is a manifest, so the last good pods (if any) are kept"
    )]
    Status { url: String, status: reqwest::StatusCode },
    #[error(
        "{url}: the document is {}, over the limit of {MAX_MANIFEST_BYTES} bytes (10 MiB, S8); \
         it is ignored and the last good pods (if any) are kept; split it into smaller documents",
        size.map_or_else(|| "larger".to_owned(), |s| format!("{s} bytes"))
    )]
    TooLarge { url: String, size: Option<u64> },
    #[error(
        "{url}: the document is empty; it is ignored and the last good pods (if any) are kept \
         (to remove every pod, serve an empty PodList)"
    )]
    Empty { url: String },
    #[error("{}", diagnostics(.url, .errors))]
    Manifest { url: String, errors: manifest::Errors },
    #[error("{url}: the manifest decoder failed (a bug; please report it): {source}")]
    Decoder {
        url: String,
        #[source]
        source: tokio::task::JoinError,
    },
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::Error),
}

/// Every problem of a rejected document as `<url>:L:C: message` (`<url>: message` when
/// the position is unknown), on one line so `/readyz` keeps one line per source.
fn diagnostics(url: &str, errors: &manifest::Errors) -> String {
    let lines: Vec<String> = errors
        .0
        .iter()
        .map(|e| match e.position() {
            Some(_) => format!("{url}:{e}"),
            None => format!("{url}: {e}"),
        })
        .collect();
    format!("{} (document rejected; the last good pods, if any, are kept)", lines.join("; "))
}

#[derive(Debug, Clone)]
pub struct Config {
    pub url: String,
    /// `Name: value` pairs sent with every request (`--manifest-url-header`).
    pub headers: Vec<(String, String)>,
    /// Time between fetches, before jitter (kubelet's `httpCheckFrequency`, 20 s).
    pub interval: Duration,
    /// Trust only these CAs for https (else the system bundle).
    pub ca_file: Option<PathBuf>,
    pub node_name: String,
    pub checkpoints: Checkpoints,
    pub refresh: Refresh,
}

/// What the checkpoint holds: the last good document's pods as decoded (defaulted,
/// validated), and what is needed to ask the server whether it is still current.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    /// The URL as shown (password hidden): a checkpoint of another URL is not replayed.
    url: String,
    /// The pods are defaulted for this node (S2, S4, S5): another node's are not replayed.
    node_name: String,
    etag: Option<String>,
    last_modified: Option<String>,
    /// XXH3-128 of the body, 32 hex digits.
    body_hash: String,
    pods: Vec<Arc<Pod>>,
}

/// The document the merge holds from this source.
#[derive(Debug, Clone)]
struct Good {
    body_hash: String,
    validators: Validators,
}

/// The URL source: a state machine stepped by [`UrlSource::next`].
#[derive(Debug)]
pub struct UrlSource {
    /// The URL as configured: hashed into the pods' UIDs (S5).
    url: String,
    /// The URL as logs and messages show it (password hidden).
    shown: String,
    client: Client,
    interval: Duration,
    node_name: String,
    checkpoints: Checkpoints,
    refresh: Refresh,
    span: tracing::Span,
    /// Whether the checkpoint has been looked at (the first step does it).
    started: bool,
    good: Option<Good>,
    /// A good document whose checkpoint write failed: written again at the next fetch
    /// that confirms it, until that works.
    unsaved: Option<Record>,
    /// Events of the last step not handed out yet.
    events: VecDeque<SourceEvent>,
    next_fetch: Instant,
    /// The last failure logged at warn level (the same one again is logged at debug).
    last_failure: Option<String>,
    /// Counts rejected documents.
    metrics: SourceMetrics,
    /// Where a document whose pods the admission policy refuses is recorded.
    audit: ManifestAudit,
}

impl UrlSource {
    /// Checks the configuration (URL, headers, CA file) and builds the HTTP client.
    /// Nothing is fetched or read until the stream is polled.
    pub fn new(config: Config) -> Result<UrlSource, Error> {
        let shown = client::redact(&config.url);
        let client = Client::new(&config.url, &shown, &config.headers, config.ca_file.as_deref())?;
        let span = tracing::info_span!("url_source", url = %shown);
        Ok(UrlSource {
            url: config.url,
            shown,
            client,
            interval: config.interval,
            node_name: config.node_name,
            checkpoints: config.checkpoints,
            refresh: config.refresh,
            span,
            started: false,
            good: None,
            unsaved: None,
            events: VecDeque::new(),
            next_fetch: Instant::now(),
            last_failure: None,
            metrics: SourceMetrics::default(),
            audit: ManifestAudit::default(),
        })
    }

    /// Records documents whose pods the admission policy refuses in `audit` (else in a
    /// log of its own).
    pub fn with_audit(mut self, audit: ManifestAudit) -> UrlSource {
        self.audit = audit;
        self
    }

    /// Counts rejected documents (empty, undecodable or invalid) in `metrics`.
    pub fn with_metrics(mut self, metrics: SourceMetrics) -> UrlSource {
        self.metrics = metrics;
        self
    }

    /// The next event: first the checkpoint's SET (if any), then one or more events per
    /// fetch. Between fetches it sleeps until the next tick or a refresh request.
    pub async fn next(&mut self) -> SourceEvent {
        loop {
            if let Some(event) = self.events.pop_front() {
                return event;
            }
            if !self.started {
                self.started = true;
                self.replay_checkpoint().await;
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep_until(self.next_fetch) => {}
                () = self.refresh.requested() => info!("refresh requested; fetching now"),
            }
            self.poll().await;
            self.next_fetch = after(jittered(self.interval, fastrand::f64()));
        }
    }

    /// O2: the checkpoint of this URL, if there is one, becomes the source's SET.
    async fn replay_checkpoint(&mut self) {
        let checkpoints = self.checkpoints.clone();
        let read = tokio::task::spawn_blocking(move || checkpoints.read::<Record>(CHECKPOINT))
            .await
            .unwrap_or_else(|e| {
                Err(checkpoint::Error::Read {
                    path: self.checkpoints.path(CHECKPOINT),
                    source: std::io::Error::other(e),
                })
            });
        match read {
            Ok(None) => debug!("no checkpoint; waiting for the first fetch"),
            Ok(Some(record)) if record.url != self.shown || record.node_name != self.node_name => {
                info!(
                    checkpoint_url = %record.url, checkpoint_node = %record.node_name,
                    "the checkpoint is of another URL or node; ignoring it"
                );
            }
            Ok(Some(record)) => {
                info!(pods = record.pods.len(), "replaying the checkpoint until the URL answers");
                self.good = Some(Good {
                    body_hash: record.body_hash,
                    validators: Validators {
                        etag: record.etag,
                        last_modified: record.last_modified,
                    },
                });
                self.events.push_back(SourceEvent::Update(
                    set(record.pods.into_iter().map(SourcePod::new).collect()),
                    Freshness::Checkpoint,
                ));
            }
            Err(e) => {
                // A corrupt checkpoint is not fatal: the next good fetch replaces it.
                error!(error = %e, "cannot use the manifest URL's checkpoint; going on without it");
                self.events.push_back(SourceEvent::Failed(Box::new(Error::Checkpoint(e))));
            }
        }
    }

    /// One fetch, and the events it makes.
    async fn poll(&mut self) {
        let validators = self.good.as_ref().map(|g| &g.validators);
        match self.client.fetch(validators).await {
            Ok(Fetched::NotModified) => {
                debug!("not modified");
                self.confirmed().await;
            }
            Ok(Fetched::Document { body, validators }) => self.document(body, validators).await,
            Err(e) => self.failed(e),
        }
    }

    /// A 200: unchanged (confirm), empty or bad (fail), or new (checkpoint, then SET).
    async fn document(&mut self, body: Vec<u8>, validators: Validators) {
        let body_hash = hash(&body);
        if let Some(good) = self.good.as_mut().filter(|g| g.body_hash == body_hash) {
            debug!("document unchanged");
            // The server may have changed its validators for the same bytes: ask with
            // the new ones next time.
            good.validators = validators;
            self.confirmed().await;
            return;
        }
        if body.trim_ascii().is_empty() {
            // kubelet sends an empty SET for a zero-length body (and reports an error):
            // an empty answer from a broken server or proxy would wipe every pod. Here
            // it is a failure; an empty PodList is how a server says "no pods".
            self.rejected(Error::Empty { url: self.shown.clone() });
            return;
        }
        let (url, node) = (self.url.clone(), self.node_name.clone());
        let sha256 = audit::short_sha256(&body);
        // Up to 10 MiB of YAML: decoded off the async workers.
        let decoded =
            tokio::task::spawn_blocking(move || manifest::decode(&body, Origin::Url(&url), &node))
                .await;
        let pods = match decoded {
            Ok(Ok(pods)) => pods,
            Ok(Err(errors)) => {
                self.rejected(Error::Manifest { url: self.shown.clone(), errors });
                return;
            }
            Err(source) => {
                // The decoder panicked: a bug, reported as this document's failure.
                self.rejected(Error::Decoder { url: self.shown.clone(), source });
                return;
            }
        };
        let pods: Vec<Arc<Pod>> = pods.into_iter().map(Arc::new).collect();
        info!(pods = pods.len(), "manifest URL document changed");
        let refusals = self.audit.refusals(ManifestSource::Url, pods.iter().map(|p| &**p));
        let manifest = Manifest {
            source: ManifestSource::Url,
            file: self.shown.clone(),
            path: self.shown.clone(),
            cause: audit::Cause::Fetch,
            sha256: Some(sha256),
            writer: Writer::remote("the manifest URL's server"),
        };
        self.audit.refused(manifest, &refusals);
        debug!(etag = ?validators.etag, last_modified = ?validators.last_modified, "validators");
        self.recovered();
        let record = Record {
            url: self.shown.clone(),
            node_name: self.node_name.clone(),
            etag: validators.etag.clone(),
            last_modified: validators.last_modified.clone(),
            body_hash: body_hash.clone(),
            pods: pods.clone(),
        };
        self.good = Some(Good { body_hash, validators });
        // O1: checkpointed before the merge sees it.
        let saved = self.save(record).await;
        self.events.push_back(SourceEvent::Update(
            set(pods.into_iter().map(SourcePod::new).collect()),
            Freshness::Live,
        ));
        // If the checkpoint cannot be written, the update is applied anyway: the pods are
        // what the server says now, and withholding them would run stale pods to protect
        // a copy on disk. Only durability is lost (after a restart with the server
        // unreachable, an older checkpoint or none is replayed). The failure is logged and
        // stays on /readyz until a later write succeeds (retried at each fetch).
        if let Err(e) = saved {
            self.events.push_back(SourceEvent::Failed(Box::new(e)));
        }
    }

    /// The merge's pods are current. A checkpoint write that failed is retried now.
    async fn confirmed(&mut self) {
        self.recovered();
        if let Some(record) = self.unsaved.take() {
            if let Err(e) = self.save(record).await {
                self.events.push_back(SourceEvent::Failed(Box::new(e)));
                return;
            }
            info!("checkpoint written");
        }
        self.events.push_back(SourceEvent::Confirmed);
    }

    /// Writes the checkpoint; on failure keeps the record to retry and logs loudly.
    async fn save(&mut self, record: Record) -> Result<(), Error> {
        match self.checkpoints.write_async(CHECKPOINT, record.clone()).await {
            Ok(()) => {
                self.unsaved = None;
                Ok(())
            }
            Err(e) => {
                error!(error = %e, "cannot checkpoint the manifest URL's pods; they are applied anyway, but a restart without the server will not bring them back");
                self.unsaved = Some(record);
                Err(Error::Checkpoint(e))
            }
        }
    }

    fn failed(&mut self, error: Error) {
        let message = error.to_string();
        let kept = self.good.is_some();
        if self.last_failure.as_deref() != Some(&message) {
            warn!(error = %message, last_good_kept = kept, "manifest URL fetch failed; retrying at the next interval");
            self.last_failure = Some(message);
        } else {
            debug!(error = %message, "manifest URL fetch failed again");
        }
        self.events.push_back(SourceEvent::Failed(Box::new(error)));
    }

    /// A fetched document that cannot be used: a failure, counted as a manifest error.
    fn rejected(&mut self, error: Error) {
        self.metrics.manifest_rejected(Source::Url);
        self.failed(error);
    }

    fn recovered(&mut self) {
        if self.last_failure.take().is_some() {
            info!("manifest URL answers again");
        }
    }

    /// The source as the merge task takes it.
    pub fn into_stream(self) -> EventStream {
        let stream = futures::stream::unfold(self, |mut source| async move {
            let span = source.span.clone();
            let event = source.next().instrument(span).await;
            Some((event, source))
        });
        Box::pin(stream)
    }
}

fn set(pods: Vec<SourcePod>) -> SourceUpdate {
    SourceUpdate { source: Source::Url, op: Op::Set, pods }
}

/// `interval` (at least [`MIN_INTERVAL`]) stretched by `unit` (in `[0, 1]`) of [`JITTER`].
fn jittered(interval: Duration, unit: f64) -> Duration {
    let interval = interval.max(MIN_INTERVAL);
    let factor = 1.0 + JITTER * unit.clamp(0.0, 1.0);
    Duration::try_from_secs_f64(interval.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// The instant `wait` from now; a wait too long for the clock means "practically never".
fn after(wait: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wait).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

/// XXH3-128 of a body, as 32 hex digits.
fn hash(body: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(body))
}

#[cfg(test)]
mod tests;
