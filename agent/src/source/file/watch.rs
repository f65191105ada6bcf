//! Kernel watches on manifest directories.
//!
//! A [`Watcher`] reports what the kernel says happened inside a few directories (the
//! manifest directory, its parent, the directories holding the targets of symlinked
//! manifests) and leaves the meaning of it to the file source. Two backends:
//!
//! - **fanotify** with `FAN_REPORT_DFID_NAME` (preferred): it names the writer's PID.
//!   It needs `CAP_SYS_ADMIN` and Linux 5.9 or later.
//! - **inotify** (fallback): no PID.
//!
//! What the kernel reports (Linux 6.18, measured by `watch/tests.rs`):
//!
//! | what happened                  | fanotify                                         | inotify                                        |
//! |--------------------------------|--------------------------------------------------|------------------------------------------------|
//! | create, write, close `a`       | `a`: create\|modify\|close_write (one event)     | `a`: create; modify; close_write               |
//! | rename `t` over `a`            | `t`: …\|moved_from; `a`: moved_to (no delete)     | `t`: moved_from; `a`: moved_to (no delete)     |
//! | `rm a`, then write `a` again   | `a`: create\|modify\|close_write\|delete (one!)   | `a`: delete; create; modify; close_write       |
//! | `touch a` (existing)           | `a`: attrib\|close_write                          | `a`: attrib; close_write                       |
//! | chmod a subdirectory `s`       | nothing (reported against `s` itself)            | `s`: attrib, is_dir                            |
//! | watched dir removed            | self: self_deleted; WatchGone; parent: delete    | same                                           |
//! | dir renamed over watched dir   | self: attrib\|self_deleted; WatchGone             | self: attrib; self_deleted; WatchGone          |
//! | watched dir renamed            | self: self_moved; the watch follows the dir      | same                                           |
//! | watched dir's fs unmounted     | **nothing**: the mark silently disappears        | WatchGone                                      |
//!
//! fanotify merges a new event into a queued, unread one for the same directory, name
//! and PID, so one [`Event::Entry`] may carry several flags in no particular order, and
//! a later event can be folded into an earlier position of the queue: treat an entry as
//! "look at this name again", never as a sequence of operations.
//!
//! Both deliver [`Event::Overflow`] when the kernel dropped events (rescan everything),
//! and [`Event::WatchGone`] when the kernel removed a watch. fanotify has no event for
//! the end of a mark: the fanotify backend reports `WatchGone` right after
//! `self_deleted` (the kernel destroys the mark with the directory), and cannot report
//! an unmount at all.

mod fanotify;
mod inotify;
#[allow(unsafe_code)]
mod sys;

use std::io;
use std::path::{Path, PathBuf};

use tracing::info;

/// Which backend to use (`--watcher`), and the kernel interface a [`Watcher`] uses: both
/// settings-level names (the audit and the metrics name the backend too), defined with
/// the other settings.
pub use crate::config::{Backend, Preference};
/// What a watch reports, as the file source's machine takes it.
pub use outpost_core::source::file::watch::{Event, Mask, Scope, WatchId};

/// References to one watched directory, counted by scope: the kernel watch covers the
/// widest scope still referenced.
#[derive(Debug, Default, Clone, Copy)]
struct Refs {
    entries: usize,
    contents: usize,
}

/// What dropping a reference means for the kernel watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// Still needed as it is.
    Unchanged,
    /// Only entries are still wanted: take the content events off.
    Narrowed,
    /// Nothing references it: remove it.
    Gone,
}

impl Refs {
    fn one(scope: Scope) -> Refs {
        let mut refs = Refs::default();
        refs.add(scope);
        refs
    }

    fn add(&mut self, scope: Scope) {
        match scope {
            Scope::Entries => self.entries += 1,
            Scope::Contents => self.contents += 1,
        }
    }

    /// Drops one reference (none if there was none of that scope) and says what the
    /// kernel watch must do about it.
    fn release(&mut self, scope: Scope) -> Release {
        let before = self.widest();
        let count = match scope {
            Scope::Entries => &mut self.entries,
            Scope::Contents => &mut self.contents,
        };
        *count = count.saturating_sub(1);
        match (before, self.widest()) {
            (_, None) => Release::Gone,
            (Some(Scope::Contents), Some(Scope::Entries)) => Release::Narrowed,
            _ => Release::Unchanged,
        }
    }

