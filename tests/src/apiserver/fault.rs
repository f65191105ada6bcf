//! Fault injection: the next N requests matching a (verb, resource) fail with a 500,
//! 429 or 503, answered as the real server answers them: a `metav1.Status` with reason
//! `InternalError`, `TooManyRequests` or `ServiceUnavailable`, and for 429 and 503 a
//! `Retry-After` header and `details.retryAfterSeconds` when one is given. A failed
//! request is counted in the audit like any other.

use std::sync::Mutex;

use super::error::Error;

/// How a request fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    kind: Kind,
    retry_after: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Internal,
    TooManyRequests,
    Unavailable,
}

impl Fault {
    /// 500 `InternalError` (a storage error, a panic in a handler).
    pub fn internal_error() -> Fault {
        Fault { kind: Kind::Internal, retry_after: None }
    }

    /// 429 `TooManyRequests` (max-in-flight or API priority and fairness), which the
    /// real server sends with `Retry-After: 1` unless told otherwise.
    pub fn too_many_requests() -> Fault {
        Fault { kind: Kind::TooManyRequests, retry_after: Some(1) }
    }

    /// 503 `ServiceUnavailable` (an apiserver starting or shutting down).
    pub fn unavailable() -> Fault {
        Fault { kind: Kind::Unavailable, retry_after: None }
    }

    /// With `Retry-After: seconds` (429 and 503 only; a 500 carries none).
    pub fn retry_after(mut self, seconds: u64) -> Fault {
        if self.kind != Kind::Internal {
            self.retry_after = Some(seconds);
        }
        self
    }

    pub(super) fn error(self) -> Error {
        match self.kind {
            Kind::Internal => Error::Internal("Internal error occurred: injected fault".into()),
            Kind::TooManyRequests => Error::TooManyRequests { retry_after: self.retry_after },
            Kind::Unavailable => Error::Unavailable { retry_after: self.retry_after },
        }
    }
}

#[derive(Debug)]
struct Armed {
    verb: String,
    resource: String,
    remaining: u64,
    fault: Fault,
}

/// The faults armed, in the order they were armed.
#[derive(Debug, Default)]
pub struct Faults(Mutex<Vec<Armed>>);

impl Faults {
    /// The next `count` requests with `verb` on `resource` fail with `fault`.
    pub fn arm(&self, count: u64, verb: &str, resource: &str, fault: Fault) {
        if count == 0 {
            return;
        }
        let mut armed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        armed.push(Armed { verb: verb.into(), resource: resource.into(), remaining: count, fault });
    }

    /// The fault for this request, if one is armed for it (using it up).
    pub fn take(&self, verb: &str, resource: &str) -> Option<Fault> {
        let mut armed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let at = armed.iter().position(|a| a.verb == verb && a.resource == resource)?;
        let fault = armed[at].fault;
        armed[at].remaining -= 1;
        if armed[at].remaining == 0 {
            armed.remove(at);
        }
        Some(fault)
    }

    /// Disarms them all.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
    }

    /// Faults armed and not yet used.
    pub fn remaining(&self) -> u64 {
        let armed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        armed.iter().map(|a| a.remaining).sum()
    }
}
