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
//!
//! - `outpost_core::source::url`: the decisions, a pure state machine (`Machine::step`);
//! - `client`: the HTTP client and one conditional GET;
//! - this module: the executor, which performs the state machine's actions (the
//!   checkpoint store, HTTP, the decoder, the audit) and feeds the results back.

mod client;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use outpost_core::manifest::{self, Origin};
use outpost_core::pod::Source;
use outpost_core::source::url::{Action, Error as Failure, Input, Machine, Record};
use tracing::Instrument;

use self::client::Client;
use crate::audit::admission::Manifest;
use crate::audit::{self, ManifestAudit, ManifestSource, Writer};
use crate::checkpoint::{self, Checkpoints};
use crate::source::metrics::SourceMetrics;
use crate::source::{EventStream, Refresh, SourceEvent};

pub use self::client::{CONNECT_TIMEOUT, MAX_REDIRECTS, SYSTEM_CA_BUNDLE, TOTAL_TIMEOUT};
pub use outpost_core::source::url::{JITTER, MIN_INTERVAL};

/// The checkpoint's name: `<state-dir>/checkpoints/url.json`.
pub const CHECKPOINT: &str = "url";

/// Errors of the source's configuration and HTTP client. What goes wrong once it runs
/// (a fetch, a document, a checkpoint) is `outpost_core::source::url::Error`.
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
    #[error("more than {max} redirects; point --manifest-url at the document itself")]
    TooManyRedirects { max: usize },
    #[error("refusing a redirect from https to {to}: it would drop TLS")]
    Downgrade { to: String },
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

/// The URL source: the executor of its state machine ([`Machine`]).
#[derive(Debug)]
pub struct UrlSource {
    machine: Machine,
    /// The URL as configured: hashed into the pods' UIDs (S5).
    url: String,
    /// The URL as logs and messages show it (password hidden).
    shown: String,
    client: Client,
    node_name: String,
    checkpoints: Checkpoints,
    refresh: Refresh,
    span: tracing::Span,
    /// Results of actions performed, not stepped yet (the machine waits for each).
    results: VecDeque<Input>,
    /// When the machine wants an [`Input::Tick`].
    wake: Option<std::time::Instant>,
    /// Events for the merge not handed out yet.
    events: VecDeque<SourceEvent>,
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
        let machine = Machine::new(
            shown.clone(),
            config.node_name.clone(),
            config.interval,
            fastrand::u64(..),
        );
        Ok(UrlSource {
            machine,
            url: config.url,
            shown,
            client,
            node_name: config.node_name,
            checkpoints: config.checkpoints,
            refresh: config.refresh,
            span,
            results: VecDeque::from([Input::Start]),
            wake: None,
            events: VecDeque::new(),
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
            let input = match self.results.pop_front() {
                Some(input) => input,
                None => tokio::select! {
                    () = sleep_until(self.wake) => Input::Tick,
                    () = self.refresh.requested() => Input::Refresh,
                },
            };
            let step = self.machine.step(input, tokio::time::Instant::now().into_std());
            self.wake = step.wake;
            for action in step.actions {
                self.perform(action).await;
            }
        }
    }

    async fn perform(&mut self, action: Action) {
        match action {
            Action::ReadCheckpoint => {
                let checkpoints = self.checkpoints.clone();
                let read =
                    tokio::task::spawn_blocking(move || checkpoints.read::<Record>(CHECKPOINT))
                        .await
                        .unwrap_or_else(|e| {
                            Err(checkpoint::Error::Read {
                                path: self.checkpoints.path(CHECKPOINT),
                                source: std::io::Error::other(e),
                            })
                        });
                self.results.push_back(Input::CheckpointRead(read.map_err(Into::into)));
            }
            Action::Fetch(validators) => {
                let fetched = self.client.fetch(validators.as_ref()).await;
                self.results.push_back(Input::Fetched(fetched));
            }
            Action::Decode(body) => {
                let (url, node) = (self.url.clone(), self.node_name.clone());
                let decoded = tokio::task::spawn_blocking(move || {
                    manifest::decode_with_warnings(&body, Origin::Url(&url), &node)
                })
                .await;
                let url = self.shown.clone();
                let decoded = match decoded {
                    Ok(Ok(decoded)) => Ok(decoded),
                    Ok(Err(errors)) => Err(Failure::Manifest { url, errors }),
                    // The decoder panicked: a bug, reported as this document's failure.
                    Err(panic) => Err(Failure::Decoder { url, reason: panic.to_string() }),
                };
                self.results.push_back(Input::Decoded(decoded));
            }
            Action::Audit { pods, sha256 } => {
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
            }
            Action::WriteCheckpoint(record) => {
                let written = self.checkpoints.write_async(CHECKPOINT, record).await;
                self.results.push_back(Input::Written(written.map_err(Into::into)));
            }
            Action::CountRejected => self.metrics.manifest_rejected(Source::Url),
            Action::Emit(event) => self.events.push_back(event),
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

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
