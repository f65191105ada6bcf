//! When each image was first seen and last used, kept in `<state-dir>/image-gc.json` so
//! that an agent restart does not make every image new again (kubelet keeps this in
//! memory only: after its restart an image counts as first seen and used then, and
//! `imageMaximumGCAge` waits that long again). Written atomically, when an image comes
//! or goes, or a use is more than [`USE_PRECISION`] newer than the recorded one (a flash
//! disk is not written at every run).

use std::collections::BTreeMap;
use std::io::{self, Write as _};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// How stale a recorded last use may be before it is written again.
pub const USE_PRECISION: Duration = Duration::from_secs(3600);

/// The file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// When the agent began tracking images on this node.
    pub since: Option<Timestamp>,
    /// By image (content digest).
    #[serde(default)]
    pub images: BTreeMap<String, Times>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Times {
    pub first_detected: Timestamp,
    pub last_used: Timestamp,
}

impl Record {
    /// The record at `path`; empty if there is none, or (with a warning) if it is unreadable.
    pub fn load(path: &Path) -> Record {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(record = %path.display(), error = %e, "the image GC record is corrupt; every image counts as first seen now");
                Record::default()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Record::default(),
            Err(e) => {
                tracing::warn!(record = %path.display(), error = %e, "cannot read the image GC record; every image counts as first seen now");
                Record::default()
            }
        }
    }

    /// Writes the record atomically (a temporary file renamed over it).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&json)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests;
