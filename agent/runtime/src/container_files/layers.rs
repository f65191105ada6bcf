//! A file of an image looked up in its unpacked layers, as overlayfs would show it.
//!
//! containerd's overlayfs snapshotter unpacks each layer into its own directory, with
//! whiteouts as overlayfs has them: a deleted file is a character device 0:0, and a
//! directory replaced whole carries the xattr `trusted.overlay.opaque` (or
//! `user.overlay.opaque`) set to `y`.

use std::fs::{self, File};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use containerd_client::types::Mount;

/// Why a file of the image cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{} is a symbolic link, which Outpost does not follow out of the image; set \
         securityContext.runAsUser and runAsGroup",
        path.display()
    )]
    Symlink { path: PathBuf },

    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A snapshot mounted other than by overlay or bind: its mount type.
    #[error("snapshotter mount {0:?} is not one Outpost reads files from (overlay or bind)")]
    MountType(String),
}

/// The layer directories of a snapshot's mounts, top first.
pub(super) fn dirs(mounts: &[Mount]) -> Result<Vec<PathBuf>, Error> {
    let mut dirs = Vec::new();
    for mount in mounts {
        match mount.r#type.as_str() {
            "bind" | "rbind" => dirs.push(PathBuf::from(&mount.source)),
            "overlay" => {
                let options = mount.options.iter();
                let upper = options.clone().find_map(|o| o.strip_prefix("upperdir="));
                dirs.extend(upper.map(PathBuf::from));
                let lower = options.clone().find_map(|o| o.strip_prefix("lowerdir="));
                dirs.extend(lower.into_iter().flat_map(|l| l.split(':')).map(PathBuf::from));
            }
            other => return Err(Error::MountType(other.to_owned())),
        }
    }
    Ok(dirs)
}

/// What one layer holds at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Entry {
    Absent,
    /// A whiteout: deleted from the layers below.
    Whiteout,
    File,
    /// A directory; `opaque` hides the layers below.
    Dir {
        opaque: bool,
    },
    Symlink,
    /// A device, socket or pipe.
    Other,
}

/// `relative` (e.g. `etc/passwd`) in the merged `layers` (top first): its text, `None`
/// when the image has no such file. At most `limit` bytes are read.
pub(super) fn read(
    layers: &[PathBuf],
    relative: &str,
    limit: u64,
) -> Result<Option<String>, Error> {
    let path = Path::new(relative);
    match find(layers, path, entry)? {
        Some(file) => {
            read_limited(&file, limit).map(Some).map_err(|source| Error::Io { path: file, source })
        }
        None => Ok(None),
    }
}

/// Where the merged view's `path` comes from, given what each layer holds (`entry`).
pub(super) fn find(
    layers: &[PathBuf],
    path: &Path,
    entry: impl Fn(&Path) -> io::Result<Entry>,
) -> Result<Option<PathBuf>, Error> {
    let components: Vec<_> = path.components().collect();
    'layers: for layer in layers {
        let mut here = layer.clone();
        let mut opaque_above = false;
        for (index, component) in components.iter().enumerate() {
            here.push(component);
            let last = index + 1 == components.len();
            match entry(&here).map_err(|source| Error::Io { path: here.clone(), source })? {
                Entry::File if last => return Ok(Some(here)),
                Entry::Dir { opaque } if !last => opaque_above |= opaque,
                Entry::Symlink => {
                    return Err(Error::Symlink { path: path_in_image(&components, index) });
                }
                Entry::Absent if !opaque_above => continue 'layers,
                // Hidden below, or not a file (nor a directory on the way): none to read.
                _ => return Ok(None),
            }
        }
    }
    Ok(None)
}

/// `/etc` for the first component of `etc/passwd`, for messages.
fn path_in_image(components: &[std::path::Component<'_>], index: usize) -> PathBuf {
    let mut path = PathBuf::from("/");
    path.extend(&components[..=index]);
    path
}

/// What `path` is in its layer.
fn entry(path: &Path) -> io::Result<Entry> {
    let metadata = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Entry::Absent),
        Err(e) => return Err(e),
    };
    let kind = metadata.file_type();
    Ok(if kind.is_file() {
        Entry::File
    } else if kind.is_dir() {
        Entry::Dir { opaque: opaque(path) }
    } else if kind.is_symlink() {
        Entry::Symlink
    } else if kind.is_char_device() && metadata.rdev() == 0 {
        Entry::Whiteout
    } else {
        Entry::Other
    })
}

/// Whether overlayfs's opaque xattr is set on the directory.
fn opaque(dir: &Path) -> bool {
    ["trusted.overlay.opaque", "user.overlay.opaque"].into_iter().any(|name| {
        let mut value = [0u8; 1];
        rustix::fs::lgetxattr(dir, name, &mut value[..]).is_ok_and(|n| n == 1 && value[0] == b'y')
    })
}

/// The text of `path`, at most `limit` bytes of it (an error past that).
pub(super) fn read_limited(path: &Path, limit: u64) -> io::Result<String> {
    let mut text = String::new();
    File::open(path)?.take(limit + 1).read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests;
