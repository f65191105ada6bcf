//! The fanotify backend: one notification group with `FAN_REPORT_DFID_NAME`, an inode
//! mark per watched directory, and a map from the directory file handles the kernel
//! reports back to [`WatchId`]s. The events read are parsed by `outpost_formats::fanotify`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use tokio::io::unix::AsyncFd;
use tracing::{debug, warn};

use outpost_formats::fanotify::{Malformed, parse};

use super::sys::{self, FileHandle};
use super::{
    Backend, Error, Event, Ids, MAX_READS_PER_BATCH, Mask, READ_BUFFER, Refs, Release, Scope,
    WatchId,
};

/// `FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME`.
const INIT_FLAGS: libc::c_uint =
    libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK | libc::FAN_REPORT_DFID_NAME;

/// What a directory mark asks for with [`Scope::Entries`]: entries coming, going and
/// moving (reported on the directory itself), and the directory's own end.
const ENTRIES_MASK: u64 = libc::FAN_CREATE
    | libc::FAN_DELETE
    | libc::FAN_MOVED_FROM
    | libc::FAN_MOVED_TO
    | libc::FAN_DELETE_SELF
    | libc::FAN_MOVE_SELF
    | libc::FAN_ONDIR;

/// What [`Scope::Contents`] adds: events on the entries themselves.
const CONTENTS_ONLY: u64 =
    libc::FAN_MODIFY | libc::FAN_CLOSE_WRITE | libc::FAN_ATTRIB | libc::FAN_EVENT_ON_CHILD;

fn mask(scope: Scope) -> u64 {
    match scope {
        Scope::Entries => ENTRIES_MASK,
        Scope::Contents => ENTRIES_MASK | CONTENTS_ONLY,
    }
}

/// The kernel's name for "the directory itself" in a `DFID_NAME` record.
const SELF_NAME: &[u8] = b".";

/// A directory as fanotify names it: filesystem id and file handle.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct DirKey {
    fsid: [u8; 8],
    handle: FileHandle,
}

impl DirKey {
    /// Reads the key of an open directory, naming the failing syscall.
    fn of(dir: &File) -> Result<DirKey, (&'static str, io::Error)> {
        let handle = sys::name_to_handle(dir.as_fd()).map_err(|e| ("name_to_handle_at", e))?;
        let fsid = sys::fsid(dir.as_fd()).map_err(|e| ("fstatfs", e))?;
        Ok(DirKey { fsid, handle })
    }
}

#[derive(Debug)]
struct Watched {
    key: DirKey,
    /// The path it was added under, used to find it again for removal.
    path: PathBuf,
    refs: Refs,
}

pub(super) struct Fanotify {
    fd: AsyncFd<File>,
    ids: HashMap<DirKey, WatchId>,
    watched: BTreeMap<WatchId, Watched>,
    buf: Box<[u8]>,
}

impl fmt::Debug for Fanotify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fanotify")
            .field("fd", &self.fd)
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}

