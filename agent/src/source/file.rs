//! The manifest directory source (kubelet's `staticPodPath`), driven by kernel events.
//!
//! A full scan happens only at start, after the kernel's event queue overflowed, and when
//! the directory itself is deleted, recreated or replaced (a rename over it, a symlink to
//! it swapped, a `..data` symlink swapped inside it). Everything else is incremental: one
//! event, one file re-read. Every change yields a SET of the whole directory (as kubelet's
//! file source does); the merge turns it into deltas cheaply.

mod audited;
pub mod manifests;
pub mod watch;

use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use outpost_core::manifest::MAX_MANIFEST_BYTES;
use outpost_core::merge::{Op, SourceUpdate};
use outpost_core::pod::Source;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use self::manifests::{Manifests, Outcome};
use self::watch::{Event, Mask, Preference, Scope, WatchId, Watcher};
use super::{EventStream, Freshness, SourceEvent};
use crate::apiserver::events::{self, EventType, Recorder, reason};
use crate::audit::{self, Action, ManifestAudit};
use crate::source::metrics::SourceMetrics;

/// How long a file may keep changing without being closed before it is read anyway.
const MODIFY_QUIET: Duration = Duration::from_millis(250);
/// Backoff bounds while the directory (and its parent) cannot be watched.
const REWATCH_MIN: Duration = Duration::from_millis(250);
const REWATCH_MAX: Duration = Duration::from_secs(30);

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

/// What the source watches: the directory's entries, or one file's entry in its parent.
#[derive(Debug, Clone)]
enum Target {
    Dir(PathBuf),
    File { dir: PathBuf, name: OsString },
}

impl Target {
    /// A file names one manifest; anything else (a directory, or nothing yet) a directory.
    fn of(path: &Path) -> Target {
        match fs::metadata(path) {
            Ok(meta) if meta.is_file() => Target::File {
                dir: path.parent().map(Path::to_path_buf).unwrap_or_else(|| ".".into()),
                name: path.file_name().map(OsStr::to_owned).unwrap_or_default(),
            },
            _ => Target::Dir(path.to_path_buf()),
        }
    }

    fn dir(&self) -> &Path {
        match self {
            Target::Dir(dir) | Target::File { dir, .. } => dir,
        }
    }

    /// Whether an entry of the directory is a manifest this source reads (S10).
    fn wants(&self, name: &OsStr) -> bool {
        match self {
            Target::File { name: file, .. } => name == file,
            Target::Dir(_) => is_manifest_name(name),
        }
    }
}

/// S10: not a dotfile; `.yaml`, `.yml`, `.json` or no extension.
pub fn is_manifest_name(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    if name.starts_with('.') || name.is_empty() {
        return false;
    }
    match Path::new(name).extension().and_then(OsStr::to_str) {
        None => true,
        Some(ext) => matches!(ext, "yaml" | "yml" | "json"),
    }
}

/// Why a file is looked at: a kernel event (naming the writer's PID with fanotify), or
/// a full rescan (nothing names a writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Event { pid: Option<i32> },
    Rescan,
}

/// The manifest directory source: a state machine stepped by [`FileSource::next`].
#[derive(Debug)]
pub struct FileSource {
    /// `--manifest-dir` as configured.
    path: PathBuf,
    node_name: String,
    target: Target,
    watcher: Watcher,
    manifests: Manifests,
    /// The watch on the target directory, while it exists.
    dir_watch: Option<WatchId>,
    /// The watch on the directory's parent, to see the directory come, go or be replaced.
    parent_watch: Option<WatchId>,
    /// Watches on directories holding the targets of symlinked manifests, with the
    /// manifests that point into each: (target file name, manifest name).
    link_watches: HashMap<WatchId, Vec<(OsString, OsString)>>,
    /// Files written but not closed yet: read when quiet for [`MODIFY_QUIET`].
    pending: HashMap<OsString, (Instant, Cause)>,
    /// Set when the whole directory must be read again (start, overflow, replaced dir).
    rescan: bool,
    rewatch_at: Option<(Instant, Duration)>,
    /// Whether a SET has been sent at all, and whether the content changed since the last.
    sent: bool,
    dirty: bool,
    errors_total: u64,
    /// Where rejected manifests are reported (a `FailedValidation` event on the node).
    events: Recorder,
    /// Counts rejected manifests; told the watcher's backend.
    metrics: SourceMetrics,
    /// Where every change acted on is recorded, with its writer.
    audit: ManifestAudit,
}

