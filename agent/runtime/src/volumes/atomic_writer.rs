//! kubelet's atomic writer: how configMap, secret, downwardAPI and projected volumes
//! change under a running container without it ever seeing half a change.
//!
//! ```text
//! <volume>/..2026_11_23_07_40_01.123456789/   the files, in their directories (0755)
//! <volume>/..data -> ..2026_11_23_07_40_01.123456789
//! <volume>/<key> -> ..data/<key>               one per top-level entry of the payload
//! ```
//!
//! A new payload goes to a new timestamped directory; `..data` is then swapped to it at
//! once (a `..data_tmp` symlink renamed over it), the top-level symlinks are added or
//! removed, and the old directory goes. A payload equal to what `..data` holds (same
//! paths, bytes and modes) writes nothing. Only the writer's entries are touched: names
//! starting with `..`, and symlinks into `..data`.
//!
//! No crate does this: it is kubelet's on-disk contract with the applications that watch
//! these volumes (they wait for `..data` to change), not a general atomic-file write.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};

use outpost_host::Host;

use super::ownership;
use crate::spec::projection::Payload;

/// The symlink to the current timestamped directory.
pub(super) const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";
const DIR_MODE: u32 = 0o755;

#[derive(Debug, thiserror::Error)]
#[error("cannot {operation} {}", path.display())]
pub struct Error {
    operation: &'static str,
    path: PathBuf,
    #[source]
    source: io::Error,
}

type Result<T, E = Error> = std::result::Result<T, E>;

fn io(operation: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error { operation, path, source }
}

