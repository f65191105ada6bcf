//! The manifest directory source's decisions (kubelet's `staticPodPath`), as a pure
//! state machine (the pod worker's shape): [`Machine::step`] takes one [`Input`] (a batch
//! of kernel events, a timer, or the result of an action) and the time, and returns the
//! [`Action`]s to perform and when to wake it next. The agent's executor
//! (`outpost::source::file::FileSource`) performs them with the kernel watch and the
//! filesystem and feeds their results back as inputs, each before any other input;
//! nothing here reads a file, touches a watch or waits.
//!
//! What it keeps to:
//! - a full scan (list the directory, read every manifest) happens only at start, after
//!   the kernel's queue overflowed, when the directory itself went or was replaced, and
//!   when what symlinked manifests point through changed (a new symlinked manifest, a
//!   `..data` symlink swapped);
//! - otherwise one event, one name looked at again: the kernel's flags say that something
//!   happened to a name, not what it is now (see [`watch`]);
//! - a file written but not closed is read once it has been quiet for [`MODIFY_QUIET`];
//! - with neither the directory nor its parent watchable, watching is retried with a
//!   backoff from [`REWATCH_MIN`] to [`REWATCH_MAX`];
//! - files are read one at a time (each may be 10 MiB);
//! - a SET goes out once the reads asked for are done, if the content changed; the first
//!   one always, even empty (S11);
//! - a manifest's warnings are reported once per content (a rescan of unchanged bytes
//!   decodes nothing), and the list of manifests rejected or warned about goes out when
//!   the reads are done, if it changed.
//!
//! - `events`: what kernel events (and timers) call for;
//! - `reads`: the listing and the files read, offered to [`Manifests`];
//! - [`manifests`]: what the directory holds, file by file;
//! - [`watch`]: what a kernel watch reports, as data.

mod events;
pub mod manifests;
mod reads;
pub mod watch;

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tracing::{info, warn};

use self::manifests::Manifests;
use self::watch::{Event, Scope, WatchId};
use super::problems::ManifestProblem;
use crate::merge::{Op, SourceUpdate};
use crate::pod::{Source, SourcePod};

/// How long a file may keep changing without being closed before it is read anyway.
pub const MODIFY_QUIET: Duration = Duration::from_millis(250);
/// Backoff bounds while the directory (and its parent) cannot be watched.
pub const REWATCH_MIN: Duration = Duration::from_millis(250);
pub const REWATCH_MAX: Duration = Duration::from_secs(30);

/// The time, both ways: monotonic for deadlines, wall for `config.seen` (M3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub at: Instant,
    pub wall: Timestamp,
}

/// What the source watches: the directory's entries, or one file's entry in its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Dir(PathBuf),
    File { dir: PathBuf, name: OsString },
}

impl Target {
    pub fn dir(&self) -> &Path {
        match self {
            Target::Dir(dir) | Target::File { dir, .. } => dir,
        }
    }

    /// Whether an entry of the directory is a manifest this source reads (S10).
    pub fn wants(&self, name: &OsStr) -> bool {
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
pub enum Cause {
    Event { pid: Option<i32> },
    Rescan,
}

/// What listing the directory gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listing {
    /// The name of every entry, manifest or not.
    Names(Vec<OsString>),
    /// The directory does not exist: an empty source (S11).
    Missing,
    /// It cannot be listed (the error, in words): taken as empty.
    Failed(String),
}

/// What a manifest's entry holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Nothing: deleted or renamed away.
    Missing,
    /// A regular file's bytes (through a symlink, maybe), at most S8's limit + 1 byte.
    Bytes(Vec<u8>),
    /// An entry that cannot be read as a manifest (a directory, a FIFO, a dangling
    /// symlink, no permission...): the error, in words.
    Unreadable(String),
}

/// A manifest as the executor found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub name: OsString,
    pub cause: Cause,
    pub content: Content,
    /// For a symlink that resolves: its target's canonical path.
    pub link: Option<PathBuf>,
}

/// A symlinked manifest, as the watch on its target's directory sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The target's file name in that directory.
    pub target: OsString,
    /// The manifest (the symlink's name in the manifest directory).
    pub manifest: OsString,
}

