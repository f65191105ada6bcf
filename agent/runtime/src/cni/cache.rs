//! What each ADD used and returned, one file per attachment under
//! `<cache_dir>/results/<id>.json`, written atomically, so that DEL can replay the exact
//! config, arguments and netns after a config change or an agent restart (as libcni's
//! result cache does). A record without a result is an ADD in progress.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing the CNI cache file {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("reading the CNI cache file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the CNI cache file {} is corrupt: delete it (the attachment's address may then \
         have to be freed by hand in the IPAM data dir)",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("listing the CNI cache directory {}", dir.display())]
    List {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("deleting the CNI cache file {}", path.display())]
    Delete {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// One attachment as ADD ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub id: String,
    /// The conf file the config came from (for errors).
    pub conf_file: PathBuf,
    /// The network config list as used, in `.conflist` form.
    pub config: Value,
    pub netns: PathBuf,
    pub interface: String,
    pub pod_namespace: String,
    pub pod_name: String,
    pub cni_args: String,
    pub capability_args: Map<String, Value>,
    /// The final result; `None` while ADD runs (or if it died halfway).
    pub result: Option<Value>,
}

/// The cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

const SUFFIX: &str = ".json";

impl Cache {
    pub fn new(cache_dir: &Path) -> Cache {
        Cache { dir: cache_dir.join("results") }
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}{SUFFIX}"))
    }

    /// Writes `record` atomically (a temp file renamed over the record): what a killed
    /// agent leaves is the old record or the new one. Not durable across a power cut
    /// until [`Cache::persist`]: the fsyncs cost more than the rest of a CNI ADD here
    /// (about 15 ms for a file and its directory), so a pod start does not wait for them.
    pub fn write(&self, record: &Record) -> Result<()> {
        let path = self.path(&record.id);
        let write = || -> io::Result<()> {
            fs::create_dir_all(&self.dir)?;
            let tmp = self.dir.join(format!(".{}{SUFFIX}.tmp", record.id));
            File::create(&tmp)?.write_all(&serde_json::to_vec_pretty(record)?)?;
            fs::rename(&tmp, &path)
        };
        write().map_err(|source| Error::Write { path, source })
    }

    /// Makes the record of `id` durable (fsync of the file, then of the directory that
    /// names it). A record removed meanwhile is fine.
    pub fn persist(&self, id: &str) -> Result<()> {
        let path = self.path(id);
        let sync = || -> io::Result<()> {
            File::open(&path)?.sync_all()?;
            File::open(&self.dir)?.sync_all()
        };
        match sync() {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::Write { path, source: e }),
            _ => Ok(()),
        }
    }

    /// The record of `id`, if any.
    pub fn read(&self, id: &str) -> Result<Option<Record>> {
        let path = self.path(id);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Read { path, source }),
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|source| Error::Corrupt { path, source })
    }

    pub fn remove(&self, id: &str) -> Result<()> {
        let path = self.path(id);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::Delete { path, source: e }),
            _ => Ok(()),
        }
    }

    /// The ids that have a record, sorted.
    pub fn ids(&self) -> Result<Vec<String>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(Error::List { dir: self.dir.clone(), source }),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| Error::List { dir: self.dir.clone(), source })?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(id) = name.strip_suffix(SUFFIX).filter(|id| !id.starts_with('.')) {
                ids.push(id.to_owned());
            }
        }
        ids.sort();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests;
