//! kubelet's `SetVolumeOwnership`: a writable volume of a pod with `fsGroup` is given to
//! that group, every file and directory in it: group `fsGroup`, read and write for owner
//! and group (`ug+rw`), and directories also `ug+x` and setgid, so that new files inherit
//! the group. Symbolic links are re-grouped but not chmod-ed (that would change their
//! target). With `fsGroupChangePolicy: OnRootMismatch` nothing is done when the volume's
//! root already has the group, those bits and setgid.

use std::fs::{self, Metadata};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use super::Result;
use super::fs::io_error as io;
use crate::runtime::spec::Subject;

const READ_WRITE: u32 = 0o660;
const EXECUTE: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// Gives the volume at `dir` to `fs_group`, per `policy` (`OnRootMismatch` or `Always`,
/// the default).
pub(super) fn set(at: &Subject, dir: &Path, fs_group: u32, policy: Option<&str>) -> Result<()> {
    if policy == Some("OnRootMismatch") && !root_mismatch(dir, fs_group) {
        tracing::debug!(pod = %at.pod, dir = %dir.display(), fs_group, "volume ownership already matches");
        return Ok(());
    }
    walk(at, dir, fs_group)
}

/// Whether the volume's root lacks the group, the `ug+rwx` bits or setgid.
fn root_mismatch(dir: &Path, fs_group: u32) -> bool {
    let Ok(metadata) = fs::metadata(dir) else { return true };
    let wanted = READ_WRITE | EXECUTE;
    metadata.gid() != fs_group
        || !metadata.is_dir()
        || metadata.mode() & wanted != wanted
        || metadata.mode() & SETGID == 0
}

fn walk(at: &Subject, path: &Path, fs_group: u32) -> Result<()> {
    let metadata = fs::symlink_metadata(path).map_err(io(at, "inspect", path))?;
    change(at, path, &metadata, fs_group)?;
    if metadata.is_dir() {
        for entry in fs::read_dir(path).map_err(io(at, "list", path))? {
            let entry = entry.map_err(io(at, "list", path))?;
            walk(at, &entry.path(), fs_group)?;
        }
    }
    Ok(())
}

fn change(at: &Subject, path: &Path, metadata: &Metadata, fs_group: u32) -> Result<()> {
    std::os::unix::fs::lchown(path, None, Some(fs_group)).map_err(io(
        at,
        "change the group of",
        path,
    ))?;
    if metadata.is_symlink() {
        return Ok(());
    }
    let mask = if metadata.is_dir() { READ_WRITE | EXECUTE | SETGID } else { READ_WRITE };
    let mode = (metadata.mode() & 0o7777) | mask;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io(
        at,
        "set the mode of",
        path,
    ))
}

#[cfg(test)]
mod tests;
