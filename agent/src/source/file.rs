//! The manifest directory source (kubelet's `staticPodPath`), driven by kernel events.
//!
//! A full scan happens only at start, after the kernel's event queue overflowed, and when
//! the directory itself is deleted, recreated or replaced (a rename over it, a symlink to
//! it swapped, a `..data` symlink swapped inside it). Everything else is incremental: one
//! event, one file re-read. Every change yields a SET of the whole directory (as kubelet's
//! file source does); the merge turns it into deltas cheaply.
//!
//! - `outpost_core::source::file`: the decisions, a pure state machine (`Machine::step`);
//! - this module: its executor, which performs the actions with the kernel watch and the
//!   filesystem and feeds the results back;
//! - `watch`: the kernel watches (fanotify, inotify);
//! - `audited`: the audit log's side of the changes it acts on.

mod audited;
pub mod watch;

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::jiff::Timestamp;
use outpost_core::manifest::MAX_MANIFEST_BYTES;
use outpost_core::merge::SourceUpdate;
use outpost_core::pod::Source;
use outpost_core::source::file::{
    Action, Cause, Change, Content, Found, Input, Link, Listing, Machine, Now, Target,
};
use tracing::{debug, info, warn};

use self::watch::{Preference, Scope, WatchId, Watcher};
use super::{EventStream, Freshness, SourceEvent};
use crate::apiserver::events::{self, EventType, Recorder, reason};
use crate::audit::ManifestAudit;
use crate::source::metrics::SourceMetrics;
use crate::source::problems::ManifestProblem;
use outpost_core::source::file::watch::Event;

/// Errors that stop the file source. Problems with single files never do: they are
/// reported and the file is skipped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot start watching manifests: {0}")]
    Watch(#[from] watch::Error),
}

/// Configuration of the file source.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--manifest-dir`: a directory, or a single manifest file.
    pub path: PathBuf,
    pub node_name: String,
    pub watcher: Preference,
}

/// The manifest directory source: the executor of its state machine ([`Machine`]).
#[derive(Debug)]
pub struct FileSource {
    machine: Machine,
    watcher: Watcher,
    node_name: String,
    /// Results of actions performed, not stepped yet. Each is stepped before any other
    /// input (the machine waits for it).
    results: VecDeque<Input>,
    /// Kernel events taken from the queue while a file was read (to name its writer),
    /// stepped as the next batch.
    taken: Vec<Event>,
    /// When the machine wants a [`Input::Tick`].
    wake: Option<std::time::Instant>,
    /// The SET to hand out (a later one replaces an earlier one not handed out yet).
    set: Option<SourceUpdate>,
    /// The manifests with problems to hand out, likewise.
    problems: Option<Vec<ManifestProblem>>,
    errors_total: u64,
    /// Where rejected manifests are reported (a `FailedValidation` event on the node).
    events: Recorder,
    /// Counts rejected manifests; told the watcher's backend.
    metrics: SourceMetrics,
    /// Where every change acted on is recorded, with its writer.
    audit: ManifestAudit,
}

impl FileSource {
    /// Sets up the kernel watches. Nothing is read until the first [`FileSource::next`]
    /// (by then the events, metrics and audit are set).
    pub fn new(config: Config) -> Result<FileSource, Error> {
        let watcher = Watcher::new(config.watcher)?;
        let target = locate(&config.path);
        let mut source = FileSource {
            machine: Machine::new(config.path.clone(), target, config.node_name.clone()),
            watcher,
            node_name: config.node_name,
            results: VecDeque::new(),
            taken: Vec::new(),
            wake: None,
            set: None,
            problems: None,
            errors_total: 0,
            events: Recorder::default(),
            metrics: SourceMetrics::default(),
            audit: ManifestAudit::default(),
        };
        // The first step only watches; its result (and the reads it leads to) are
        // stepped by the first `next`.
        source.step(Input::Start);
        // After the first watch: Auto may fall back to inotify on a filesystem that
        // cannot report file handles.
        info!(path = %config.path.display(), backend = %source.watcher.backend(), "watching manifests");
        Ok(source)
    }

    /// Reports rejected manifests and manifests with warnings to `events` (else to a
    /// recorder of its own).
    pub fn with_events(mut self, events: Recorder) -> FileSource {
        self.events = events;
        self
    }

    /// Counts rejected manifests in `metrics` and tells it the watcher's backend.
    pub fn with_metrics(mut self, metrics: SourceMetrics) -> FileSource {
        metrics.manifest_watcher(self.backend());
        self.metrics = metrics;
        self
    }