    /// What the kernel watch must cover; `None` once nothing references it.
    fn widest(&self) -> Option<Scope> {
        if self.contents > 0 {
            Some(Scope::Contents)
        } else if self.entries > 0 {
            Some(Scope::Entries)
        } else {
            None
        }
    }
}

/// Hands out [`WatchId`]s; shared by the backends so that an id stays unique even if
/// [`Preference::Auto`] switches backend.
#[derive(Debug, Default)]
struct Ids(u64);

impl Ids {
    fn next(&mut self) -> WatchId {
        self.0 += 1;
        WatchId::new(self.0)
    }
}

/// Errors of the watch backends.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot start fanotify (fanotify_init): {source}; fanotify needs CAP_SYS_ADMIN and \
         Linux 5.9 or later: run the agent as root or use the inotify backend"
    )]
    FanotifyInit { source: io::Error },
    #[error(
        "cannot start inotify (inotify_init1): {source}; if the per-user limit is reached, \
         raise fs.inotify.max_user_instances"
    )]
    InotifyInit { source: io::Error },
    #[error(
        "cannot register the {backend} descriptor with the tokio reactor (epoll_ctl): \
         {source}; create the watcher inside a tokio runtime with IO enabled"
    )]
    Register { backend: Backend, source: io::Error },
    #[error("cannot watch {}: {syscall} failed: {source}; {}", .path.display(), watch_advice(.source))]
    Watch { path: PathBuf, syscall: &'static str, source: io::Error },
    #[error(
        "cannot stop watching {}: {syscall} failed: {source}; drop the watcher to release \
         all its watches",
        .path.display()
    )]
    Unwatch { path: PathBuf, syscall: &'static str, source: io::Error },
    #[error(
        "cannot read {backend} events ({syscall}): {source}; recreate the watcher and rescan \
         the directories"
    )]
    Read { backend: Backend, syscall: &'static str, source: io::Error },
    #[error(
        "fanotify reported event metadata version {found}, this build understands version \
         {expected}; use the inotify backend"
    )]
    MetadataVersion { found: u8, expected: u8 },
}

impl Error {
    /// Whether fanotify refused a directory because of its filesystem (no fsid, no file
    /// handles, a btrfs subvolume), so inotify may still watch it.
    fn is_unsupported_filesystem(&self) -> bool {
        matches!(self, Error::Watch { source, .. } if matches!(
            source.raw_os_error(),
            Some(libc::EXDEV | libc::ENODEV | libc::EOPNOTSUPP)
        ))
    }
}

fn watch_advice(error: &io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc::ENOENT) => "the directory does not exist: create it, or watch its parent",
        Some(libc::ENOTDIR) => "the path is not a directory",
        Some(libc::EACCES | libc::EPERM) => "the agent may not read the directory",
        Some(libc::ELOOP) => "the path has a symlink loop",
        Some(libc::ENOSPC) => {
            "the per-user watch limit is reached: raise fs.inotify.max_user_watches \
             (inotify) or fs.fanotify.max_user_marks (fanotify)"
        }
        Some(libc::EXDEV | libc::ENODEV | libc::EOPNOTSUPP) => {
            "its filesystem cannot report file handles to fanotify: use the inotify backend"
        }
        _ => "check that the path is a readable directory",
    }
}

/// Watches directories through fanotify or inotify.
#[derive(Debug)]
pub struct Watcher {
    preference: Preference,
    ids: Ids,
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Fanotify(fanotify::Fanotify),
    Inotify(inotify::Inotify),
}