/// Makes `dir` (which exists) show `payload`; with `group` (the pod's fsGroup) every
/// entry is given to it (through `host`) as kubelet gives a read-only volume (see
/// `ownership`). Returns whether anything was written.
pub(super) fn write(
    host: &dyn Host,
    dir: &Path,
    payload: &Payload,
    group: Option<u32>,
) -> Result<bool> {
    let current = match fs::read_link(dir.join(DATA)) {
        Ok(target) => Some(dir.join(target)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(source) => return Err(io("read the symlink", &dir.join(DATA))(source)),
    };
    let unchanged = match &current {
        Some(current) => holds(current, payload, group)?,
        None => false,
    };
    if !unchanged {
        let (name, new) = timestamped_dir(host, dir, group)?;
        for (path, file) in payload {
            write_file(host, &new, path, &file.data, file.mode, group)?;
        }
        let tmp = dir.join(DATA_TMP);
        remove_if_present(&tmp, |p| fs::remove_file(p))?;
        symlink(&name, &tmp).map_err(io("create the symlink", &tmp))?;
        if let Some(group) = group {
            host.lchown(&tmp, None, Some(group)).map_err(io("change the group of", &tmp))?;
        }
        fs::rename(&tmp, dir.join(DATA)).map_err(io("swap", &dir.join(DATA)))?;
    }
    let top: BTreeSet<&str> = payload.keys().filter_map(|p| p.split('/').next()).collect();
    visible_links(host, dir, &top, group)?;
    if !unchanged {
        remove_stale(dir)?;
    }
    Ok(!unchanged)
}

/// Whether the directory `..data` points to holds exactly `payload`.
fn holds(current: &Path, payload: &Payload, group: Option<u32>) -> Result<bool> {
    let mut found = Vec::new();
    if !list_files(current, current, &mut found)? || found.len() != payload.len() {
        return Ok(false);
    }
    for (path, file) in payload {
        let on_disk = current.join(path);
        let metadata = match fs::symlink_metadata(&on_disk) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(source) => return Err(io("inspect", &on_disk)(source)),
        };
        let mode = file_mode(file.mode, group);
        if !metadata.is_file()
            || metadata.mode() & 0o7777 != mode
            || group.is_some_and(|g| metadata.gid() != g)
            || metadata.len() != file.data.len() as u64
        {
            return Ok(false);
        }
        if fs::read(&on_disk).map_err(io("read", &on_disk))? != file.data {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Collects the regular files under `dir`; `false` if it holds anything else (or is gone).
fn list_files(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) -> Result<bool> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(io("list", dir)(source)),
    };
    for entry in entries {
        let entry = entry.map_err(io("list", dir))?;
        let kind = entry.file_type().map_err(io("inspect", &entry.path()))?;
        if kind.is_dir() {
            if !list_files(root, &entry.path(), found)? {
                return Ok(false);
            }
        } else if kind.is_file() {
            found.push(entry.path().strip_prefix(root).unwrap_or(&entry.path()).to_path_buf());
        } else {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A new `..<UTC time with nanoseconds>` directory in `dir`.
fn timestamped_dir(host: &dyn Host, dir: &Path, group: Option<u32>) -> Result<(String, PathBuf)> {
    loop {
        let now = jiff::Timestamp::now();
        let name =
            format!("..{}.{:09}", now.strftime("%Y_%m_%d_%H_%M_%S"), now.subsec_nanosecond());
        let path = dir.join(&name);
        match fs::DirBuilder::new().mode(DIR_MODE).create(&path) {
            Ok(()) => {
                set_owner_and_mode(host, &path, dir_mode(group), group)?;
                return Ok((name, path));
            }
            // Two writes within one clock tick: take the next one.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(io("create directory", &path)(source)),
        }
    }
}

fn write_file(
    host: &dyn Host,
    root: &Path,
    path: &str,
    data: &[u8],
    mode: u32,
    group: Option<u32>,
) -> Result<()> {
    let file_path = root.join(path);
    let mut parent = root.to_path_buf();
    for name in Path::new(path).parent().into_iter().flat_map(Path::components) {
        parent.push(name);
        match fs::DirBuilder::new().mode(DIR_MODE).create(&parent) {
            Ok(()) => set_owner_and_mode(host, &parent, dir_mode(group), group)?,
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(io("create directory", &parent)(source)),
        }
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file_path)
        .map_err(io("create", &file_path))?;
    file.write_all(data).map_err(io("write", &file_path))?;
    set_owner_and_mode(host, &file_path, file_mode(mode, group), group)
}

fn set_owner_and_mode(host: &dyn Host, path: &Path, mode: u32, group: Option<u32>) -> Result<()> {
    if let Some(group) = group {
        host.lchown(path, None, Some(group)).map_err(io("change the group of", path))?;
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io("set the mode of", path))
}

fn file_mode(mode: u32, group: Option<u32>) -> u32 {
    match group {
        Some(_) => ownership::read_only_mode(mode, false),
        None => mode,
    }
}

fn dir_mode(group: Option<u32>) -> u32 {
    match group {
        Some(_) => ownership::read_only_mode(DIR_MODE, true),
        None => DIR_MODE,
    }
}

/// Adds the missing `<name> -> ..data/<name>` symlinks, and removes the writer's
/// symlinks to names no longer in the payload.
fn visible_links(
    host: &dyn Host,
    dir: &Path,
    top: &BTreeSet<&str>,
    group: Option<u32>,
) -> Result<()> {
    for name in top {
        let link = dir.join(name);
        match fs::symlink_metadata(&link) {
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                symlink(Path::new(DATA).join(name), &link)
                    .map_err(io("create the symlink", &link))?;
                if let Some(group) = group {
                    host.lchown(&link, None, Some(group))
                        .map_err(io("change the group of", &link))?;
                }
            }
            Err(source) => return Err(io("inspect", &link)(source)),
        }
    }
    for entry in fs::read_dir(dir).map_err(io("list", dir))? {
        let entry = entry.map_err(io("list", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("..") || top.contains(name) {
            continue;
        }
        let ours = fs::read_link(entry.path()).is_ok_and(|t| t.starts_with(DATA));
        if ours {
            remove_if_present(&entry.path(), |p| fs::remove_file(p))?;
        }
    }
    Ok(())
}

/// Removes the timestamped directories `..data` no longer points to (the previous one,
/// and any a crash left behind).
fn remove_stale(dir: &Path) -> Result<()> {
    let current = fs::read_link(dir.join(DATA)).map_err(io("read the symlink", &dir.join(DATA)))?;
    for entry in fs::read_dir(dir).map_err(io("list", dir))? {
        let entry = entry.map_err(io("list", dir))?;
        let name = entry.file_name();
        let timestamped = name
            .to_str()
            .and_then(|n| n.strip_prefix(".."))
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()));
        if timestamped && Path::new(&name) != current {
            remove_if_present(&entry.path(), |p| fs::remove_dir_all(p))?;
        }
    }
    Ok(())
}

fn remove_if_present(path: &Path, remove: impl FnOnce(&Path) -> io::Result<()>) -> Result<()> {
    match remove(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(io("remove", path)(error)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