    /// Records every change it acts on in `audit` (else in a log of its own).
    pub fn with_audit(mut self, audit: ManifestAudit) -> FileSource {
        self.audit = audit;
        self
    }

    /// The kernel interface in use.
    pub fn backend(&self) -> watch::Backend {
        self.watcher.backend()
    }

    /// Files skipped or rejected so far (each rejection counted once per content).
    pub fn errors_total(&self) -> u64 {
        self.errors_total
    }

    /// Waits for the directory's content to change and returns it as a SET. The first
    /// call returns the initial scan at once (S11: a missing directory is an empty SET).
    pub async fn next(&mut self) -> Result<SourceUpdate, Error> {
        loop {
            if let SourceEvent::Update(set, _) = self.next_event().await? {
                return Ok(set);
            }
        }
    }

    /// The next SET, or the next list of manifests with problems when only that changed
    /// (a SET goes first when both did).
    async fn next_event(&mut self) -> Result<SourceEvent, Error> {
        loop {
            while let Some(input) = self.results.pop_front() {
                self.step(input);
            }
            if let Some(set) = self.set.take() {
                return Ok(SourceEvent::Update(set, Freshness::Live));
            }
            if let Some(problems) = self.problems.take() {
                return Ok(SourceEvent::Problems(problems));
            }
            let input = if self.taken.is_empty() {
                tokio::select! {
                    batch = self.watcher.next_batch() => Input::Events(batch?),
                    () = sleep_until(self.wake) => Input::Tick,
                }
            } else {
                Input::Events(std::mem::take(&mut self.taken))
            };
            self.step(input);
        }
    }

    /// Steps the machine and performs what it says.
    fn step(&mut self, input: Input) {
        // Clock: both: `at` (monotonic) for the debounce and retries, `wall` for what is recorded.
        let now = Now { at: tokio::time::Instant::now().into_std(), wall: Timestamp::now() };
        let step = self.machine.step(input, now);
        self.wake = step.wake;
        for action in step.actions {
            self.perform(action);
        }
    }

    /// Whoever wrote `name` after the event that asked for this read, if the kernel
    /// queued such a write by the time the file was read: what was read may be theirs,
    /// so the audit names them (a rewrite and then a change in quick succession were
    /// both put on the first writer). The events taken are stepped next, as a batch.
    fn last_writer(&mut self, name: &OsStr) -> Option<Cause> {
        match self.watcher.queued() {
            Ok(events) => self.taken.extend(events),
            Err(e) => debug!(error = %e, "cannot look at the queued manifest events now"),
        }
        self.taken.iter().rev().find_map(|event| match event {
            Event::Entry { name: Some(entry), mask, pid: Some(pid), .. }
                if entry == name && (mask.modify || mask.close_write) =>
            {
                Some(Cause::Event { pid: Some(*pid) })
            }
            _ => None,
        })
    }

    fn perform(&mut self, action: Action) {
        match action {
            Action::Locate(path) => self.results.push_back(Input::Located(locate(&path))),
            Action::Arm { dir, parent } => {
                // Only entries of the parent: the directory's siblings' writes are none of ours.
                let parent = parent.and_then(|p| self.watcher.add_dir(&p, Scope::Entries).ok());
                let dir = dir.and_then(|dir| match self.watcher.add_dir(&dir, Scope::Contents) {
                    Ok(id) => {
                        // Auto settles on a backend at the first watch that works.
                        self.metrics.manifest_watcher(self.watcher.backend());
                        Some(id)
                    }
                    Err(e) => {
                        debug!(dir = %dir.display(), error = %e, "cannot watch the manifest directory yet");
                        None
                    }
                });
                self.results.push_back(Input::Armed { dir, parent });
            }
            Action::Unwatch(id, scope) => {
                let _ = self.watcher.remove(id, scope);
            }
            Action::List(dir) => self.results.push_back(Input::Listed(list(&dir))),
            Action::Read { path, name, cause } => {
                let content = content(&path);
                let cause = self.last_writer(&name).unwrap_or(cause);
                let found = Found { content, link: link(&path), name, cause };
                self.results.push_back(Input::Read(found));
            }
            Action::Look { dir, names } => {
                let looked = names.into_iter().map(|name| {
                    let link_or_dir = is_link_or_dir(&dir.join(&name));
                    (name, link_or_dir)
                });
                self.results.push_back(Input::Looked(looked.collect()));
            }
            Action::WatchLinks { drop, add } => {
                for id in drop {
                    let _ = self.watcher.remove(id, Scope::Contents);
                }
                let linked =
                    add.into_iter().filter_map(|(dir, links)| self.watch_links(&dir, links));
                let linked = linked.collect();
                self.results.push_back(Input::Linked(linked));
            }
            Action::Record(change) => self.record(change),
            Action::Warn { path, warnings } => self.warn(&path, &warnings),
            Action::Problems(problems) => self.problems = Some(problems),
            Action::Send(set) => self.set = Some(set),
        }
    }

