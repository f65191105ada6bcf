//! The manifest URL source's decisions (`--manifest-url`, kubelet's `staticPodURL`), as
//! a pure state machine (the pod worker's shape): [`Machine::step`] takes one [`Input`]
//! (a timer, a refresh request, or the result of an action) and the time, and returns
//! the [`Action`]s to perform and when to wake it next. The agent's executor
//! (`outpost::source::url::UrlSource`) performs them (the checkpoint store, HTTP, the
//! decoder, the audit) and feeds their results back as inputs, each before any other
//! input; nothing here fetches, reads, writes or waits.
//!
//! One cycle: read the checkpoint once (O2), then wait, fetch (conditionally, with the
//! held document's validators), and for a new good document decode, checkpoint (O1) and
//! only then send its SET. Failures of any kind keep the held pods and are retried at the
//! next interval.
//!
//! The document, when rejected or decoded with warnings, is the source's one manifest
//! with problems ([`SourceEvent::Problems`], sent when that changes): rejected until a
//! good document comes or the held one is served again; warned about while the held
//! document is one that decoded with warnings (logged once: the same body is not decoded
//! again).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};
use tracing::{debug, error, info, warn};

use super::checkpoint;
use super::problems::{self, ManifestProblem};
use super::{Freshness, SourceEvent, short_sha256};
use crate::manifest::{self, Decoded, MAX_MANIFEST_BYTES};
use crate::merge::{Op, SourceUpdate};
use crate::pod::{Source, SourcePod};

/// Each wait is the interval times a factor drawn from `[1, 1 + JITTER)`, so agents
/// started together do not fetch together (kubelet's `wait.Jitter`).
pub const JITTER: f64 = 0.1;
/// The shortest interval between fetches, whatever is configured (no busy loop).
pub const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// What goes wrong with the URL source once it runs: a fetch, a document, a checkpoint.
/// Each is reported ([`SourceEvent::Failed`]) and the last good pods (if any) stay.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot fetch {url}: {detail}")]
    /// `detail` is what went wrong with the request, in words that say what to check
    /// (the executor's HTTP client describes its errors' causes).
    Fetch { url: String, detail: String },
    #[error(
        "cannot fetch {url}: the server answered {code} {reason}; only 200 is a manifest, so the last good pods (if any) are kept"
    )]
    /// An answer other than 200 (or a 304 to a conditional GET): its code and reason
    /// phrase.
    Status { url: String, code: u16, reason: String },
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
    #[error("{url}: the manifest decoder failed (a bug; please report it): {reason}")]
    /// The decoder panicked; `reason` is the panic, in words.
    Decoder { url: String, reason: String },
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::Error),
}

/// Every problem of a rejected document as `<url>:L:C: message` (`<url>: message` when
/// the position is unknown), on one line so `/readyz` keeps one line per source.
fn diagnostics(url: &str, errors: &manifest::Errors) -> String {
    let lines = problems::error_lines(&url, errors);
    format!("{} (document rejected; the last good pods, if any, are kept)", lines.join("; "))
}

/// The validators of the document the source holds, sent to make a GET conditional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// What one GET brought back.
#[derive(Debug)]
pub enum Fetched {
    /// 304: the document is what the validators describe.
    NotModified,
    /// 200, with the whole body (at most [`MAX_MANIFEST_BYTES`]).
    Document { body: Vec<u8>, validators: Validators },
}

/// What the checkpoint holds: the last good document's pods as decoded (defaulted,
/// validated), and what is needed to ask the server whether it is still current.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The URL as shown (password hidden): a checkpoint of another URL is not replayed.
    pub url: String,
    /// The pods are defaulted for this node (S2, S4, S5): another node's are not replayed.
    pub node_name: String,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// XXH3-128 of the body, 32 hex digits.
    pub body_hash: String,
    pub pods: Vec<Arc<Pod>>,
}

/// What happens to the source.
#[derive(Debug)]
pub enum Input {
    /// The source starts: its checkpoint is read first.
    Start,
    /// A wake-up time came due.
    Tick,
    /// A refresh was requested (SIGHUP, `POST /refresh`): fetch now.
    Refresh,
    /// What [`Action::ReadCheckpoint`] found.
    CheckpointRead(Result<Option<Record>, checkpoint::Error>),
    /// What [`Action::Fetch`] brought.
    Fetched(Result<Fetched, Error>),
    /// What [`Action::Decode`] made of the document.
    Decoded(Result<Decoded, Error>),
    /// Whether [`Action::WriteCheckpoint`] worked.
    Written(Result<(), checkpoint::Error>),
}

