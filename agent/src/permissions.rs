//! Security defaults checked at start: who may write what the agent trusts.
//!
//! - Every manifest in `--manifest-dir` runs as a pod, with whatever privileges it asks
//!   for, and every tarball in `--images-dir` can become any image a pod names. A user who
//!   can write either directory, or rename a directory above it, can run anything as root.
//!   So the agent refuses to start unless the directory and each directory above it can be
//!   written only by root (or by the agent's own user, for an unprivileged `--dry-run`),
//!   with the fix in the message; `--allow-writable-manifest-dir` overrides it. As in
//!   OpenSSH's StrictModes, a sticky directory such as `/tmp` above it is fine when the
//!   entry below it belongs to root: nobody else may rename or delete that entry.
//! - The state directory holds checkpoints of every pod spec (env values, pushed
//!   manifests), so it is made 0700 and kept so.
//!
//! [`judge`] is the rule, on file metadata alone; the rest reads the file system.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{what} {target}: {problem}; any pod written there would run as root. Fix: {fix}, or \
         start with --allow-writable-manifest-dir if this is intended"
    )]
    Writable { what: &'static str, target: PathBuf, problem: String, fix: String },
    #[error("cannot check who may write {what} {}: {source}", path.display())]
    Inspect {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot create or secure the state directory {}: {source}", path.display())]
    StateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// What [`judge`] needs to know of one path component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: PathBuf,
    pub uid: u32,
    pub mode: u32,
}

impl Entry {
    fn of(path: &Path, metadata: &fs::Metadata) -> Entry {
        // A symlink's own mode is always 0777 and means nothing: who may replace it is
        // its directory's business, and where it leads is judged on its own.
        let mode = if metadata.file_type().is_symlink() {
            metadata.mode() & !GROUP_OR_OTHER_WRITE
        } else {
            metadata.mode()
        };
        Entry { path: path.to_owned(), uid: metadata.uid(), mode }
    }
}

/// Why a path can be changed by someone other than root or `trusted_uid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The component at fault.
    pub path: PathBuf,
    pub problem: String,
    pub fix: String,
}

const GROUP_OR_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// Judges the components of one path, from `/` down to the target (the last entry): each
/// must belong to root or `trusted_uid`, and none may be writable by group or others,
/// except a sticky directory above the target.
pub fn judge(chain: &[Entry], trusted_uid: u32) -> Result<(), Finding> {
    let trusted = |uid: u32| uid == 0 || uid == trusted_uid;
    for (i, entry) in chain.iter().enumerate() {
        let shown = entry.path.display();
        if !trusted(entry.uid) {
            return Err(Finding {
                path: entry.path.clone(),
                problem: format!("{shown} belongs to uid {}", entry.uid),
                fix: format!("chown root {shown}"),
            });
        }
        if entry.mode & GROUP_OR_OTHER_WRITE == 0 {
            continue;
        }
        // In a sticky directory only an entry's owner may rename or delete it, and the
        // next entry's owner is checked in its turn. The target itself gets no such pass:
        // anyone may add a file to it.
        let is_ancestor = i + 1 < chain.len();
        if entry.mode & STICKY != 0 && is_ancestor {
            continue;
        }
        return Err(Finding {
            path: entry.path.clone(),
            problem: format!(
                "{shown} is writable by {} (mode {:o})",
                writers(entry.mode),
                entry.mode & 0o7777
            ),
            fix: format!("chmod go-w {shown}"),
        });
    }
    Ok(())
}

fn writers(mode: u32) -> &'static str {
    match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (true, true) => "its group and all users",
        (true, false) => "its group",
        _ => "all users",
    }
}

/// The security defaults, before any source reads a manifest: the manifest directory and
/// the images directory (`trusted`; `None` with `--allow-writable-manifest-dir`) may be
/// written by root alone, and the state directory is made private.
pub fn secure_dirs(trusted: Option<(&Path, Option<&Path>)>, state_dir: &Path) -> Result<(), Error> {
    match trusted {
        None => tracing::warn!(
            "--allow-writable-manifest-dir: not checking who may write the manifest and images directories"
        ),
        Some((manifest_dir, images_dir)) => {
            check_trusted_dir("the manifest directory", manifest_dir)?;
            if let Some(dir) = images_dir {
                check_trusted_dir("the images directory", dir)?;
            }
        }
    }
    secure_state_dir(state_dir)
}

/// Refuses `target` (`what` names it in messages, e.g. "the manifest directory") when
/// someone other than root or this process's user could change what is in it. A target
/// that does not exist yet is judged by the directory it would be created in; both the
/// path as given and the one its symlinks lead to are judged.
pub fn check_trusted_dir(what: &'static str, target: &Path) -> Result<(), Error> {
    let inspect = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Inspect { what, path, source }
    };
    let absolute = std::path::absolute(target).map_err(inspect(target))?;
    let existing = deepest_existing(&absolute);
    let uid = nix::unistd::geteuid().as_raw();
    let mut chains =
        vec![chain(&existing, |p| fs::symlink_metadata(p)).map_err(inspect(&existing))?];
    let resolved = fs::canonicalize(&existing).map_err(inspect(&existing))?;
    if resolved != existing {
        chains.push(chain(&resolved, |p| fs::metadata(p)).map_err(inspect(&resolved))?);
    }
    // The last entry gets no sticky-directory pass: a directory still to be created may
    // be made by anyone who can write its parent.
    for chain in chains {
        judge(&chain, uid).map_err(|finding| Error::Writable {
            what,
            target: absolute.clone(),
            problem: finding.problem,
            fix: finding.fix,
        })?;
    }
    Ok(())
}

/// `path` itself if it exists, else its deepest existing ancestor.
fn deepest_existing(path: &Path) -> PathBuf {
    path.ancestors()
        .find(|p| fs::symlink_metadata(p).is_ok())
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

/// The entries of `/`, then of each component down to `path` (absolute, normalized).
fn chain(path: &Path, stat: fn(&Path) -> io::Result<fs::Metadata>) -> io::Result<Vec<Entry>> {
    let mut current = PathBuf::from("/");
    let mut entries = vec![Entry::of(&current, &stat(&current)?)];
    for component in path.components() {
        match component {
            Component::Normal(name) => current.push(name),
            Component::ParentDir => {
                current.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
        }
        entries.push(Entry::of(&current, &stat(&current)?));
    }
    Ok(entries)
}

/// Creates the state directory 0700 (its parents with the usual mode), or tightens an
/// existing one that others can read, saying so once.
pub fn secure_state_dir(dir: &Path) -> Result<(), Error> {
    let fail = |source| Error::StateDir { path: dir.into(), source };
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent).map_err(fail)?;
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail(e)),
    }
    let mode = fs::metadata(dir).map_err(fail)?.mode() & 0o7777;
    if mode & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode & 0o700)).map_err(fail)?;
        tracing::warn!(
            dir = %dir.display(),
            was = format_args!("{mode:o}"),
            now = format_args!("{:o}", mode & 0o700),
            "the state directory holds pod specs; its group and other permissions were removed"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
