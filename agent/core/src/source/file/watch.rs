//! What a kernel watch on a manifest directory reports, as data: the agent's watcher
//! (`outpost::source::file::watch`, fanotify or inotify) turns the kernel's records into
//! these, and the file source's machine decides what they mean. Its module documentation
//! tables what the kernel reports for each change.

use std::ffi::OsString;
use std::fmt;

/// What a watch on a directory reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Entries appearing, disappearing or moving, and the directory's own deletion or
    /// move: enough to follow one name in a directory whose other files are none of ours.
    Entries,
    /// Also writes, closes after writing and attribute changes of the entries.
    Contents,
}

/// One watched directory. A watcher never hands out an id twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatchId(u64);

impl WatchId {
    /// The watch numbered `n` by its watcher.
    pub fn new(n: u64) -> WatchId {
        WatchId(n)
    }
}

impl fmt::Display for WatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "watch#{}", self.0)
    }
}

/// What happened, from the kernel's point of view. Several flags may be set in one event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mask {
    pub create: bool,
    pub modify: bool,
    pub close_write: bool,
    /// chmod, chown, touch (timestamps), link count changes.
    pub attrib: bool,
    pub delete: bool,
    pub moved_from: bool,
    pub moved_to: bool,
    /// The watched directory itself was deleted (`name` is `None`).
    pub self_deleted: bool,
    /// The watched directory itself was renamed or moved (`name` is `None`); the watch
    /// stays on it.
    pub self_moved: bool,
    /// The subject of the event is a directory.
    pub is_dir: bool,
}

impl Mask {
    /// Whether no flag is set.
    pub fn is_empty(&self) -> bool {
        *self == Mask::default()
    }
}

/// What a watcher reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Something happened to `name` inside the watched directory `dir`, or to `dir`
    /// itself when `name` is `None` (`self_deleted`, `self_moved`, or `attrib` on the
    /// directory). `pid` is the writer's process id (fanotify only; `None` if the writer
    /// lives in another PID namespace).
    Entry { dir: WatchId, name: Option<OsString>, mask: Mask, pid: Option<i32> },
    /// The kernel's queue overflowed (or a kernel record could not be read): events were
    /// lost; the consumer must rescan everything.
    Overflow,
    /// A watch was removed by the kernel (directory deleted, filesystem unmounted): the
    /// id is dead. Always comes after the `self_deleted` entry when there is one.
    WatchGone(WatchId),
}
