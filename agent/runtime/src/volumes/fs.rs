//! File helpers for the pod's directory: directories with a mode, atomic writes.

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

use super::{Error, Result};
use crate::spec::Subject;

pub(super) fn io_error(
    at: &Subject,
    operation: &'static str,
    path: &Path,
) -> impl FnOnce(io::Error) -> Error {
    let (at, path) = (at.clone(), path.to_path_buf());
    move |source| Error::Io { at, operation, path, source }
}

/// Creates `path` (and missing parents) and gives it `mode`, whatever the umask.
pub(super) fn make_dir(at: &Subject, path: &Path, mode: u32) -> Result<()> {
    fs::DirBuilder::new().recursive(true).mode(mode).create(path).map_err(io_error(
        at,
        "create directory",
        path,
    ))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io_error(
        at,
        "set the mode of",
        path,
    ))
}

/// The permission bits of `path`.
pub(super) fn mode(at: &Subject, path: &Path) -> Result<u32> {
    let metadata = fs::metadata(path).map_err(io_error(at, "read the mode of", path))?;
    Ok(metadata.permissions().mode() & 0o7777)
}

/// The text of `path`, or empty (with a warning) when it does not exist.
pub(super) fn read_or_empty(at: &Subject, path: &Path) -> Result<String> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            tracing::warn!(pod.namespace = at.namespace(), pod.name = at.name(), path = %path.display(), "file not found, using an empty one");
            Ok(String::new())
        }
        Err(source) => Err(io_error(at, "read", path)(source)),
    }
}

/// Writes `text` to `path` through a temporary file beside it (mode 0644) renamed over
/// it, so that a reader sees the old or the new file whole. Not synced: these files are
/// written again at every sandbox set-up, so a crash cannot leave one that is used.
pub(super) fn write_atomic(at: &Subject, path: &Path, text: &str) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.tmp"));
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(&temporary)
        .map_err(io_error(at, "create", &temporary))?;
    file.write_all(text.as_bytes()).map_err(io_error(at, "write", &temporary))?;
    fs::rename(&temporary, path).map_err(io_error(at, "replace", path))
}