impl FileSource {
    /// Sets up the kernel watch. Nothing is read until the first [`FileSource::next`].
    pub fn new(config: Config) -> Result<FileSource, Error> {
        let watcher = Watcher::new(config.watcher)?;
        let target = Target::of(&config.path);
        let mut source = FileSource {
            manifests: Manifests::new(target.dir().to_path_buf(), config.node_name.clone()),
            path: config.path.clone(),
            node_name: config.node_name,
            target,
            watcher,
            dir_watch: None,
            parent_watch: None,
            link_watches: HashMap::new(),
            pending: HashMap::new(),
            rescan: true,
            rewatch_at: None,
            sent: false,
            dirty: false,
            errors_total: 0,
            events: Recorder::default(),
            metrics: SourceMetrics::default(),
            audit: ManifestAudit::default(),
        };
        source.watch_dirs();
        // After the first watch: Auto may fall back to inotify on a filesystem that
        // cannot report file handles.
        info!(path = %config.path.display(), backend = %source.watcher.backend(), "watching manifests");
        Ok(source)
    }

    /// Reports rejected manifests to `events` (else to a recorder of its own).
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
            if self.rescan {
                self.rescan = false;
                self.dirty |= self.scan();
            }
            if self.dirty || !self.sent {
                self.dirty = false;
                self.sent = true;
                return Ok(SourceUpdate {
                    source: Source::File,
                    op: Op::Set,
                    pods: self.manifests.pods(),
                });
            }
            let deadline = self.next_deadline();
            let batch = tokio::select! {
                batch = self.watcher.next_batch() => batch?,
                () = sleep_until(deadline) => Vec::new(),
            };
            for event in batch {
                self.dirty |= self.handle(event);
            }
            self.dirty |= self.read_quiet_files();
            if self.rewatch_at.is_some_and(|(at, _)| at <= Instant::now()) {
                self.watch_dirs();
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let quiet = self.pending.values().map(|(at, _)| *at + MODIFY_QUIET).min();
        let rewatch = self.rewatch_at.map(|(at, _)| at);
        quiet.into_iter().chain(rewatch).min()
    }

    /// Applies one kernel event; true if the SET changed.
    fn handle(&mut self, event: Event) -> bool {
        match event {
            Event::Overflow => {
                warn!("kernel event queue overflowed; rescanning the manifest directory");
                self.rescan = true;
                false
            }
            Event::WatchGone(id) => {
                self.link_watches.remove(&id);
                if Some(id) == self.parent_watch {
                    self.parent_watch = None;
                }
                if Some(id) == self.dir_watch {
                    self.dir_watch = None;
                    self.directory_replaced("its watch was removed by the kernel");
                } else if self.dir_watch.is_none() {
                    self.watch_dirs();
                }
                false
            }
            Event::Entry { dir, name, mask, pid } => {
                self.entry(dir, name, mask, Cause::Event { pid })
            }
        }
    }

    fn entry(&mut self, dir: WatchId, name: Option<OsString>, mask: Mask, cause: Cause) -> bool {
        // One directory can be several of these at once (watch ids are per directory).
        let mut changed = false;
        if Some(dir) == self.parent_watch {
            let ours = self.target.dir().file_name();
            if name.is_some() && name.as_deref() == ours && touches_entry(mask) {
                self.directory_replaced("the directory entry changed in its parent");
            }
        }
        if Some(dir) == self.dir_watch {
            match &name {
                Some(name) => changed |= self.dir_entry(name, mask, cause),
                None if mask.self_deleted || mask.self_moved => {
                    self.directory_replaced("the directory was deleted or moved");
                }
                None => {}
            }
        }
        if let (Some(links), Some(name)) = (self.link_watches.get(&dir), &name) {
            // A symlinked manifest's target changed: re-read the manifests pointing at it.
            let names: Vec<OsString> =
                links.iter().filter(|(t, _)| t == name).map(|(_, m)| m.clone()).collect();
            for m in names {
                changed |= self.read(&m, cause);
            }
        }
        changed
    }

