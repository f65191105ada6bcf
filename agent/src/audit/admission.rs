//! The audit's side of the admission policy: which pods of a manifest the node's policy
//! refuses (the pod workers refuse them: status, Event, log), recorded as a `refused`
//! entry naming the manifest, its source and every refused field.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use outpost_core::admission::policy;
use outpost_core::pod::{FullName, Source};
use tracing::warn;

use super::{Action, Cause, Entry, ManifestAudit, ManifestSource, Writer};

/// The pods of one manifest the policy refuses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refusals {
    /// `namespace/name` of each refused pod, in manifest order.
    pub pods: Vec<String>,
    /// One line per refused field: `pod <namespace/name>: <message>`.
    pub lines: Vec<String>,
}

impl Refusals {
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

/// A manifest as the audit names it.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub source: ManifestSource,
    /// Its name: the file's, the push key, the URL.
    pub file: String,
    pub path: String,
    pub cause: Cause,
    pub sha256: Option<String>,
    pub writer: Writer,
}

impl ManifestSource {
    /// The static source of pods from `source`; `None` for the API server's.
    pub fn of(source: Source) -> Option<ManifestSource> {
        match source {
            Source::File => Some(ManifestSource::File),
            Source::Url => Some(ManifestSource::Url),
            Source::Push => Some(ManifestSource::Push),
            Source::Api => None,
        }
    }

    pub fn pod_source(self) -> Source {
        match self {
            ManifestSource::File => Source::File,
            ManifestSource::Url => Source::Url,
            ManifestSource::Push => Source::Push,
        }
    }
}

impl ManifestAudit {
    /// What the node's admission policy refuses of `pods`, from `source`.
    pub fn refusals<'a>(
        &self,
        source: ManifestSource,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) -> Refusals {
        let policy = self.policy();
        let mut refusals = Refusals::default();
        for pod in pods {
            let findings = policy::review(pod, source.pod_source(), &policy);
            if findings.is_empty() {
                continue;
            }
            let name = FullName::of(pod).to_string();
            refusals.lines.extend(findings.iter().map(|f| format!("pod {name}: {}", f.message)));
            refusals.pods.push(name);
        }
        refusals
    }

    /// Records (and logs) that `manifest`'s pods are refused, if any are.
    pub fn refused(&self, manifest: Manifest, refusals: &Refusals) {
        if refusals.is_empty() {
            return;
        }
        let report = refusals.lines.join("\n");
        warn!(
            source = ?manifest.source,
            file = %manifest.file,
            pods = ?refusals.pods,
            writer = %manifest.writer.summary,
            "the admission policy refuses pods of this manifest; they do not run:\n{report}"
        );
        self.record(Entry {
            time: Timestamp::now().to_string(),
            source: manifest.source,
            file: manifest.file,
            path: manifest.path,
            action: Action::Refused,
            cause: manifest.cause,
            pods: refusals.pods.clone(),
            sha256: manifest.sha256,
            error: Some(report),
            writer: manifest.writer,
        });
    }
}