/// What happens to the source.
#[derive(Debug)]
pub enum Input {
    /// The source starts: watch, scan, send the first SET.
    Start,
    /// One batch of what the kernel reported, in its order.
    Events(Vec<Event>),
    /// A wake-up time came due.
    Tick,
    /// What the configured path names now ([`Action::Locate`]).
    Located(Target),
    /// The watches [`Action::Arm`] could make (`None`: not asked, or it failed).
    Armed { dir: Option<WatchId>, parent: Option<WatchId> },
    /// The directory's listing ([`Action::List`]).
    Listed(Listing),
    /// The file [`Action::Read`] asked for.
    Read(Found),
    /// For each entry [`Action::Look`] asked about, whether it is a symlink or a
    /// directory.
    Looked(Vec<(OsString, bool)>),
    /// The watches [`Action::WatchLinks`] could make, with the links each one serves.
    Linked(Vec<(WatchId, Vec<Link>)>),
}

/// A change the source acts on, for the audit log, the logs and (for a rejection) the
/// error counter and the node's `FailedValidation` event.
#[derive(Debug, Clone)]
pub struct Change {
    pub name: OsString,
    /// The manifest's path as configured (the S5 location).
    pub path: PathBuf,
    pub kind: ChangeKind,
    pub cause: Cause,
    /// The file's pods after the change; before it, for a removal; the last good ones
    /// (kept), for a rejection.
    pub pods: Vec<SourcePod>,
    /// A short sha256 of the content, for additions, changes and rejections.
    pub sha256: Option<String>,
    /// A rejection's report (`file:line:col: message` lines).
    pub error: Option<String>,
}

/// What a change did to a manifest (the audit log's action).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// A file with no good content before now yields pods.
    Added,
    /// The file's pods changed.
    Changed,
    /// The file is gone (deleted, renamed away); its pods went with it.
    Removed,
    /// The content is not a valid manifest; the file's last good pods (if any) stay.
    Rejected,
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChangeKind::Added => "added",
            ChangeKind::Changed => "changed",
            ChangeKind::Removed => "removed",
            ChangeKind::Rejected => "rejected",
        })
    }
}

/// What the executor does, in order.
#[derive(Debug)]
pub enum Action {
    /// Find what the configured path names now → [`Input::Located`].
    Locate(PathBuf),
    /// Watch `dir`'s contents and `parent`'s entries, each if given → [`Input::Armed`].
    Arm { dir: Option<PathBuf>, parent: Option<PathBuf> },
    /// Drop one reference to a watch.
    Unwatch(WatchId, Scope),
    /// List the directory → [`Input::Listed`].
    List(PathBuf),
    /// Read one manifest (one at a time: each may be 10 MiB) → [`Input::Read`].
    Read { path: PathBuf, name: OsString, cause: Cause },
    /// Look whether these entries of `dir` are symlinks or directories →
    /// [`Input::Looked`].
    Look { dir: PathBuf, names: Vec<OsString> },
    /// Drop these watches, then watch these directories (symlinked manifests' targets)
    /// → [`Input::Linked`].
    WatchLinks { drop: Vec<WatchId>, add: Vec<(PathBuf, Vec<Link>)> },
    /// Record a change.
    Record(Change),
    /// Report the warnings about a manifest's new content (logged, and the node's
    /// `ManifestWarning` event).
    Warn { path: PathBuf, warnings: Vec<String> },
    /// The manifests rejected or warned about changed: these are all of them now.
    Problems(Vec<ManifestProblem>),
    /// Hand this SET to the merge.
    Send(SourceUpdate),
}

/// The result of a step.
#[derive(Debug, Default)]
pub struct Step {
    pub actions: Vec<Action>,
    /// When to step again with [`Input::Tick`] if no kernel event comes first.
    pub wake: Option<Instant>,
}

