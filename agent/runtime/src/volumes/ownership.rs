//! kubelet's `SetVolumeOwnership`: a volume of a pod with `fsGroup` is given to that
//! group, every file and directory in it: group `fsGroup`, read and write for owner and
//! group (`ug+rw`) in a writable volume, read only (`ug+r`) in a read-only one
//! (configMap, secret, downwardAPI, projected), and directories also `ug+x` and setgid,
//! so that new files inherit the group. Symbolic links are re-grouped but not chmod-ed (that would change their
//! target). With `fsGroupChangePolicy: OnRootMismatch` nothing is done when the volume's
//! root already has the group, those bits and setgid.

use std::fs::{self, Metadata};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use outpost_host::Host;

use super::Result;
use super::fs::io_error as io;
use crate::spec::Subject;

const READ_WRITE: u32 = 0o660;
const READ_ONLY: u32 = 0o440;
const EXECUTE: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// How the pod's containers use a volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    ReadWrite,
    ReadOnly,
}

/// Gives the volume at `dir` to `fs_group` (the `lchown`s through `host`), per `policy`
/// (`OnRootMismatch` or `Always`, the default).
pub(super) fn set(
    host: &dyn Host,
    at: &Subject,
    dir: &Path,
    fs_group: u32,
    policy: Option<&str>,
    access: Access,
) -> Result<()> {
    if policy == Some("OnRootMismatch") && !root_mismatch(dir, fs_group) {
        tracing::debug!(pod.namespace = at.namespace(), pod.name = at.name(), dir = %dir.display(), fs_group, "volume ownership already matches");
        return Ok(());
    }
    walk(host, at, dir, fs_group, access)
}

/// The mode of a file (or directory) of a read-only volume given to an fsGroup.
pub(super) fn read_only_mode(mode: u32, is_dir: bool) -> u32 {
    mode | mask(Access::ReadOnly, is_dir)
}

fn mask(access: Access, is_dir: bool) -> u32 {
    let base = match access {
        Access::ReadWrite => READ_WRITE,
        Access::ReadOnly => READ_ONLY,
    };
    if is_dir { base | EXECUTE | SETGID } else { base }
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

fn walk(host: &dyn Host, at: &Subject, path: &Path, fs_group: u32, access: Access) -> Result<()> {
    let metadata = fs::symlink_metadata(path).map_err(io(at, "inspect", path))?;
    change(host, at, path, &metadata, fs_group, access)?;
    if metadata.is_dir() {
        for entry in fs::read_dir(path).map_err(io(at, "list", path))? {
            let entry = entry.map_err(io(at, "list", path))?;
            walk(host, at, &entry.path(), fs_group, access)?;
        }
    }
    Ok(())
}

fn change(
    host: &dyn Host,
    at: &Subject,
    path: &Path,
    metadata: &Metadata,
    fs_group: u32,
    access: Access,
) -> Result<()> {
    host.lchown(path, None, Some(fs_group)).map_err(io(at, "change the group of", path))?;
    if metadata.is_symlink() {
        return Ok(());
    }
    let mode = (metadata.mode() & 0o7777) | mask(access, metadata.is_dir());
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io(
        at,
        "set the mode of",
        path,
    ))
}

#[cfg(test)]
mod tests;
