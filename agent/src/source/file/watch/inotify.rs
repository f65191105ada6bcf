//! The inotify backend: one inotify instance, one watch descriptor per directory.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use inotify::{EventMask, WatchDescriptor, WatchMask};
use tokio::io::unix::AsyncFd;
use tracing::debug;

use super::sys;
use super::{
    Backend, Error, Event, Ids, MAX_READS_PER_BATCH, Mask, READ_BUFFER, Refs, Release, Scope,
    WatchId,
};

/// What a directory watch asks for. `IN_DONT_FOLLOW` is deliberately absent: a symlink
/// to a directory watches the directory.
/// What a watch asks for: entries coming, going and moving and the directory's own end;
/// with [`Scope::Contents`] also writes and attribute changes of the entries.
fn watch_mask(scope: Scope) -> WatchMask {
    let entries = WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR;
    match scope {
        Scope::Entries => entries,
        Scope::Contents => entries | WatchMask::MODIFY | WatchMask::CLOSE_WRITE | WatchMask::ATTRIB,
    }
}

#[derive(Debug)]
struct Watched {
    wd: WatchDescriptor,
    path: PathBuf,
    /// Device and inode of the directory when it was added: a later path lookup must
    /// find the same one before the watch is changed through the path.
    identity: Option<(u64, u64)>,
    refs: Refs,
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

pub(super) struct Inotify {
    fd: AsyncFd<inotify::Inotify>,
    /// Kernel watch descriptor number → id. The kernel returns the same descriptor for
    /// a directory that is already watched, whatever the path.
    ids: HashMap<i32, WatchId>,
    watched: BTreeMap<WatchId, Watched>,
    buf: Box<[u8]>,
}

impl fmt::Debug for Inotify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inotify")
            .field("fd", &self.fd)
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}

impl Inotify {
    pub(super) fn new() -> Result<Inotify, Error> {
        // `init` opens the descriptor with IN_NONBLOCK | IN_CLOEXEC.
        let inotify = inotify::Inotify::init().map_err(|source| Error::InotifyInit { source })?;
        let fd = sys::register_inotify(inotify)
            .map_err(|source| Error::Register { backend: Backend::Inotify, source })?;
        Ok(Inotify {
            fd,
            ids: HashMap::new(),
            watched: BTreeMap::new(),
            buf: vec![0; READ_BUFFER].into_boxed_slice(),
        })
    }

    pub(super) fn add_dir(
        &mut self,
        path: &Path,
        scope: Scope,
        ids: &mut Ids,
    ) -> Result<WatchId, Error> {
        // MASK_ADD: a directory already watched keeps what it had (the union of scopes).
        let wd = self
            .fd
            .get_ref()
            .watches()
            .add(path, watch_mask(scope) | WatchMask::MASK_ADD)
            .map_err(|source| Error::Watch {
                path: path.to_owned(),
                syscall: "inotify_add_watch",
                source,
            })?;
        let number = wd.get_watch_descriptor_id();
        if let Some(id) = self.ids.get(&number)
            && let Some(watched) = self.watched.get_mut(id)
        {
            watched.refs.add(scope);
            return Ok(*id);
        }
        let id = ids.next();
        self.ids.insert(number, id);
        self.watched.insert(
            id,
            Watched { wd, path: path.to_owned(), identity: identity(path), refs: Refs::one(scope) },
        );
        Ok(id)
    }

    pub(super) fn remove(&mut self, id: WatchId, scope: Scope) -> Result<(), Error> {
        let Some(watched) = self.watched.get_mut(&id) else {
            return Ok(());
        };
        match watched.refs.release(scope) {
            Release::Gone => {}
            Release::Narrowed => {
                // Narrowed to entries: replace the mask (by path, so only if the directory
                // is still there under it; otherwise the wider mask stays, harmlessly).
                let same_dir =
                    identity(&watched.path).is_some_and(|id| Some(id) == watched.identity);
                let narrowed = same_dir
                    && self
                        .fd
                        .get_ref()
                        .watches()
                        .add(&watched.path, watch_mask(Scope::Entries))
                        .is_ok();
                if !narrowed {
                    debug!(path = %watched.path.display(), "cannot narrow the inotify watch; it keeps reporting writes");
                }
                return Ok(());
            }
            Release::Unchanged => return Ok(()),
        }
        let Some(watched) = self.watched.remove(&id) else {
            return Ok(());
        };
        self.ids.remove(&watched.wd.get_watch_descriptor_id());
        match self.fd.get_ref().watches().remove(watched.wd) {
            // EINVAL: the kernel already dropped the watch (its IN_IGNORED is queued).
            Err(error) if error.raw_os_error() != Some(libc::EINVAL) => Err(Error::Unwatch {
                path: watched.path,
                syscall: "inotify_rm_watch",
                source: error,
            }),
            _ => Ok(()),
        }
    }