/// Where the source is between two steps. `owed`: the merge is owed a SET once the work
/// under way is done (the content changed, or nothing was sent yet).
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Nothing done yet.
    Starting,
    /// Waiting for [`Input::Located`]: the directory went or was replaced.
    Locating { owed: bool },
    /// Waiting for [`Input::Armed`]. `scan`: list and read everything next, whatever
    /// comes of it (else only if the directory's own watch is made); `backoff`: the
    /// delay of the retry that led here.
    Arming { scan: bool, owed: bool, backoff: Option<Duration> },
    /// Waiting for [`Input::Listed`]; `then`: where to rest afterwards.
    Listing { owed: bool, then: Rest },
    /// Waiting for [`Input::Looked`]; the files to read next if nothing calls for a scan.
    Looking { reads: Vec<(OsString, Cause)>, then: Rest },
    /// Waiting for [`Input::Read`].
    Reading(Reads),
    /// Nothing under way: the merge has the directory's content as read.
    Idle(Rest),
}

/// Files being read, one at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reads {
    /// The files are the whole listing (a scan): the directories its symlinked manifests
    /// point into are watched once they are read.
    scan: bool,
    owed: bool,
    then: Rest,
    /// The files to read after the one asked for.
    queue: VecDeque<(OsString, Cause)>,
    /// For a scan: the directories its symlinked manifests point into.
    links: BTreeMap<PathBuf, Vec<Link>>,
    /// How many files were read.
    count: usize,
}

/// What the source waits for when nothing is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rest {
    /// Kernel events, and files to read once quiet.
    Watched,
    /// Neither the directory nor its parent could be watched, so nothing but a retry at
    /// `at` can wake the source; `delay` doubles with each failed retry.
    Unwatched { at: Instant, delay: Duration },
}

/// The manifest directory source's state.
#[derive(Debug)]
pub struct Machine {
    /// `--manifest-dir` as configured.
    path: PathBuf,
    node_name: String,
    target: Target,
    manifests: Manifests,
    state: State,
    /// The watch on the target directory, while it exists.
    dir_watch: Option<WatchId>,
    /// The watch on the directory's parent, to see the directory come, go or be replaced.
    parent_watch: Option<WatchId>,
    /// Watches on directories holding the targets of symlinked manifests.
    link_watches: BTreeMap<WatchId, Vec<Link>>,
    /// Files written but not closed yet, since when and why: read once quiet.
    quiet: BTreeMap<OsString, (Instant, Cause)>,
    /// The manifests rejected or warned about, as last reported.
    reported: Vec<ManifestProblem>,
}

impl Machine {
    /// A source of `path` (`--manifest-dir`), which names `target` now.
    pub fn new(path: PathBuf, target: Target, node_name: String) -> Machine {
        Machine {
            manifests: Manifests::new(target.dir().to_path_buf(), node_name.clone()),
            path,
            node_name,
            target,
            state: State::Starting,
            dir_watch: None,
            parent_watch: None,
            link_watches: BTreeMap::new(),
            quiet: BTreeMap::new(),
            reported: Vec::new(),
        }
    }

    /// Applies `input` at `now`; returns what to do and when to wake next.
    pub fn step(&mut self, input: Input, now: Now) -> Step {
        let mut out = Vec::new();
        let state = std::mem::replace(&mut self.state, State::Starting);
        self.state = self.transition(state, input, now, &mut out);
        Step { actions: out, wake: self.wake() }
    }

    fn transition(&mut self, state: State, input: Input, now: Now, out: &mut Vec<Action>) -> State {
        match (state, input) {
            (State::Starting, Input::Start) => self.arm(true, true, None, out),
            (State::Locating { owed }, Input::Located(target)) => {
                let owed = self.retarget(target, out) || owed;
                self.arm(true, owed, None, out)
            }
            (State::Arming { scan, owed, backoff }, Input::Armed { dir, parent }) => {
                self.armed(Armed { scan, owed, backoff, dir, parent }, now, out)
            }
            (State::Listing { owed, then }, Input::Listed(listing)) => {
                self.listed(listing, owed, then, out)
            }
            (State::Looking { reads, then }, Input::Looked(looked)) => {
                self.looked(&looked, reads, then, out)
            }
            (State::Reading(reads), Input::Read(found)) => self.read(found, reads, now, out),
            (state, Input::Linked(links)) => {
                self.link_watches.extend(links);
                state
            }
            (State::Idle(rest), Input::Events(events)) => self.events(events, rest, now, out),
            (State::Idle(rest), Input::Tick) => self.tick(rest, now, out),
            (state, input) => {
                warn!(
                    ?state,
                    input = input.kind(),
                    "the file source got an input it does not expect now; ignored"
                );
                state
            }
        }
    }