/// What the executor does, in order.
#[derive(Debug)]
pub enum Action {
    /// Read the checkpoint → [`Input::CheckpointRead`].
    ReadCheckpoint,
    /// GET the URL, conditionally if `validators` has any → [`Input::Fetched`].
    Fetch(Option<Validators>),
    /// Decode a document (up to 10 MiB of YAML: off the async workers) →
    /// [`Input::Decoded`].
    Decode(Vec<u8>),
    /// Record the document's pods that the admission policy refuses (if any).
    Audit { pods: Vec<Arc<Pod>>, sha256: String },
    /// Write the checkpoint → [`Input::Written`].
    WriteCheckpoint(Record),
    /// Count a document rejected (empty, undecodable, invalid).
    CountRejected,
    /// Hand this to the merge.
    Emit(SourceEvent),
}

/// The result of a step.
#[derive(Debug, Default)]
pub struct Step {
    pub actions: Vec<Action>,
    /// When to step again with [`Input::Tick`] if no refresh comes first.
    pub wake: Option<Instant>,
}

/// Where the source is between two steps.
#[derive(Debug, Clone)]
enum State {
    /// Nothing done yet.
    Starting,
    /// Waiting for [`Input::CheckpointRead`].
    Replaying,
    /// Nothing under way; the next fetch is at `at` (or at a refresh).
    Waiting { at: Instant },
    /// Waiting for [`Input::Fetched`].
    Fetching,
    /// Waiting for [`Input::Decoded`] of a new document.
    Decoding { good: Good, sha256: String },
    /// Waiting for [`Input::Written`] of a new document's checkpoint; its SET goes out
    /// after that (O1).
    Saving { good: Good, record: Record },
    /// Waiting for [`Input::Written`] of the held document's checkpoint, whose write had
    /// failed; the fetch confirmed the document.
    Resaving,
}

/// What the merge holds from this source.
#[derive(Debug, Clone)]
enum Held {
    /// Nothing: no good document and no checkpoint yet (M9: never seen).
    Nothing,
    /// A document that is checkpointed (replayed from the checkpoint, or fetched and
    /// written).
    Saved(Good),
    /// A fetched document whose checkpoint write failed: written again at each fetch
    /// that confirms it, until that works.
    Unsaved(Good, Record),
}

/// A document: enough to tell it again and to ask the server whether it is current.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Good {
    body_hash: String,
    validators: Validators,
}

/// The manifest URL source's state.
#[derive(Debug)]
pub struct Machine {
    /// The URL as shown (password hidden): what the checkpoint names.
    shown: String,
    node_name: String,
    interval: Duration,
    /// Draws the jitter of each wait.
    rng: fastrand::Rng,
    state: State,
    held: Held,
    /// The last failure logged at warn level (the same one again is logged at debug).
    last_failure: Option<String>,
    /// The last document fetched, when it was rejected.
    rejected: Option<ManifestProblem>,
    /// The held document's warnings, when it was decoded with some.
    warned: Option<ManifestProblem>,
    /// The manifests with problems as last sent.
    reported: Vec<ManifestProblem>,
}

impl Machine {
    /// A source of the URL shown as `shown`, fetched every `interval` (jittered with
    /// draws from `seed`).
    pub fn new(shown: String, node_name: String, interval: Duration, seed: u64) -> Machine {
        Machine {
            shown,
            node_name,
            interval,
            rng: fastrand::Rng::with_seed(seed),
            state: State::Starting,
            held: Held::Nothing,
            last_failure: None,
            rejected: None,
            warned: None,
            reported: Vec::new(),
        }
    }

    /// Applies `input` at `now`; returns what to do and when to wake next.
    pub fn step(&mut self, input: Input, now: Instant) -> Step {
        let mut out = Vec::new();
        let state = std::mem::replace(&mut self.state, State::Starting);
        self.state = self.transition(state, input, now, &mut out);
        self.report_problems(&mut out);
        let wake = match self.state {
            State::Waiting { at } => Some(at),
            _ => None,
        };
        Step { actions: out, wake }
    }

