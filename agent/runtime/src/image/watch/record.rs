//! Which tarballs of the images directory were imported: a JSON file in the state
//! directory, so that a restart does not import them again. A file counts as the same
//! one only with the same name, size, modification time and inode, so a replaced or
//! rewritten file is imported again.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::Metadata;

use serde::{Deserialize, Serialize};

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Stamp {
    pub size: u64,
    pub mtime_sec: i64,
    pub mtime_nsec: i64,
    pub inode: u64,
}

impl Stamp {
    pub fn of(metadata: &Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            size: metadata.size(),
            mtime_sec: metadata.mtime(),
            mtime_nsec: metadata.mtime_nsec(),
            inode: metadata.ino(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Entry {
    #[serde(flatten)]
    pub stamp: Stamp,
    /// The images the file held, for people reading the record.
    pub images: Vec<String>,
}

/// The record: file name → what was imported from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Record {
    #[serde(default)]
    pub files: BTreeMap<String, Entry>,
}

impl Record {
    /// Whether this version of the file was imported.
    pub fn is_imported(&self, name: &str, stamp: &Stamp) -> bool {
        self.files.get(name).is_some_and(|entry| entry.stamp == *stamp)
    }

    pub fn insert(&mut self, name: &str, stamp: Stamp, images: Vec<String>) {
        self.files.insert(name.to_owned(), Entry { stamp, images });
    }

    /// Forgets the files that are gone; returns whether any was.
    pub fn retain_present(&mut self, present: &[String]) -> bool {
        let before = self.files.len();
        self.files.retain(|name, _| present.contains(name));
        self.files.len() != before
    }

    pub fn parse(bytes: &[u8]) -> Result<Record, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut json = serde_json::to_vec_pretty(self)?;
        json.push(b'\n');
        Ok(json)
    }
}

/// The file name if it is an image tarball to import: `*.tar`, not hidden (editors' and
/// copy tools' temporary files are), UTF-8.
pub(super) fn tarball_name(name: &OsStr) -> Option<&str> {
    let name = name.to_str()?;
    let stem = name.strip_suffix(".tar")?;
    (!stem.is_empty() && !name.starts_with('.')).then_some(name)
}