    /// An event about one entry of the manifest directory. The kernel's flags say that
    /// something happened, not what the entry is now: fanotify merges queued events
    /// (`rm a; write a` can arrive as one create|delete event) and may reorder them. So
    /// the entry is looked at, not the flags trusted.
    fn dir_entry(&mut self, name: &OsStr, mask: Mask, cause: Cause) -> bool {
        if !self.target.wants(name) {
            // A directory or symlink beside symlinked manifests changing (`..data`
            // swapped, as ConfigMap volumes do) can change what they point at.
            if !self.link_watches.is_empty()
                && touches_entry(mask)
                && (mask.is_dir || is_link_or_dir(&self.target.dir().join(name)))
            {
                debug!(entry = ?name, "symlinked content swapped; rescanning");
                self.rescan = true;
            }
            return false;
        }
        let only_modified =
            mask.modify && !(mask.close_write || touches_entry(mask) || mask.attrib);
        if only_modified {
            // Still being written: read once it is closed, or quiet for a while.
            self.pending.insert(name.to_owned(), (Instant::now(), cause));
            return false;
        }
        self.pending.remove(name);
        if (mask.create || mask.moved_to)
            && !self.manifests.contains(name)
            && is_symlink(&self.manifests.path_of(name))
        {
            // A new symlinked manifest: its target's directory needs a watch too.
            self.rescan = true;
            return false;
        }
        self.read(name, cause)
    }

    fn read_quiet_files(&mut self) -> bool {
        let now = Instant::now();
        let due: Vec<(OsString, Cause)> = self
            .pending
            .iter()
            .filter(|(_, (at, _))| *at + MODIFY_QUIET <= now)
            .map(|(name, (_, cause))| (name.clone(), *cause))
            .collect();
        due.into_iter().fold(false, |acc, (name, cause)| {
            self.pending.remove(&name);
            self.read(&name, cause) | acc
        })
    }

    /// Re-reads one manifest (forgets it if the entry is gone); true if the SET changed.
    fn read(&mut self, name: &OsStr, cause: Cause) -> bool {
        let path = self.manifests.path_of(name);
        let had_pods = !self.manifests.pod_names(name).is_empty();
        let (outcome, digest) = match read_manifest(&path) {
            Ok(bytes) => {
                let outcome = self.manifests.offer(name, &bytes, Timestamp::now());
                // Hashed only for what is audited: unchanged rewrites cost nothing more.
                let audited = matches!(outcome, Outcome::Changed | Outcome::Rejected(_));
                (outcome, audited.then(|| audit::short_sha256(&bytes)))
            }
            Err(e)
                if e.kind() == io::ErrorKind::NotFound && fs::symlink_metadata(&path).is_err() =>
            {
                return self.forget(name, cause);
            }
            Err(e) => (self.manifests.unreadable(name, format!("{}: {e}", path.display())), None),
        };
        self.report(name, outcome, cause, had_pods, digest)
    }

    fn forget(&mut self, name: &OsStr, cause: Cause) -> bool {
        let pods = self.manifests.pod_names(name);
        let changed = self.manifests.forget(name);
        if changed {
            self.audited(name, Action::Removed, cause, pods, None, None);
        }
        changed
    }

    fn report(
        &mut self,
        name: &OsStr,
        outcome: Outcome,
        cause: Cause,
        had_pods: bool,
        digest: Option<String>,
    ) -> bool {
        match outcome {
            Outcome::Changed => {
                let action = if had_pods { Action::Changed } else { Action::Added };
                let pods = self.manifests.pod_names(name);
                self.audited(name, action, cause, pods, digest, None);
                true
            }
            Outcome::Unchanged => false,
            Outcome::Empty => {
                debug!(file = ?name, "manifest is empty (being rewritten?); keeping its last good pods");
                false
            }
            Outcome::Rejected(report) => {
                self.errors_total += 1;
                self.metrics.manifest_rejected(Source::File);
                let pods = self.manifests.pod_names(name);
                self.audited(name, Action::Rejected, cause, pods, digest, Some(&report));
                self.events.emit(
                    &events::node_ref(&self.node_name),
                    EventType::Warning,
                    reason::FAILED_VALIDATION,
                    format!("Error validating static pod manifest {report}"),
                );
                false
            }
        }
    }

