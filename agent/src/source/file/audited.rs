//! The file source's side of the manifest audit: each change it acts on is identified
//! (who wrote it), logged once and recorded in the [`crate::audit`] log, followed by a
//! `refused` entry when the admission policy refuses pods of the file.

use k8s_openapi::jiff::Timestamp;
use outpost_core::source::file::{Cause, Change, ChangeKind};
use tracing::{info, warn};

use super::FileSource;
use crate::audit::admission::Manifest;
use crate::audit::{Action, Entry, ManifestSource, Origin};

impl FileSource {
    /// Records one change (and logs it, with its writer). Pods added or changed that the
    /// admission policy refuses are recorded next.
    pub(super) fn audited(&self, change: Change) {
        let Change { name, path, kind, cause, pods, sha256, error } = change;
        let action = match kind {
            ChangeKind::Added => Action::Added,
            ChangeKind::Changed => Action::Changed,
            ChangeKind::Removed => Action::Removed,
            ChangeKind::Rejected => Action::Rejected,
        };
        let (origin, cause_kind, pid) = match cause {
            Cause::Event { pid } => {
                (Origin::Event { pid, backend: self.backend() }, crate::audit::Cause::Event, pid)
            }
            Cause::Rescan => (Origin::Rescan, crate::audit::Cause::Rescan, None),
        };
        let writer = self.audit.writer(origin);
        let file = name.to_string_lossy();
        let names: Vec<String> = pods.iter().map(|p| p.name.to_string()).collect();
        match &error {
            None => info!(
                file = %file,
                %action,
                pods = ?names,
                sha256 = sha256.as_deref(),
                pid,
                writer.uid = writer.uid,
                writer = %writer.summary,
                "manifest {action}"
            ),
            Some(report) => warn!(
                file = %file,
                %action,
                sha256 = sha256.as_deref(),
                pid,
                writer.uid = writer.uid,
                writer = %writer.summary,
                "manifest rejected; its last good pods (if any) keep running:\n{report}"
            ),
        }
        let path = path.display().to_string();
        let refusals = match action {
            Action::Added | Action::Changed => {
                self.audit.refusals(ManifestSource::File, pods.iter().map(|p| &*p.pod))
            }
            _ => Default::default(),
        };
        let refused = (!refusals.is_empty()).then(|| Manifest {
            source: ManifestSource::File,
            file: file.clone().into_owned(),
            path: path.clone(),
            cause: cause_kind,
            sha256: sha256.clone(),
            writer: writer.clone(),
        });
        self.audit.record(Entry {
            time: Timestamp::now().to_string(),
            source: ManifestSource::File,
            file: file.into_owned(),
            path,
            action,
            cause: cause_kind,
            pods: names,
            sha256,
            error,
            writer,
        });
        if let Some(manifest) = refused {
            self.audit.refused(manifest, &refusals);
        }
    }
}