impl Watcher {
    /// Starts a watcher with no watches. Must be called inside a tokio runtime with IO
    /// enabled.
    pub fn new(preference: Preference) -> Result<Watcher, Error> {
        let inner = match preference {
            Preference::Fanotify => {
                let inner = Inner::Fanotify(fanotify::Fanotify::new()?);
                info!(
                    backend = "fanotify",
                    "watching manifest directories with fanotify (configured)"
                );
                inner
            }
            Preference::Inotify => {
                let inner = Inner::Inotify(inotify::Inotify::new()?);
                info!(
                    backend = "inotify",
                    "watching manifest directories with inotify (configured)"
                );
                inner
            }
            Preference::Auto => match fanotify::Fanotify::new() {
                Ok(fanotify) => {
                    info!(backend = "fanotify", "watching manifest directories with fanotify");
                    Inner::Fanotify(fanotify)
                }
                Err(error) => {
                    let inner = Inner::Inotify(inotify::Inotify::new()?);
                    info!(
                        backend = "inotify",
                        reason = %error,
                        "fanotify is unavailable; watching manifest directories with inotify (no writer PIDs)"
                    );
                    inner
                }
            },
        };
        Ok(Watcher { preference, ids: Ids::default(), inner })
    }

    /// The backend in use. With [`Preference::Auto`] it is settled by the first
    /// successful [`Watcher::add_dir`].
    pub fn backend(&self) -> Backend {
        match self.inner {
            Inner::Fanotify(_) => Backend::Fanotify,
            Inner::Inotify(_) => Backend::Inotify,
        }
    }

    /// Watches a directory's entries: create, delete, moved from/to, modify,
    /// close-after-write, attrib (chmod/chown/touch), and the directory's own deletion
    /// and move. Follows a symlink given as `path` (watches the target directory).
    ///
    /// Watches are per directory inode: adding a directory that is already watched (under
    /// any path) returns the same id and takes one more reference; [`Watcher::remove`]
    /// drops one.
    pub fn add_dir(&mut self, path: &Path, scope: Scope) -> Result<WatchId, Error> {
        match &mut self.inner {
            Inner::Fanotify(fanotify) => match fanotify.add_dir(path, scope, &mut self.ids) {
                Err(error)
                    if self.preference == Preference::Auto
                        && fanotify.is_empty()
                        && error.is_unsupported_filesystem() =>
                {
                    let mut inotify = inotify::Inotify::new()?;
                    let id = inotify.add_dir(path, scope, &mut self.ids)?;
                    info!(
                        backend = "inotify",
                        reason = %error,
                        "fanotify cannot watch this filesystem; watching manifest directories with inotify (no writer PIDs)"
                    );
                    self.inner = Inner::Inotify(inotify);
                    Ok(id)
                }
                result => result,
            },
            Inner::Inotify(inotify) => inotify.add_dir(path, scope, &mut self.ids),
        }
    }

    /// Drops one reference to a watch, and the kernel watch with the last one. Removing
    /// an id the kernel already dropped (or an unknown id) is `Ok`.
    pub fn remove(&mut self, id: WatchId, scope: Scope) -> Result<(), Error> {
        match &mut self.inner {
            Inner::Fanotify(fanotify) => fanotify.remove(id, scope),
            Inner::Inotify(inotify) => inotify.remove(id, scope),
        }
    }

    /// Waits until at least one event is available, then returns everything readable
    /// without blocking again, in kernel order. Cancel-safe: nothing is read from the
    /// kernel until the descriptor is ready, and what is read is returned in the same
    /// poll.
    /// The events queued now, without waiting: fanotify's, whose writers a read of a
    /// file must be told about (inotify names none, so none are taken early).
    pub fn queued(&mut self) -> Result<Vec<Event>, Error> {
        match &mut self.inner {
            Inner::Fanotify(fanotify) => fanotify.queued(),
            Inner::Inotify(_) => Ok(Vec::new()),
        }
    }

    pub async fn next_batch(&mut self) -> Result<Vec<Event>, Error> {
        match &mut self.inner {
            Inner::Fanotify(fanotify) => fanotify.next_batch().await,
            Inner::Inotify(inotify) => inotify.next_batch().await,
        }
    }
}

/// How many bytes a backend reads per `read(2)`.
const READ_BUFFER: usize = 64 * 1024;

/// How many full buffers one batch may take, so that a writer that never stops cannot
/// keep `next_batch` from returning. 64 × 64 KiB holds a full default-sized queue.
const MAX_READS_PER_BATCH: usize = 64;

/// The command name of a process (from `/proc/<pid>/comm`), for logging who wrote a
/// manifest; `None` if it's gone.
pub fn process_name(pid: i32) -> Option<String> {
    crate::host::proc::comm(pid)
}

#[cfg(test)]
mod tests;