    fn transition(
        &mut self,
        state: State,
        input: Input,
        now: Instant,
        out: &mut Vec<Action>,
    ) -> State {
        match (state, input) {
            (State::Starting, Input::Start) => {
                out.push(Action::ReadCheckpoint);
                State::Replaying
            }
            (State::Replaying, Input::CheckpointRead(read)) => {
                self.replay(read, out);
                // The first fetch follows at once.
                State::Waiting { at: now }
            }
            (State::Waiting { at }, Input::Tick) if at <= now => self.fetch(out),
            (State::Waiting { .. }, Input::Refresh) => {
                info!("refresh requested; fetching now");
                self.fetch(out)
            }
            (State::Fetching, Input::Fetched(fetched)) => match fetched {
                Ok(Fetched::NotModified) => {
                    debug!("not modified");
                    self.confirmed(now, out)
                }
                Ok(Fetched::Document { body, validators }) => {
                    self.document(body, validators, now, out)
                }
                Err(e) => {
                    self.failed(e, out);
                    self.wait(now)
                }
            },
            (State::Decoding { good, sha256 }, Input::Decoded(decoded)) => match decoded {
                Ok(Decoded { pods, warnings }) => {
                    let lines = problems::warning_lines(&self.shown, &warnings);
                    if !lines.is_empty() {
                        warn!(
                            warnings = lines.len(),
                            "manifest URL document accepted with warnings; its pods run, but these fields are not honoured as written:\n{}",
                            lines.join("\n")
                        );
                    }
                    self.warned = ManifestProblem::warned(&self.shown, &lines);
                    self.decoded(good, sha256, pods, out)
                }
                Err(e) => {
                    self.rejected(e, out);
                    self.wait(now)
                }
            },
            (State::Saving { good, record }, Input::Written(written)) => {
                let pods = record.pods.iter().cloned().map(SourcePod::new).collect();
                out.push(Action::Emit(SourceEvent::Update(set(pods), Freshness::Live)));
                match written {
                    Ok(()) => self.held = Held::Saved(good),
                    // The update is applied anyway: the pods are what the server says
                    // now, and withholding them would run stale pods to protect a copy on
                    // disk. Only durability is lost (after a restart with the server
                    // unreachable, an older checkpoint or none is replayed). The failure
                    // stays on /readyz until a later write works (retried at each fetch).
                    Err(e) => {
                        error!(error = %e, "cannot checkpoint the manifest URL's pods; they are applied anyway, but a restart without the server will not bring them back");
                        self.held = Held::Unsaved(good, record);
                        out.push(Action::Emit(SourceEvent::Failed(Box::new(Error::Checkpoint(e)))));
                    }
                }
                self.wait(now)
            }
            (State::Resaving, Input::Written(written)) => {
                match written {
                    Ok(()) => {
                        info!("checkpoint written");
                        if let Held::Unsaved(good, _) =
                            std::mem::replace(&mut self.held, Held::Nothing)
                        {
                            self.held = Held::Saved(good);
                        }
                        out.push(Action::Emit(SourceEvent::Confirmed));
                    }
                    Err(e) => {
                        error!(error = %e, "cannot checkpoint the manifest URL's pods; they are applied anyway, but a restart without the server will not bring them back");
                        out.push(Action::Emit(SourceEvent::Failed(Box::new(Error::Checkpoint(e)))));
                    }
                }
                self.wait(now)
            }
            (state, input) => {
                if !matches!((&state, &input), (State::Waiting { .. }, Input::Tick)) {
                    warn!(
                        ?state,
                        input = input.kind(),
                        "the URL source got an input it does not expect now; ignored"
                    );
                }
                state
            }
        }
    }

