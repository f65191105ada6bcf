//! hostPath volumes: the checks (and creations) of kubelet's `hostPath.type`.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

use k8s_openapi::api::core::v1::HostPathVolumeSource;

use super::{Error, Result, fs as pod_fs};
use crate::spec::Subject;

/// What a hostPath type expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Anything,
    Directory { create: bool },
    File { create: bool },
    Socket,
    CharDevice,
    BlockDevice,
}

pub(super) fn check(at: &Subject, volume: &str, source: &HostPathVolumeSource) -> Result<()> {
    let kind = source.type_.as_deref().unwrap_or_default();
    let expect = match kind {
        "" => Expect::Anything,
        "DirectoryOrCreate" => Expect::Directory { create: true },
        "Directory" => Expect::Directory { create: false },
        "FileOrCreate" => Expect::File { create: true },
        "File" => Expect::File { create: false },
        "Socket" => Expect::Socket,
        "CharDevice" => Expect::CharDevice,
        "BlockDevice" => Expect::BlockDevice,
        other => {
            return Err(Error::HostPathType {
                at: at.clone(),
                volume: volume.to_owned(),
                kind: other.to_owned(),
            });
        }
    };
    let path = Path::new(&source.path);
    let problem = |problem: &str| Error::HostPath {
        at: at.clone(),
        volume: volume.to_owned(),
        path: path.to_path_buf(),
        problem: problem.to_owned(),
    };
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return match expect {
                Expect::Anything => Ok(()),
                Expect::Directory { create: true } => pod_fs::make_dir(at, path, 0o755),
                Expect::File { create: true } => create_file(at, path),
                _ => Err(problem(&format!("does not exist; type {kind} needs it to"))),
            };
        }
        Err(source) => {
            return Err(Error::Io {
                at: at.clone(),
                operation: "inspect",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let file_type = metadata.file_type();
    let (ok, what) = match expect {
        Expect::Anything => (true, ""),
        Expect::Directory { .. } => (file_type.is_dir(), "a directory"),
        Expect::File { .. } => (file_type.is_file(), "a file"),
        Expect::Socket => (file_type.is_socket(), "a socket"),
        Expect::CharDevice => (file_type.is_char_device(), "a character device"),
        Expect::BlockDevice => (file_type.is_block_device(), "a block device"),
    };
    if ok { Ok(()) } else { Err(problem(&format!("is not {what}, as type {kind} requires"))) }
}

/// kubelet's `FileOrCreate`: an empty file, mode 0644, in an existing directory.
fn create_file(at: &Subject, path: &Path) -> Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)
        .map(drop)
        .map_err(|source| Error::Io {
            at: at.clone(),
            operation: "create file",
            path: path.to_path_buf(),
            source,
        })
}