    fn watch_links(&mut self, dir: &Path, links: Vec<Link>) -> Option<(WatchId, Vec<Link>)> {
        match self.watcher.add_dir(dir, Scope::Contents) {
            Ok(id) => Some((id, links)),
            Err(e) => {
                warn!(dir = %dir.display(), error = %e, "cannot watch a symlinked manifest's directory");
                None
            }
        }
    }

    /// Records a change; a rejection is also counted and reported on the node.
    fn record(&mut self, change: Change) {
        if let Some(report) = change.error.as_deref() {
            self.errors_total += 1;
            self.metrics.manifest_rejected(Source::File);
            self.events.emit(
                &events::node_ref(&self.node_name),
                EventType::Warning,
                reason::FAILED_VALIDATION,
                format!("Error validating static pod manifest {report}"),
            );
        }
        self.audited(change);
    }

    /// Logs the warnings about a manifest's new content, and reports the first on the
    /// node (a `ManifestWarning` event). Once per content: unchanged bytes are not
    /// decoded again.
    fn warn(&self, path: &Path, warnings: &[String]) {
        let Some(first) = warnings.first() else { return };
        warn!(
            file = %path.display(),
            warnings = warnings.len(),
            "manifest accepted with warnings; its pods run, but these fields are not honoured as written:\n{}",
            warnings.join("\n")
        );
        let more = match warnings.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        self.events.emit(
            &events::node_ref(&self.node_name),
            EventType::Warning,
            events::MANIFEST_WARNING,
            format!("Static pod manifest accepted with warnings: {first}{more}"),
        );
    }

    /// The source as the merge task takes it. A file source is always live: the
    /// directory is local, so there is nothing to checkpoint.
    pub fn into_stream(self) -> EventStream {
        let stream = futures::stream::unfold(self, |mut source| async move {
            let event = match source.next_event().await {
                Ok(event) => event,
                Err(e) => SourceEvent::Failed(Box::new(e)),
            };
            Some((event, source))
        });
        Box::pin(stream)
    }
}

/// What `path` names: a file names one manifest; anything else (a directory, or nothing
/// yet) a directory.
fn locate(path: &Path) -> Target {
    match fs::metadata(path) {
        Ok(meta) if meta.is_file() => Target::File {
            dir: path.parent().map(Path::to_path_buf).unwrap_or_else(|| ".".into()),
            name: path.file_name().map(OsStr::to_owned).unwrap_or_default(),
        },
        _ => Target::Dir(path.to_path_buf()),
    }
}

fn list(dir: &Path) -> Listing {
    match fs::read_dir(dir) {
        Ok(entries) => Listing::Names(entries.flatten().map(|e| e.file_name()).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Listing::Missing,
        Err(e) => Listing::Failed(e.to_string()),
    }
}

/// A manifest's content; `Missing` only if the entry itself is gone (a dangling
/// symlink is there, and unreadable).
fn content(path: &Path) -> Content {
    match read_manifest(path) {
        Ok(bytes) => Content::Bytes(bytes),
        Err(e) if e.kind() == io::ErrorKind::NotFound && fs::symlink_metadata(path).is_err() => {
            Content::Missing
        }
        Err(e) => Content::Unreadable(e.to_string()),
    }
}

/// Where a symlink points, if it is one and resolves.
fn link(path: &Path) -> Option<PathBuf> {
    let symlink = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    symlink.then(|| fs::canonicalize(path).ok()).flatten()
}

fn is_link_or_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink() || m.is_dir())
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

/// Reads a manifest without blocking on FIFOs or devices, capped at S8's limit + 1 byte
/// (so an oversized file is rejected by the decoder without reading all of it).
pub fn read_manifest(path: &Path) -> io::Result<Vec<u8>> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what}; only regular files are manifests"),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_MANIFEST_BYTES as u64) as usize);
    file.take(MAX_MANIFEST_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}
