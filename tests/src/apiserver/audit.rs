//! Request counts, keyed as the real server's audit log names requests: a verb (`get`,
//! `list`, `watch`, `create`, `update`, `patch`, `delete`) and a resource with its
//! subresource (`pods`, `pods/status`, `serviceaccounts/token`, `leases`). Requests for
//! other paths (discovery, `/version`) are counted under the verb `get` and their path.
//! Requests on a named object are also counted per object.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of the requests the server has received.
#[derive(Debug, Default)]
pub struct Audit {
    total: AtomicU64,
    by_request: Mutex<BTreeMap<(String, String), u64>>,
    /// Requests on one named object: (verb, resource, `namespace/name` or `name`).
    by_object: Mutex<BTreeMap<(String, String, String), u64>>,
}

impl Audit {
    /// Counts one request.
    pub fn record(&self, verb: &str, resource: &str) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let mut counts = self.by_request.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *counts.entry((verb.to_string(), resource.to_string())).or_default() += 1;
    }

    /// Counts one request on a named object (besides [`Audit::record`]).
    pub fn record_object(&self, verb: &str, resource: &str, object: &str) {
        let mut counts = self.by_object.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *counts.entry((verb.to_string(), resource.to_string(), object.to_string())).or_default() +=
            1;
    }

    /// Requests with this verb on this resource of one object (`namespace/name`).
    pub fn count_object(&self, verb: &str, resource: &str, object: &str) -> u64 {
        let counts = self.by_object.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (verb.to_string(), resource.to_string(), object.to_string());
        counts.get(&key).copied().unwrap_or_default()
    }

    /// All requests received.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Requests with this verb on this resource (`pods`, or `pods/status` for the
    /// subresource alone).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        let counts = self.by_request.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        counts.get(&(verb.to_string(), resource.to_string())).copied().unwrap_or_default()
    }

    /// Every (verb, resource) seen, with its count.
    pub fn snapshot(&self) -> BTreeMap<(String, String), u64> {
        self.by_request.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Forgets all counts.
    pub fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.by_request.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
        self.by_object.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
    }
}

/// Bytes of request and response bodies (not headers), one direction each, as the
/// server reads and writes them; a watch's events count as they are sent. Requests
/// proxied to a node (`pods/exec`, ...) are not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transferred {
    /// Request bodies received.
    pub received: u64,
    /// Response bodies sent.
    pub sent: u64,
}

/// Body bytes by (verb, resource), keyed as [`Audit`] keys requests.
#[derive(Debug, Default)]
pub struct Traffic(Mutex<BTreeMap<(String, String), Transferred>>);

impl Traffic {
    fn add(&self, verb: &str, resource: &str, received: u64, sent: u64) {
        let mut counts = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = counts.entry((verb.to_string(), resource.to_string())).or_default();
        entry.received += received;
        entry.sent += sent;
    }

    /// Counts a request body received.
    pub fn received(&self, verb: &str, resource: &str, bytes: usize) {
        self.add(verb, resource, bytes as u64, 0);
    }

    /// Counts response bytes sent.
    pub fn sent(&self, verb: &str, resource: &str, bytes: usize) {
        self.add(verb, resource, 0, bytes as u64);
    }

    /// Every (verb, resource) seen, with its bytes.
    pub fn snapshot(&self) -> BTreeMap<(String, String), Transferred> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Bytes over every request.
    pub fn total(&self) -> Transferred {
        let counts = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        counts.values().fold(Transferred::default(), |sum, t| Transferred {
            received: sum.received + t.received,
            sent: sum.sent + t.sent,
        })
    }

    pub fn reset(&self) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
    }
}

/// A request the server refused a node (Node authorizer or NodeRestriction, 403; or a
/// pod NodeRestriction found missing, 404).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub user: String,
    pub verb: String,
    /// `pods`, `pods/status`, or the path of a request that is not for a resource.
    pub resource: String,
    /// `namespace/name`, `name`, or empty.
    pub object: String,
    /// The Status message sent.
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {} {}: {}", self.user, self.verb, self.resource, self.object, self.message)
    }
}

/// The refusals made so far, in order.
#[derive(Debug, Default)]
pub struct Refusals(Mutex<Vec<Refusal>>);

impl Refusals {
    pub fn record(&self, refusal: Refusal) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(refusal);
    }

    /// The refusals made since the last take, which forgets them.
    pub fn take(&self) -> Vec<Refusal> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    pub fn snapshot(&self) -> Vec<Refusal> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}