    /// Reads the whole directory again; true if the SET changed.
    fn scan(&mut self) -> bool {
        self.pending.clear();
        let dir = self.target.dir().to_path_buf();
        let mut present = BTreeSet::new();
        match fs::read_dir(&dir) {
            Ok(entries) => {
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    if self.target.wants(&name) {
                        present.insert(name);
                    }
                }
            }
            // S11: a missing directory is an empty source.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                debug!(dir = %dir.display(), "manifest directory does not exist (yet)")
            }
            Err(e) => warn!(dir = %dir.display(), error = %e, "cannot list the manifest directory"),
        }
        let mut changed = false;
        for name in self.manifests.names() {
            if !present.contains(&name) {
                changed |= self.forget(&name, Cause::Rescan);
            }
        }
        changed |= self.manifests.retain(&present);
        for name in &present {
            changed |= self.read(name, Cause::Rescan);
        }
        self.watch_link_targets(&present);
        debug!(files = present.len(), "manifest directory scanned");
        changed
    }

    /// The directory went away or was replaced: watch again and rescan. The configured
    /// path may have turned from nothing (or a directory) into a file, or back.
    fn directory_replaced(&mut self, why: &str) {
        info!(dir = %self.target.dir().display(), why, "manifest directory replaced; rescanning");
        if let Some(id) = self.dir_watch.take() {
            let _ = self.watcher.remove(id, Scope::Contents);
        }
        let target = Target::of(&self.path);
        if target.dir() != self.target.dir() {
            if let Some(id) = self.parent_watch.take() {
                let _ = self.watcher.remove(id, Scope::Entries);
            }
            info!(path = %self.path.display(), file = matches!(target, Target::File { .. }), "manifest path changed kind");
            self.manifests = Manifests::new(target.dir().to_path_buf(), self.node_name.clone());
            self.target = target;
        }
        self.watch_dirs();
        self.rescan = true;
    }

    /// Watches the directory and its parent. With neither watchable there is nothing the
    /// kernel can wake us for, so a retry is scheduled with backoff.
    fn watch_dirs(&mut self) {
        let dir = self.target.dir().to_path_buf();
        if self.parent_watch.is_none()
            && let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty())
        {
            // Only entries: the directory's siblings' writes are none of ours.
            self.parent_watch = self.watcher.add_dir(parent, Scope::Entries).ok();
        }
        if self.dir_watch.is_none() {
            match self.watcher.add_dir(&dir, Scope::Contents) {
                Ok(id) => {
                    self.dir_watch = Some(id);
                    self.rescan = true;
                    // Auto settles on a backend at the first watch that works.
                    self.metrics.manifest_watcher(self.watcher.backend());
                }
                Err(e) => {
                    debug!(dir = %dir.display(), error = %e, "cannot watch the manifest directory yet")
                }
            }
        }
        self.rewatch_at = if self.dir_watch.is_none() && self.parent_watch.is_none() {
            let delay = self.rewatch_at.map_or(REWATCH_MIN, |(_, d)| (d * 2).min(REWATCH_MAX));
            warn!(dir = %dir.display(), retry_in = ?delay, "cannot watch the manifest directory or its parent");
            Some((Instant::now() + delay, delay))
        } else {
            None
        };
    }

    /// Watches the directories holding the targets of symlinked manifests.
    fn watch_link_targets(&mut self, present: &BTreeSet<OsString>) {
        let mut wanted: HashMap<PathBuf, Vec<(OsString, OsString)>> = HashMap::new();
        for name in present {
            let path = self.manifests.path_of(name);
            if !is_symlink(&path) {
                continue;
            }
            if let Ok(target) = fs::canonicalize(&path)
                && let (Some(parent), Some(file)) = (target.parent(), target.file_name())
            {
                wanted
                    .entry(parent.to_path_buf())
                    .or_default()
                    .push((file.to_owned(), name.clone()));
            }
        }
        for id in std::mem::take(&mut self.link_watches).into_keys() {
            let _ = self.watcher.remove(id, Scope::Contents);
        }
        for (dir, links) in wanted {
            match self.watcher.add_dir(&dir, Scope::Contents) {
                Ok(id) => {
                    self.link_watches.insert(id, links);
                }
                Err(e) => {
                    warn!(dir = %dir.display(), error = %e, "cannot watch a symlinked manifest's directory")
                }
            }
        }
    }

    /// The source as the merge task takes it. A file source is always live: the
    /// directory is local, so there is nothing to checkpoint.
    pub fn into_stream(self) -> EventStream {
        let stream = futures::stream::unfold(self, |mut source| async move {
            let event = match source.next().await {
                Ok(update) => SourceEvent::Update(update, Freshness::Live),
                Err(e) => SourceEvent::Failed(Box::new(e)),
            };
            Some((event, source))
        });
        Box::pin(stream)
    }
}

fn touches_entry(mask: Mask) -> bool {
    mask.create || mask.delete || mask.moved_from || mask.moved_to
}

fn is_symlink(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn is_link_or_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink() || m.is_dir())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One manifest problem as compilers print them: `file:line:col: message`, or
/// `file: message` when the position is unknown.
pub fn diagnostic(path: &Path, error: &outpost_core::manifest::Error) -> String {
    located(path, error.position(), error)
}

/// `file:` before a message that starts with its `line:col: ` when `position` is known,
/// else `file: `.
pub fn located(
    path: &Path,
    position: Option<(usize, usize)>,
    message: &dyn std::fmt::Display,
) -> String {
    match position {
        Some(_) => format!("{}:{message}", path.display()),
        None => format!("{}: {message}", path.display()),
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
