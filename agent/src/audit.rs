//! The manifest audit: every change the file source acts on (a manifest added, changed,
//! removed or rejected), with the process that wrote it, and every manifest of a static
//! source (file, URL, push) whose pods the node's admission policy refuses, kept in
//! memory (the newest [`CAPACITY`] entries) and served at `GET /manifests/audit`, so that
//! an operator can answer "who changed this static pod" and "why does it not run".
//!
//! The writer's PID comes from fanotify (inotify has none); its command line, uid and
//! executable are read from `/proc/<pid>` when the change is handled. A writer such as
//! `cp` or `mv` has often exited by then: the eBPF exec history ([`ExecHistory`], when
//! BPF is loaded) still knows its last exec, and without it the entry says that the
//! writer exited before it could be identified. Unchanged rewrites are not changes and
//! are not audited.
//!
//! - `ring`: the bounded log itself (pure).
//! - `writer`: who wrote a file (`/proc` and exec history).
//! - `admission`: the admission policy's refusals of a manifest's pods.

pub mod admission;
pub mod ring;
pub mod writer;

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use outpost_core::admission::Policy;
use serde::{Deserialize, Serialize};

pub use self::ring::Ring;
pub use self::writer::{DataSource, KernelExec, Origin, Writer};

/// How many entries the agent keeps.
pub const CAPACITY: usize = 1000;

/// A process's last exec, as the eBPF programs recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRecord {
    /// The executable's path as passed to `execve`.
    pub filename: String,
    pub argv: Vec<String>,
    pub uid: u32,
    /// When the exec happened.
    pub at: jiff::Timestamp,
}

/// The last exec of every process (host PID namespace), kept by the eBPF loader; the
/// audit asks it about writers that exited before `/proc` could be read.
pub trait ExecHistory: Send + Sync + fmt::Debug {
    fn exec_of(&self, tgid: u32) -> Option<ExecRecord>;
}

/// What the file source did with a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// A file with no good content before now yields pods.
    Added,
    /// The file's pods changed.
    Changed,
    /// The file is gone (deleted, renamed away); its pods went with it.
    Removed,
    /// The content is not a valid manifest; the file's last good pods (if any) stay.
    Rejected,
    /// The manifest is valid, but the admission policy refuses some of its pods: they
    /// are Failed (`CapabilitiesForbidden`) and do not run; the others run.
    Refused,
    /// An ephemeral container was added to one of its pods through `outpost debug` (X4).
    Debugged,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Added => "added",
            Action::Changed => "changed",
            Action::Removed => "removed",
            Action::Rejected => "rejected",
            Action::Refused => "refused",
            Action::Debugged => "debugged",
        })
    }
}

/// What made the source look at the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cause {
    /// A kernel event on the file.
    Event,
    /// A full rescan: at start, after the kernel's queue overflowed, or when the
    /// directory was replaced.
    Rescan,
    /// A PUT to the local API (the push source).
    Push,
    /// A new document from the manifest URL.
    Fetch,
    /// A POST of an ephemeral container to the local API (`outpost debug`, X4).
    Debug,
}

/// The static source a manifest belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ManifestSource {
    #[default]
    File,
    Url,
    Push,
}

/// One audited change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// When the source handled it (RFC 3339, UTC).
    pub time: String,
    #[serde(default)]
    pub source: ManifestSource,
    /// The manifest's name in the directory (the push key; the URL).
    pub file: String,
    /// Its path (`/manifests/<key>` for a pushed one; the URL).
    pub path: String,
    pub action: Action,
    pub cause: Cause,
    /// `namespace/name` of the pods the file yields now; for a removal, those it yielded.
    pub pods: Vec<String>,
    /// `sha256:` and the first 16 hex digits of the bytes read (none for a removal).
    pub sha256: Option<String>,
    /// Why the content was rejected, or its pods refused (one line per refused field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub writer: Writer,
}

/// Which entries a reader wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this manifest: its name, or its full path.
    pub file: Option<String>,
    /// Only the newest `limit` of the matching entries.
    pub limit: Option<usize>,
}

impl Filter {
    fn matches(&self, entry: &Entry) -> bool {
        self.file.as_deref().is_none_or(|f| entry.file == f || entry.path == f)
    }
}

/// A read of the log.
#[derive(Debug, Clone)]
pub struct Listing {
    /// Oldest first.
    pub items: Vec<Arc<Entry>>,
    pub capacity: usize,
    /// Entries pushed out of the log since the agent started.
    pub dropped: u64,
}

/// The audit log: cheap to clone (all clones share it), safe to use from any thread.
/// Writes are a short mutex hold (a push); reads copy `Arc`s.
#[derive(Debug, Clone)]
pub struct ManifestAudit(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    ring: Mutex<Ring<Arc<Entry>>>,
    exec: RwLock<Option<Arc<dyn ExecHistory>>>,
    /// The node's admission policy, which [`ManifestAudit::refusals`] applies.
    policy: RwLock<Arc<Policy>>,
}

impl Default for ManifestAudit {
    fn default() -> ManifestAudit {
        ManifestAudit::new(CAPACITY, None)
    }
}

impl ManifestAudit {
    /// A log keeping the newest `capacity` entries; `exec` fills in writers that exited.
    pub fn new(capacity: usize, exec: Option<Arc<dyn ExecHistory>>) -> ManifestAudit {
        ManifestAudit(Arc::new(Shared {
            ring: Mutex::new(Ring::new(capacity)),
            exec: RwLock::new(exec),
            policy: RwLock::new(Arc::new(Policy::default())),
        }))
    }

    /// Sets (or replaces) the admission policy for every clone (the default until then).
    pub fn set_policy(&self, policy: Policy) {
        *self.0.policy.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
    }

    fn policy(&self) -> Arc<Policy> {
        self.0.policy.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Sets (or replaces) the exec history for every clone, e.g. once BPF is loaded.
    pub fn set_exec_history(&self, exec: Option<Arc<dyn ExecHistory>>) {
        *self.0.exec.write().unwrap_or_else(PoisonError::into_inner) = exec;
    }

    /// Identifies the writer of a change (see [`writer::identify`]).
    pub fn writer(&self, origin: Origin) -> Writer {
        let exec = self.0.exec.read().unwrap_or_else(PoisonError::into_inner).clone();
        writer::identify(origin, exec.as_deref())
    }

    pub fn record(&self, entry: Entry) {
        self.0.ring.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::new(entry));
    }

    /// The entries `filter` selects, oldest first.
    pub fn list(&self, filter: &Filter) -> Listing {
        let ring = self.0.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let mut items: Vec<Arc<Entry>> = ring
            .iter()
            .rev()
            .filter(|e| filter.matches(e))
            .take(filter.limit.unwrap_or(usize::MAX))
            .cloned()
            .collect();
        items.reverse();
        Listing { items, capacity: ring.capacity(), dropped: ring.dropped() }
    }
}

#[cfg(test)]
mod tests;