    pub(super) async fn next_batch(&mut self) -> Result<Vec<Event>, Error> {
        loop {
            let mut guard = self.fd.readable_mut().await.map_err(|source| Error::Read {
                backend: Backend::Inotify,
                syscall: "epoll_wait",
                source,
            })?;
            // From here on nothing awaits: what is read is returned by this poll.
            let mut events = Vec::new();
            for _ in 0..MAX_READS_PER_BATCH {
                let read = guard.try_io(|fd| fd.get_mut().read_events(&mut self.buf));
                let batch = match read {
                    Ok(Ok(batch)) => batch,
                    Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(Err(source)) => {
                        return Err(Error::Read {
                            backend: Backend::Inotify,
                            syscall: "read",
                            source,
                        });
                    }
                    // EAGAIN: the queue is empty and readiness was cleared.
                    Err(_would_block) => break,
                };
                for event in batch {
                    translate(event, &mut self.ids, &mut self.watched, &mut events);
                }
            }
            if !events.is_empty() {
                return Ok(events);
            }
        }
    }
}

fn translate(
    event: inotify::Event<&std::ffi::OsStr>,
    ids: &mut HashMap<i32, WatchId>,
    watched: &mut BTreeMap<WatchId, Watched>,
    events: &mut Vec<Event>,
) {
    if event.mask.contains(EventMask::Q_OVERFLOW) {
        events.push(Event::Overflow);
        return;
    }
    let number = event.wd.get_watch_descriptor_id();
    let Some(&dir) = ids.get(&number) else {
        // Removed by us, with events (and the IN_IGNORED that removal causes) queued.
        debug!(wd = number, mask = ?event.mask, "inotify event for an unwatched descriptor; ignored");
        return;
    };
    if event.mask.contains(EventMask::IGNORED) {
        ids.remove(&number);
        watched.remove(&dir);
        events.push(Event::WatchGone(dir));
        return;
    }
    let mut mask = mask_of(event.mask);
    if mask.is_empty() {
        // IN_UNMOUNT: the IN_IGNORED that follows reports the end of the watch.
        debug!(wd = number, mask = ?event.mask, "inotify event without a reported flag; ignored");
        return;
    }
    if event.name.is_none() {
        // About the watched directory itself (IN_ONLYDIR), which inotify flags with
        // IN_ISDIR for attrib but not for IN_DELETE_SELF and IN_MOVE_SELF; fanotify does.
        mask.is_dir = true;
    }
    events.push(Event::Entry {
        dir,
        name: event.name.map(|name| name.to_os_string()),
        mask,
        pid: None,
    });
}

fn mask_of(bits: EventMask) -> Mask {
    let mut mask = Mask {
        create: bits.contains(EventMask::CREATE),
        modify: bits.contains(EventMask::MODIFY),
        close_write: bits.contains(EventMask::CLOSE_WRITE),
        attrib: bits.contains(EventMask::ATTRIB),
        delete: bits.contains(EventMask::DELETE),
        moved_from: bits.contains(EventMask::MOVED_FROM),
        moved_to: bits.contains(EventMask::MOVED_TO),
        self_deleted: bits.contains(EventMask::DELETE_SELF),
        self_moved: bits.contains(EventMask::MOVE_SELF),
        is_dir: false,
    };
    // IN_ISDIR alone is not an event.
    if !mask.is_empty() {
        mask.is_dir = bits.contains(EventMask::ISDIR);
    }
    mask
}