    /// O2: the checkpoint of this URL and node, if there is one, becomes the SET.
    fn replay(&mut self, read: Result<Option<Record>, checkpoint::Error>, out: &mut Vec<Action>) {
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
                self.held = Held::Saved(Good {
                    body_hash: record.body_hash,
                    validators: Validators {
                        etag: record.etag,
                        last_modified: record.last_modified,
                    },
                });
                let pods = record.pods.into_iter().map(SourcePod::new).collect();
                out.push(Action::Emit(SourceEvent::Update(set(pods), Freshness::Checkpoint)));
            }
            Err(e) => {
                // A corrupt checkpoint is not fatal: the next good fetch replaces it.
                error!(error = %e, "cannot use the manifest URL's checkpoint; going on without it");
                out.push(Action::Emit(SourceEvent::Failed(Box::new(Error::Checkpoint(e)))));
            }
        }
    }

    fn fetch(&self, out: &mut Vec<Action>) -> State {
        out.push(Action::Fetch(self.good().map(|g| g.validators.clone())));
        State::Fetching
    }

    /// A 200: unchanged (confirm), empty (fail), or new (decode).
    fn document(
        &mut self,
        body: Vec<u8>,
        validators: Validators,
        now: Instant,
        out: &mut Vec<Action>,
    ) -> State {
        let body_hash = hash(&body);
        if let Some(good) = self.good_mut().filter(|g| g.body_hash == body_hash) {
            debug!("document unchanged");
            // The server may have changed its validators for the same bytes: ask with
            // the new ones next time.
            good.validators = validators;
            return self.confirmed(now, out);
        }
        if body.trim_ascii().is_empty() {
            // kubelet sends an empty SET for a zero-length body (and reports an error):
            // an empty answer from a broken server or proxy would wipe every pod. Here
            // it is a failure; an empty PodList is how a server says "no pods".
            self.rejected(Error::Empty { url: self.shown.clone() }, out);
            return self.wait(now);
        }
        let sha256 = short_sha256(&body);
        out.push(Action::Decode(body));
        State::Decoding { good: Good { body_hash, validators }, sha256 }
    }

    /// A new good document: audited, checkpointed (O1), and sent once that is done.
    fn decoded(
        &mut self,
        good: Good,
        sha256: String,
        pods: Vec<Pod>,
        out: &mut Vec<Action>,
    ) -> State {
        let pods: Vec<Arc<Pod>> = pods.into_iter().map(Arc::new).collect();
        info!(pods = pods.len(), "manifest URL document changed");
        out.push(Action::Audit { pods: pods.clone(), sha256 });
        debug!(etag = ?good.validators.etag, last_modified = ?good.validators.last_modified, "validators");
        self.recovered();
        let record = Record {
            url: self.shown.clone(),
            node_name: self.node_name.clone(),
            etag: good.validators.etag.clone(),
            last_modified: good.validators.last_modified.clone(),
            body_hash: good.body_hash.clone(),
            pods,
        };
        out.push(Action::WriteCheckpoint(record.clone()));
        State::Saving { good, record }
    }

    /// What the merge holds is current (a rejected document is no longer served). A
    /// checkpoint write that failed is retried first.
    fn confirmed(&mut self, now: Instant, out: &mut Vec<Action>) -> State {
        self.recovered();
        self.rejected = None;
        if let Held::Unsaved(_, record) = &self.held {
            out.push(Action::WriteCheckpoint(record.clone()));
            return State::Resaving;
        }
        out.push(Action::Emit(SourceEvent::Confirmed));
        self.wait(now)
    }

    fn failed(&mut self, error: Error, out: &mut Vec<Action>) {
        let message = error.to_string();
        let kept = !matches!(self.held, Held::Nothing);
        if self.last_failure.as_deref() != Some(&message) {
            warn!(error = %message, last_good_kept = kept, "manifest URL fetch failed; retrying at the next interval");
            self.last_failure = Some(message);
        } else {
            debug!(error = %message, "manifest URL fetch failed again");
        }
        out.push(Action::Emit(SourceEvent::Failed(Box::new(error))));
    }

    /// A fetched document that cannot be used: a failure, counted as a manifest error.
    fn rejected(&mut self, error: Error, out: &mut Vec<Action>) {
        out.push(Action::CountRejected);
        let lines = match &error {
            Error::Manifest { url, errors } => problems::error_lines(url, errors),
            other => vec![other.to_string()],
        };
        self.rejected = ManifestProblem::rejected(&self.shown, &lines);
        self.failed(error, out);
    }

    /// Sends the document's problems if they changed: its rejection, else the held
    /// document's warnings.
    fn report_problems(&mut self, out: &mut Vec<Action>) {
        let now: Vec<ManifestProblem> =
            self.rejected.iter().chain(&self.warned).take(1).cloned().collect();
        if now != self.reported {
            self.reported = now.clone();
            out.push(Action::Emit(SourceEvent::Problems(now)));
        }
    }

    fn recovered(&mut self) {
        if self.last_failure.take().is_some() {
            info!("manifest URL answers again");
        }
    }

    /// The next fetch, an interval (jittered) from now.
    fn wait(&mut self, now: Instant) -> State {
        State::Waiting { at: after(now, jittered(self.interval, self.rng.f64())) }
    }

    fn good(&self) -> Option<&Good> {
        match &self.held {
            Held::Nothing => None,
            Held::Saved(good) | Held::Unsaved(good, _) => Some(good),
        }
    }

    fn good_mut(&mut self) -> Option<&mut Good> {
        match &mut self.held {
            Held::Nothing => None,
            Held::Saved(good) | Held::Unsaved(good, _) => Some(good),
        }
    }
}

impl Input {
    /// The input's kind, for logs.
    fn kind(&self) -> &'static str {
        match self {
            Input::Start => "start",
            Input::Tick => "tick",
            Input::Refresh => "refresh",
            Input::CheckpointRead(_) => "checkpoint read",
            Input::Fetched(_) => "fetched",
            Input::Decoded(_) => "decoded",
            Input::Written(_) => "written",
        }
    }
}

fn set(pods: Vec<SourcePod>) -> SourceUpdate {
    SourceUpdate { source: Source::Url, op: Op::Set, pods }
}

/// `interval` (at least [`MIN_INTERVAL`]) stretched by `unit` (in `[0, 1]`) of [`JITTER`].
pub fn jittered(interval: Duration, unit: f64) -> Duration {
    let interval = interval.max(MIN_INTERVAL);
    let factor = 1.0 + JITTER * unit.clamp(0.0, 1.0);
    Duration::try_from_secs_f64(interval.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// The instant `wait` after `now`; a wait too long for the clock means "practically never".
fn after(now: Instant, wait: Duration) -> Instant {
    now.checked_add(wait).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

/// XXH3-128 of a body, as 32 hex digits.
pub fn hash(body: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(body))
}

#[cfg(test)]
mod tests;
