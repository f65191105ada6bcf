//! The device-plugin directory: made and cleaned as kubelet's device manager does at
//! start, `kubelet.sock`'s listener, the identity of the files in it, and its inotify
//! watch.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use inotify::{Inotify, WatchDescriptor, WatchMask};
use outpost_kubelet_api::deviceplugin::v1beta1::KUBELET_SOCKET;
use tracing::{info, warn};

use super::{CHECKPOINT, Error};
use crate::devices::socket::{FileId, identity};

/// The directory's mode when it is made (kubelet's `MkdirAll(dir, 0750)`).
const MODE: u32 = 0o750;

/// What the directory's events are watched for: a file made, removed or renamed in it,
/// and the directory itself removed or moved away.
pub(super) fn watch_mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

/// The directory, ready: cleaned, watched, and `kubelet.sock` listening.
#[derive(Debug)]
pub(super) struct Prepared {
    pub dir: PathBuf,
    pub watch: Inotify,
    pub watched: WatchDescriptor,
    pub listener: UnixListener,
    pub served: FileId,
}

/// Makes the directory, removes its sockets, watches it, then listens on `kubelet.sock`
/// (watched first, so that nothing done to the socket after it is made goes unseen).
pub(super) fn prepare(dir: &Path) -> Result<Prepared, Error> {
    create(dir)?;
    cleanup(dir)?;
    let watch = Inotify::init().map_err(|source| watch_error(dir, source))?;
    let watched =
        watch.watches().add(dir, watch_mask()).map_err(|source| watch_error(dir, source))?;
    let (listener, served) = listen(&dir.join(KUBELET_SOCKET))?;
    Ok(Prepared { dir: dir.to_owned(), watch, watched, listener, served })
}

pub(super) fn watch_error(dir: &Path, source: io::Error) -> Error {
    Error::Watch { dir: dir.to_owned(), source }
}

/// Makes the directory (and its parents) if it is not there.
pub(super) fn create(dir: &Path) -> Result<(), Error> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(MODE)
        .create(dir)
        .map_err(|source| Error::Directory { dir: dir.to_owned(), source })
}

/// kubelet's `CleanupPluginDirectory`: removes every socket in the directory (a plugin
/// that sees its socket or `kubelet.sock` go registers again), following a symbolic
/// link to see what it names (a link to a socket is removed, not its target). The
/// checkpoint, directories and files that are not sockets stay; a file that cannot be
/// looked at is logged and left. Every socket that cannot be removed is named in the error.
pub(super) fn cleanup(dir: &Path) -> Result<(), Error> {
    let entries =
        fs::read_dir(dir).map_err(|source| Error::Directory { dir: dir.to_owned(), source })?;
    let mut failed = Vec::new();
    let mut first = None;
    for entry in entries {
        let entry = entry.map_err(|source| Error::Directory { dir: dir.to_owned(), source })?;
        if entry.file_name() == CHECKPOINT {
            continue;
        }
        let path = entry.path();
        let metadata = match fs::metadata(&path) {
            Ok(metadata) => metadata,
            Err(error) => {
                warn!(path = %path.display(), %error, "cannot look at a file of the device-plugin directory: left");
                continue;
            }
        };
        if metadata.is_dir() || !metadata.file_type().is_socket() {
            continue;
        }
        match fs::remove_file(&path) {
            Ok(()) => info!(socket = %path.display(), "removed a stale device-plugin socket"),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => {
                warn!(socket = %path.display(), %error, "cannot remove a stale device-plugin socket");
                failed.push(path);
                first.get_or_insert(error);
            }
        }
    }
    match first {
        None => Ok(()),
        Some(source) => Err(Error::Cleanup { dir: dir.to_owned(), sockets: failed, source }),
    }
}

/// Listens on `socket`, removing what is there first (kubelet's `cleanupSocket`); the
/// listener is non-blocking, for tokio.
pub(super) fn listen(socket: &Path) -> Result<(UnixListener, FileId), Error> {
    let error = |source| Error::Listen { socket: socket.to_owned(), source };
    match fs::remove_file(socket) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(error(e)),
        _ => {}
    }
    let listener = UnixListener::bind(socket).map_err(error)?;
    listener.set_nonblocking(true).map_err(error)?;
    let served = identity(socket)
        .ok_or_else(|| error(io::Error::new(io::ErrorKind::NotFound, "removed once made")))?;
    Ok((listener, served))
}