    /// Watches what is not watched of the directory and its parent.
    fn arm(
        &mut self,
        scan: bool,
        owed: bool,
        backoff: Option<Duration>,
        out: &mut Vec<Action>,
    ) -> State {
        let dir = self.target.dir();
        let parent = match self.parent_watch {
            None => dir.parent().filter(|p| !p.as_os_str().is_empty()).map(Path::to_path_buf),
            Some(_) => None,
        };
        let dir = self.dir_watch.is_none().then(|| dir.to_path_buf());
        out.push(Action::Arm { dir, parent });
        State::Arming { scan, owed, backoff }
    }

    fn armed(&mut self, armed: Armed, now: Now, out: &mut Vec<Action>) -> State {
        if let Some(id) = armed.parent {
            self.parent_watch = Some(id);
        }
        let mut scan = armed.scan;
        if let Some(id) = armed.dir {
            self.dir_watch = Some(id);
            scan = true;
        }
        let then = if self.dir_watch.is_none() && self.parent_watch.is_none() {
            let delay = armed.backoff.map_or(REWATCH_MIN, |d| (d * 2).min(REWATCH_MAX));
            warn!(dir = %self.target.dir().display(), retry_in = ?delay, "cannot watch the manifest directory or its parent");
            Rest::Unwatched { at: now.at + delay, delay }
        } else {
            Rest::Watched
        };
        if scan {
            out.push(Action::List(self.target.dir().to_path_buf()));
            State::Listing { owed: armed.owed, then }
        } else {
            self.settle(armed.owed, then, out)
        }
    }

    /// The configured path names `target` now. If that is another directory, what was
    /// read of the old one is dropped; true if that took pods away.
    fn retarget(&mut self, target: Target, out: &mut Vec<Action>) -> bool {
        if target.dir() == self.target.dir() {
            self.target = target;
            return false;
        }
        if let Some(id) = self.parent_watch.take() {
            out.push(Action::Unwatch(id, Scope::Entries));
        }
        info!(path = %self.path.display(), file = matches!(target, Target::File { .. }), "manifest path changed kind");
        let had_pods = !self.manifests.pods().is_empty();
        self.manifests = Manifests::new(target.dir().to_path_buf(), self.node_name.clone());
        self.quiet.clear();
        self.target = target;
        had_pods
    }

    /// The work under way is done: the SET goes out if owed, the manifests with problems
    /// if they changed, and the source rests.
    fn settle(&mut self, owed: bool, then: Rest, out: &mut Vec<Action>) -> State {
        if owed {
            out.push(Action::Send(SourceUpdate {
                source: Source::File,
                op: Op::Set,
                pods: self.manifests.pods(),
            }));
        }
        let problems = self.manifests.problems();
        if problems != self.reported {
            self.reported = problems.clone();
            out.push(Action::Problems(problems));
        }
        State::Idle(then)
    }

    fn wake(&self) -> Option<Instant> {
        let State::Idle(rest) = self.state else {
            return None;
        };
        let quiet = self.quiet.values().map(|(at, _)| *at + MODIFY_QUIET).min();
        let retry = match rest {
            Rest::Unwatched { at, .. } => Some(at),
            Rest::Watched => None,
        };
        quiet.into_iter().chain(retry).min()
    }
}

/// What [`Input::Armed`] answers, with what the arming state carried.
struct Armed {
    scan: bool,
    owed: bool,
    backoff: Option<Duration>,
    dir: Option<WatchId>,
    parent: Option<WatchId>,
}

impl Input {
    /// The input's kind, for logs.
    fn kind(&self) -> &'static str {
        match self {
            Input::Start => "start",
            Input::Events(_) => "events",
            Input::Tick => "tick",
            Input::Located(_) => "located",
            Input::Armed { .. } => "armed",
            Input::Listed(_) => "listed",
            Input::Read(_) => "read",
            Input::Looked(_) => "looked",
            Input::Linked(_) => "linked",
        }
    }
}

#[cfg(test)]
mod tests;
