//! The Unix sockets the device manager serves on: a file's identity (so that a socket
//! made again at the same path, by the agent or by anyone, is told apart), and listening
//! as kubelet's `CreateListener` does (the socket bound under a temporary name, then
//! renamed into place, so a client never finds a socket that does not listen yet).

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A file's identity: its device, inode and birth time (a file made where one was just
/// removed may get its inode again, not its birth; a filesystem without birth times
/// tells files apart by device and inode only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    born: Option<SystemTime>,
}

/// The identity of the file at `path` (not following a symbolic link), if there is one.
pub fn identity(path: &Path) -> Option<FileId> {
    let metadata = fs::symlink_metadata(path).ok()?;
    Some(FileId { dev: metadata.dev(), ino: metadata.ino(), born: metadata.created().ok() })
}

/// Listens on `socket` as kubelet's `CreateListener`: what is at the path is removed,
/// its directory made (mode 0750), and the socket bound under a temporary name there,
/// then renamed into place. The listener is non-blocking, for tokio.
pub fn listen_in_place(socket: &Path) -> io::Result<(UnixListener, FileId)> {
    match fs::remove_file(socket) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let dir = socket.parent().unwrap_or(Path::new("/"));
    fs::DirBuilder::new().recursive(true).mode(0o750).create(dir)?;
    let name = socket.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = dir.join(format!(".{name}.{}", std::process::id()));
    let _ = fs::remove_file(&temporary);
    let listener = UnixListener::bind(&temporary)?;
    if let Err(error) = fs::rename(&temporary, socket) {
        let _ = fs::remove_file(&temporary);
        return Err(error);
    }
    listener.set_nonblocking(true)?;
    let id = identity(socket).ok_or_else(|| io::Error::other("removed once made"))?;
    Ok((listener, id))
}

/// Removes a socket the agent made when dropped, if it is still that socket.
#[derive(Debug)]
pub struct Removal {
    pub socket: PathBuf,
    pub id: Option<FileId>,
}

impl Removal {
    /// Whether the socket at the path is the one made.
    pub fn is_current(&self) -> bool {
        self.id.is_some() && identity(&self.socket) == self.id
    }
}

impl Drop for Removal {
    fn drop(&mut self) {
        if self.is_current() {
            let _ = fs::remove_file(&self.socket);
        }
    }
}