impl Fanotify {
    pub(super) fn new() -> Result<Fanotify, Error> {
        let fd = sys::fanotify_init(INIT_FLAGS, (libc::O_RDONLY | libc::O_CLOEXEC) as libc::c_uint)
            .map_err(|source| Error::FanotifyInit { source })?;
        let fd = sys::register_file(File::from(fd))
            .map_err(|source| Error::Register { backend: Backend::Fanotify, source })?;
        Ok(Fanotify {
            fd,
            ids: HashMap::new(),
            watched: BTreeMap::new(),
            buf: vec![0; READ_BUFFER].into_boxed_slice(),
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    pub(super) fn add_dir(
        &mut self,
        path: &Path,
        scope: Scope,
        ids: &mut Ids,
    ) -> Result<WatchId, Error> {
        let watch_error = |syscall, source| Error::Watch { path: path.to_owned(), syscall, source };
        // Everything below works on this one descriptor, so the handle, the fsid and the
        // mark all belong to the same directory even if the path changes meanwhile.
        let dir = open_dir(path).map_err(|e| watch_error("open", e))?;
        let key = DirKey::of(&dir).map_err(|(syscall, e)| watch_error(syscall, e))?;
        // Marked even when already watched: adding ORs into a live mark (the union of the
        // scopes), and it brings back one the kernel dropped silently (fanotify has no
        // unmount event).
        sys::fanotify_mark(
            self.fd.get_ref().as_fd(),
            libc::FAN_MARK_ADD | libc::FAN_MARK_ONLYDIR,
            mask(scope),
            dir.as_fd(),
        )
        .map_err(|e| watch_error("fanotify_mark", e))?;
        if let Some(id) = self.ids.get(&key)
            && let Some(watched) = self.watched.get_mut(id)
        {
            watched.refs.add(scope);
            return Ok(*id);
        }
        let id = ids.next();
        self.ids.insert(key.clone(), id);
        self.watched.insert(id, Watched { key, path: path.to_owned(), refs: Refs::one(scope) });
        Ok(id)
    }

    pub(super) fn remove(&mut self, id: WatchId, scope: Scope) -> Result<(), Error> {
        let Some(watched) = self.watched.get_mut(&id) else {
            return Ok(());
        };
        let release = watched.refs.release(scope);
        let bits = match release {
            Release::Gone => mask(Scope::Contents),
            Release::Narrowed => CONTENTS_ONLY,
            Release::Unchanged => return Ok(()),
        };
        let path = watched.path.clone();
        let dir = find_dir(watched);
        if release == Release::Gone {
            let key = watched.key.clone();
            self.watched.remove(&id);
            self.ids.remove(&key);
        }
        let Some(dir) = dir else {
            debug!(
                path = %path.display(),
                "the watched directory cannot be found any more; its fanotify mark stays until it is deleted or the watcher is dropped, and its events are ignored"
            );
            return Ok(());
        };
        let result = sys::fanotify_mark(
            self.fd.get_ref().as_fd(),
            libc::FAN_MARK_REMOVE | libc::FAN_MARK_ONLYDIR,
            bits,
            dir.as_fd(),
        );
        match result {
            // ENOENT: there was no mark (the kernel dropped it already).
            Err(error) if error.raw_os_error() != Some(libc::ENOENT) => {
                Err(Error::Unwatch { path, syscall: "fanotify_mark", source: error })
            }
            _ => Ok(()),
        }
    }

    /// The events queued now, without waiting (none if the queue is empty). Reads past
    /// tokio's readiness, which only the next `next_batch` looks at again.
    pub(super) fn queued(&mut self) -> Result<Vec<Event>, Error> {
        let mut events = Vec::new();
        drain(self.fd.get_ref(), &mut self.buf, &mut self.ids, &mut self.watched, &mut events)?;
        Ok(events)
    }

    pub(super) async fn next_batch(&mut self) -> Result<Vec<Event>, Error> {
        loop {
            let mut guard = self.fd.readable().await.map_err(|source| Error::Read {
                backend: Backend::Fanotify,
                syscall: "epoll_wait",
                source,
            })?;
            // From here on nothing awaits: what is read is returned by this poll.
            let mut events = Vec::new();
            let fd = guard.get_inner();
            if drain(fd, &mut self.buf, &mut self.ids, &mut self.watched, &mut events)? {
                guard.clear_ready();
            }
            if !events.is_empty() {
                return Ok(events);
            }
        }
    }
}

/// Reads what the kernel has queued on `fd` (non-blocking), at most
/// [`MAX_READS_PER_BATCH`] buffers, into `events`. Whether the queue was found empty
/// (EAGAIN): then readiness is to be cleared.
fn drain(
    mut fd: &File,
    buf: &mut [u8],
    ids: &mut HashMap<DirKey, WatchId>,
    watched: &mut BTreeMap<WatchId, Watched>,
    events: &mut Vec<Event>,
) -> Result<bool, Error> {
    let error = |source| Error::Read { backend: Backend::Fanotify, syscall: "read", source };
    for _ in 0..MAX_READS_PER_BATCH {
        let len = loop {
            match fd.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(source) => return Err(error(source)),
                Ok(0) => return Err(error(io::ErrorKind::UnexpectedEof.into())),
                Ok(len) => break len,
            }
        };
        translate(buf.get(..len).unwrap_or_default(), ids, watched, events)?;
    }
    Ok(false)
}

fn open_dir(path: &Path) -> io::Result<File> {
    File::options().read(true).custom_flags(libc::O_DIRECTORY).open(path)
}

/// Finds a watched directory again, for removing its mark: at its path if it is still
/// there, else by its handle, using an ancestor of its old path on the same filesystem
/// as the mount descriptor (it was probably moved within that filesystem).
fn find_dir(watched: &Watched) -> Option<File> {
    let is_it = |dir: &File| DirKey::of(dir).is_ok_and(|key| key == watched.key);
    if let Ok(dir) = open_dir(&watched.path)
        && is_it(&dir)
    {
        return Some(dir);
    }
    let mount = watched.path.ancestors().find_map(|ancestor| {
        let dir = open_dir(ancestor).ok()?;
        (sys::fsid(dir.as_fd()).ok()? == watched.key.fsid).then_some(dir)
    })?;
    let dir = File::from(sys::open_dir_by_handle(mount.as_fd(), &watched.key.handle).ok()?);
    is_it(&dir).then_some(dir)
}

/// Turns a buffer of kernel events into [`Event`]s. A directory deletion also ends its
/// watch (the kernel destroys the mark), which is reported as [`Event::WatchGone`].
fn translate(
    data: &[u8],
    ids: &mut HashMap<DirKey, WatchId>,
    watched: &mut BTreeMap<WatchId, Watched>,
    events: &mut Vec<Event>,
) -> Result<(), Error> {
    for raw in parse(data) {
        let raw = match raw {
            Ok(raw) => raw,
            Err(Malformed::Version(found)) => {
                return Err(Error::MetadataVersion {
                    found,
                    expected: libc::FANOTIFY_METADATA_VERSION,
                });
            }
            Err(Malformed::Record(why)) => {
                warn!(why, "unreadable fanotify event; reporting lost events");
                events.push(Event::Overflow);
                continue;
            }
        };
        if raw.mask & libc::FAN_Q_OVERFLOW != 0 {
            events.push(Event::Overflow);
            continue;
        }
        let Some(fid) = raw.dir else {
            debug!(mask = raw.mask, "fanotify event without a directory record; ignored");
            continue;
        };
        let key = DirKey {
            fsid: fid.fsid,
            handle: FileHandle { handle_type: fid.handle_type, bytes: fid.handle.to_vec() },
        };
        let Some(&dir) = ids.get(&key) else {
            // A directory that is not (or no longer) watched: an unwatched subdirectory's
            // own attrib, or events queued before a removal.
            debug!(mask = raw.mask, "fanotify event for an unwatched directory; ignored");
            continue;
        };
        let mask = mask_of(raw.mask);
        let name = fid
            .name
            .filter(|name| *name != SELF_NAME)
            .map(|name| OsStr::from_bytes(name).to_os_string());
        let pid = (raw.pid > 0).then_some(raw.pid);
        events.push(Event::Entry { dir, name, mask, pid });
        if mask.self_deleted {
            // The kernel destroyed the mark with the directory: nothing more can come.
            ids.remove(&key);
            watched.remove(&dir);
            events.push(Event::WatchGone(dir));
        }
    }
    Ok(())
}

fn mask_of(bits: u64) -> Mask {
    let has = |flag: u64| bits & flag != 0;
    Mask {
        create: has(libc::FAN_CREATE),
        modify: has(libc::FAN_MODIFY),
        close_write: has(libc::FAN_CLOSE_WRITE),
        attrib: has(libc::FAN_ATTRIB),
        delete: has(libc::FAN_DELETE),
        moved_from: has(libc::FAN_MOVED_FROM),
        moved_to: has(libc::FAN_MOVED_TO),
        self_deleted: has(libc::FAN_DELETE_SELF),
        self_moved: has(libc::FAN_MOVE_SELF),
        is_dir: has(libc::FAN_ONDIR),
    }
}
