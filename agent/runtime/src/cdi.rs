//! CDI devices injected into a container's spec (D3): the CDI spec directories read and
//! the host's device nodes looked at for `spec::cdi`, which decides.
//!
//! The directories are read afresh for every container that asks for devices (a driver
//! that loads writes its spec when it likes; there is no cache to go stale), as the CDI
//! library scans them: in the order given (a later directory's device wins), a missing
//! directory skipped, one that cannot be read ending the scan, the `.json` and `.yaml`
//! files of each in name order (not its subdirectories). A file that cannot be read or
//! is refused is logged and left out; the others' devices stay usable. A device node's
//! host path is looked at with `lstat`.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;

use super::spec::cdi::{self, HostDevice, HostDeviceType, Registry, SpecFile};

/// The spec directories the CDI library reads by default (containerd's
/// `cdi_spec_dirs`).
pub const DEFAULT_SPEC_DIRS: [&str; 2] = ["/etc/cdi", "/var/run/cdi"];

/// The largest spec file read.
const MAX_SPEC_FILE: u64 = 16 << 20;

/// Why devices cannot be injected.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name no usable spec defines, or an edit that cannot be applied (containerd's
    /// words), with the directories searched and why files there were left out.
    #[error("{source} (CDI spec directories: {}{})", list(dirs), refused(left_out))]
    Inject {
        #[source]
        source: Box<cdi::Error>,
        dirs: Vec<PathBuf>,
        left_out: Vec<String>,
    },
    #[error("reading the CDI spec directories stopped: {0}")]
    Task(#[source] tokio::task::JoinError),
}

fn list(dirs: &[PathBuf]) -> String {
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    dirs.join(", ")
}

fn refused(left_out: &[String]) -> String {
    if left_out.is_empty() { String::new() } else { format!("; left out: {}", left_out.join("; ")) }
}

/// `spec` with `devices` injected from the spec files of `dirs`.
pub async fn inject(spec: Spec, devices: Vec<String>, dirs: Vec<PathBuf>) -> Result<Spec, Error> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        inject_blocking(spec, &devices, dirs)
    })
    .await
    .map_err(Error::Task)?
}

fn inject_blocking(mut spec: Spec, devices: &[String], dirs: Vec<PathBuf>) -> Result<Spec, Error> {
    let (files, mut left_out) = read_spec_dirs(&dirs);
    let registry = Registry::new(files);
    left_out.extend(registry.errors().iter().map(ToString::to_string));
    for reason in &left_out {
        tracing::warn!(reason = %reason, "a CDI spec file is left out");
    }
    match cdi::inject(&mut spec, &registry, devices, &mut host_device) {
        Ok(()) => {
            tracing::info!(devices = ?devices, "CDI devices injected");
            Ok(spec)
        }
        Err(source) => Err(Error::Inject { source: Box::new(source), dirs, left_out }),
    }
}

/// The spec files of `dirs` (see the module's documentation), and why any was not
/// read.
pub fn read_spec_dirs(dirs: &[PathBuf]) -> (Vec<SpecFile>, Vec<String>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for (priority, dir) in dirs.iter().enumerate() {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                errors.push(format!("cannot read the CDI spec directory {}: {e}", dir.display()));
                break;
            }
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            if entry.file_type().is_ok_and(|t| t.is_dir()) || !is_spec_file(&entry.file_name()) {
                continue;
            }
            let path = entry.path();
            match read_limited(&path) {
                Ok(data) => files.push(SpecFile { path, priority, data }),
                Err(e) => errors.push(format!("cannot read CDI spec {}: {e}", path.display())),
            }
        }
    }
    (files, errors)
}

/// A name whose extension (from its last `.`, as Go's `filepath.Ext`) is `.json` or
/// `.yaml`.
fn is_spec_file(name: &std::ffi::OsStr) -> bool {
    let name = name.as_bytes();
    let extension = name.iter().rposition(|b| *b == b'.').map(|at| &name[at..]);
    matches!(extension, Some(b".json" | b".yaml"))
}

fn read_limited(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut data = Vec::new();
    std::fs::File::open(path)?.take(MAX_SPEC_FILE + 1).read_to_end(&mut data)?;
    if data.len() as u64 > MAX_SPEC_FILE {
        return Err(io::Error::other(format!("larger than {MAX_SPEC_FILE} bytes")));
    }
    Ok(data)
}

/// The host node at `path`, not following a symbolic link.
fn host_device(path: &Path) -> io::Result<Option<HostDevice>> {
    let metadata = std::fs::symlink_metadata(path)
        .map_err(|e| io::Error::new(e.kind(), format!("lstat {}: {e}", path.display())))?;
    let file_type = metadata.file_type();
    let typ = if file_type.is_block_device() {
        HostDeviceType::Block
    } else if file_type.is_char_device() {
        HostDeviceType::Char
    } else if file_type.is_fifo() {
        HostDeviceType::Fifo
    } else {
        return Ok(None);
    };
    let rdev = metadata.rdev();
    Ok(Some(HostDevice {
        typ,
        major: i64::try_from(nix::sys::stat::major(rdev)).unwrap_or(i64::MAX),
        minor: i64::try_from(nix::sys::stat::minor(rdev)).unwrap_or(i64::MAX),
        file_mode: metadata.mode() & 0o7777,
    }))
}

#[cfg(test)]
mod tests;
