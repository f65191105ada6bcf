//! The file source's side of the manifest audit: each change it acts on is identified
//! (who wrote it), logged once and recorded in the [`crate::audit`] log.

use std::ffi::OsStr;

use k8s_openapi::jiff::Timestamp;
use tracing::{info, warn};

use super::{Cause, FileSource};
use crate::audit::{Action, Entry, Origin};

impl FileSource {
    /// Records one change (and logs it, with its writer). `error` is a rejection's report.
    pub(super) fn audited(
        &self,
        name: &OsStr,
        action: Action,
        cause: Cause,
        pods: Vec<String>,
        sha256: Option<String>,
        error: Option<&str>,
    ) {
        let (origin, cause_kind, pid) = match cause {
            Cause::Event { pid } => {
                (Origin::Event { pid, backend: self.backend() }, crate::audit::Cause::Event, pid)
            }
            Cause::Rescan => (Origin::Rescan, crate::audit::Cause::Rescan, None),
        };
        let writer = self.audit.writer(origin);
        let file = name.to_string_lossy();
        match error {
            None => info!(
                file = %file,
                %action,
                pods = ?pods,
                sha256 = sha256.as_deref(),
                pid,
                uid = writer.uid,
                writer = %writer.summary,
                "manifest {action}"
            ),
            Some(report) => warn!(
                file = %file,
                %action,
                sha256 = sha256.as_deref(),
                pid,
                uid = writer.uid,
                writer = %writer.summary,
                "manifest rejected; its last good pods (if any) keep running:\n{report}"
            ),
        }
        self.audit.record(Entry {
            time: Timestamp::now().to_string(),
            file: file.into_owned(),
            path: self.manifests.path_of(name).display().to_string(),
            action,
            cause: cause_kind,
            pods,
            sha256,
            error: error.map(str::to_owned),
            writer,
        });
    }
}
