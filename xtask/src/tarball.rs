//! Deterministic tar archives: entries sorted by path, one fixed mtime, owner root (0:0).
//! The same entries and mtime always give the same bytes (`images` and `dist` use it).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::Context;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File(Vec<u8>),
    Symlink(String),
}

/// One archive member; `path` is relative and has no trailing `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub mode: u32,
    pub kind: Kind,
}

impl Entry {
    pub fn dir(path: impl Into<String>) -> Entry {
        Entry { path: path.into(), mode: 0o755, kind: Kind::Dir }
    }
    pub fn file(path: impl Into<String>, data: Vec<u8>) -> Entry {
        Entry { path: path.into(), mode: 0o644, kind: Kind::File(data) }
    }
    pub fn executable(path: impl Into<String>, data: Vec<u8>) -> Entry {
        Entry { mode: 0o755, ..Entry::file(path, data) }
    }
    pub fn symlink(path: impl Into<String>, target: &str) -> Entry {
        Entry { path: path.into(), mode: 0o777, kind: Kind::Symlink(target.to_owned()) }
    }
}

/// A tar of `entries`, sorted by path, every member with `mtime` (seconds since the epoch)
/// and owner root (0:0).
pub fn archive(mut entries: Vec<Entry>, mtime: u64) -> anyhow::Result<Vec<u8>> {
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_ustar();
        header.set_mode(entry.mode);
        header.set_mtime(mtime);
        header.set_uid(0);
        header.set_gid(0);
        header.set_username("root").context("tar header")?;
        header.set_groupname("root").context("tar header")?;
        let context = || format!("cannot add {} to a tar", entry.path);
        match &entry.kind {
            Kind::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                builder
                    .append_data(&mut header, format!("{}/", entry.path), std::io::empty())
                    .with_context(context)?;
            }
            Kind::File(data) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(data.len() as u64);
                builder
                    .append_data(&mut header, &entry.path, data.as_slice())
                    .with_context(context)?;
            }
            Kind::Symlink(target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_size(0);
                builder.append_link(&mut header, &entry.path, target).with_context(context)?;
            }
        }
    }
    builder.into_inner().context("cannot finish a tar")
}

/// The members of a tar as [`Entry`] values (in archive order), with their mtimes, and
/// the owners that are not root:root (path, uid, gid).
#[derive(Debug, Default)]
pub struct Listing {
    pub entries: Vec<Entry>,
    pub mtimes: Vec<u64>,
    pub not_root: Vec<(String, u64, u64)>,
}

/// Reads a whole tar back; an error on anything but directories, files and symlinks.
pub fn list(tar: impl std::io::Read) -> anyhow::Result<Listing> {
    let mut listing = Listing::default();
    let mut archive = tar::Archive::new(tar);
    for member in archive.entries().context("cannot read the tar")? {
        let mut member = member.context("cannot read a tar member")?;
        let header = member.header().clone();
        let path = member.path().context("a tar member's path")?;
        let path = path.to_string_lossy().trim_end_matches('/').to_owned();
        let kind = match header.entry_type() {
            tar::EntryType::Directory => Kind::Dir,
            tar::EntryType::Regular => {
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut member, &mut data)
                    .with_context(|| format!("cannot read {path} from the tar"))?;
                Kind::File(data)
            }
            tar::EntryType::Symlink => {
                let target = member.link_name().with_context(|| format!("{path}'s link"))?;
                Kind::Symlink(target.map(|t| t.to_string_lossy().into_owned()).unwrap_or_default())
            }
            other => anyhow::bail!("{path}: unexpected tar member type {other:?}"),
        };
        let (uid, gid) = (header.uid()?, header.gid()?);
        if (uid, gid) != (0, 0) {
            listing.not_root.push((path.clone(), uid, gid));
        }
        listing.mtimes.push(header.mtime()?);
        listing.entries.push(Entry { path, mode: header.mode()? & 0o7777, kind });
    }
    Ok(listing)
}

/// Creates `entries` below the existing directory `dir`, each with its mode (parents
/// before children, as [`archive`] orders them). Owners are whoever runs this.
pub fn write_tree(dir: &Path, entries: &[Entry]) -> anyhow::Result<()> {
    for entry in entries {
        let path = dir.join(&entry.path);
        let context = || format!("cannot create {}", path.display());
        match &entry.kind {
            Kind::Dir => fs::create_dir_all(&path).with_context(context)?,
            Kind::File(data) => fs::write(&path, data).with_context(context)?,
            Kind::Symlink(target) => {
                std::os::unix::fs::symlink(target, &path).with_context(context)?;
                continue;
            }
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(entry.mode)).with_context(context)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Entry> {
        vec![
            Entry::file("b/data", b"hello".to_vec()),
            Entry::dir("b"),
            Entry::executable("a", b"#!/bin/sh\n".to_vec()),
            Entry::symlink("b/link", "data"),
        ]
    }

    #[test]
    fn the_same_entries_give_the_same_bytes_in_any_order() {
        let mut reversed = sample();
        reversed.reverse();
        let a = archive(sample(), 1_700_000_000).unwrap();
        assert_eq!(a, archive(reversed, 1_700_000_000).unwrap());
        assert_ne!(a, archive(sample(), 0).unwrap(), "the mtime is in the bytes");
    }

    #[test]
    fn list_reads_back_what_archive_wrote() {
        let tar = archive(sample(), 42).unwrap();
        let listing = list(tar.as_slice()).unwrap();
        let mut expected = sample();
        expected.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(listing.entries, expected);
        assert_eq!(listing.mtimes, vec![42; 4]);
        assert!(listing.not_root.is_empty());
    }
}
