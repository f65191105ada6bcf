//! Fault injection: the next N requests matching a (verb, resource) fail with a 500,
//! 429 or 503, answered as the real server answers them: a `metav1.Status` with reason
//! `InternalError`, `TooManyRequests` or `ServiceUnavailable`, and for 429 and 503 a
//! `Retry-After` header and `details.retryAfterSeconds` when one is given. A failed
//! request is counted in the audit like any other.
//!
//! A storm fails every write (create, update, patch, delete) until it is calmed, as a
//! real cluster does for a while: 429 from API Priority and Fairness, 503 during an
//! upgrade, or 403 from the Node authorizer while its graph lags or RBAC changes. The
//! 403 is the authorizer's own refusal (`User "system:node:…" cannot patch resource …`),
//! given where the authorizer runs, after authentication; reads still pass.

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
    /// Only in a storm: the authorizer refuses (see [`Faults::forbids`]).
    Forbidden,
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

    /// 403 from the Node authorizer for every write of the node's (a storm only: a
    /// graph that lags behind a pod's binding, an RBAC change under way).
    pub fn forbidden() -> Fault {
        Fault { kind: Kind::Forbidden, retry_after: None }
    }

    /// With `Retry-After: seconds` (429 and 503 only; a 500 or 403 carries none).
    pub fn retry_after(mut self, seconds: u64) -> Fault {
        if matches!(self.kind, Kind::TooManyRequests | Kind::Unavailable) {
            self.retry_after = Some(seconds);
        }
        self
    }

    pub(super) fn error(self) -> Error {
        match self.kind {
            Kind::Internal => Error::Internal("Internal error occurred: injected fault".into()),
            Kind::TooManyRequests => Error::TooManyRequests { retry_after: self.retry_after },
            Kind::Unavailable => Error::Unavailable { retry_after: self.retry_after },
            // Armed by count it has no request to name: the authorizer's words without them.
            Kind::Forbidden => Error::Forbidden {
                resource: super::error::GroupResource { group: "", resource: "" },
                name: String::new(),
                problem: "injected authorizer refusal".into(),
            },
        }
    }
}

/// What the authorizer's refusals in a storm of 403s say they are (their reason ends
/// with it), so that a harness tells them from refusals the node earned.
pub const STORM_REFUSAL: &str = "(injected: the authorizer's graph lags)";

/// Whether `verb` writes (what a storm fails).
fn is_write(verb: &str) -> bool {
    matches!(verb, "create" | "update" | "patch" | "delete" | "deletecollection")
}

#[derive(Debug)]
struct Armed {
    verb: String,
    resource: String,
    remaining: u64,
    fault: Fault,
}

/// The faults armed, in the order they were armed, and the storm blowing, if any.
#[derive(Debug, Default)]
pub struct Faults(Mutex<Vec<Armed>>, Mutex<Option<Fault>>);

impl Faults {
    /// The next `count` requests with `verb` on `resource` fail with `fault`.
    pub fn arm(&self, count: u64, verb: &str, resource: &str, fault: Fault) {
        if count == 0 {
            return;
        }
        let mut armed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        armed.push(Armed { verb: verb.into(), resource: resource.into(), remaining: count, fault });
    }

    /// Fails every write with `fault` from now on, or (`None`) no longer.
    pub fn storm(&self, fault: Option<Fault>) {
        *self.1.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = fault;
    }

    /// The storm blowing, if any.
    fn blowing(&self) -> Option<Fault> {
        *self.1.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the authorizer refuses this request for a storm of 403s.
    pub fn forbids(&self, verb: &str) -> bool {
        self.blowing().is_some_and(|f| f.kind == Kind::Forbidden) && is_write(verb)
    }

    /// The fault for this request: a storm's (not a 403's, which the authorizer gives),
    /// or one armed for it (using it up).
    pub fn take(&self, verb: &str, resource: &str) -> Option<Fault> {
        if let Some(storm) = self.blowing()
            && storm.kind != Kind::Forbidden
            && is_write(verb)
        {
            return Some(storm);
        }
        let mut armed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let at = armed.iter().position(|a| a.verb == verb && a.resource == resource)?;
        let fault = armed[at].fault;
        armed[at].remaining -= 1;
        if armed[at].remaining == 0 {
            armed.remove(at);
        }
        Some(fault)
    }

    /// Disarms them all, the storm too.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
        self.storm(None);
    }

    /// Faults armed and not yet used.
    pub fn remaining(&self) -> u64 {
        let armed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        armed.iter().map(|a| a.remaining).sum()
    }
}
