//! The node's API as kubelet authorizes it (N1), without IO: which authorizer
//! attributes a request maps to ([`attributes`]; kubelet tries them in order and the
//! first allowed lets the request on), kubelet's refusal ([`forbidden_message`]), and the
//! bounded, expiring cache of TokenReview and SubjectAccessReview answers ([`cache`]).
//!
//! - [`attributes`]: kubelet's `GetRequestAttributes`: `nodes/<subresource>` by path,
//!   the verb by method, an upgrade counted as `create`.
//! - [`cache`]: answers kept for a time-to-live, bounded in entries, and still readable
//!   once expired (what is used while the API server cannot be asked).

pub mod attributes;
pub mod cache;

pub use self::attributes::{Attributes, RESOURCE, Verb, request_attributes};
pub use self::cache::{Cache, Lookup};

/// What the authorizer answered for one attribute set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    Allow,
    /// Denied, or no opinion: both refuse (kubelet treats anything but an allow so).
    Deny,
}

/// kubelet's answer to a refused request:
/// `Forbidden (user=<name>, verb=<verb>, resource=nodes, subresource(s)=[<a> <b>])`,
/// the subresources as kubelet 1.32+ lists them (Go's `%v` of a string slice).
pub fn forbidden_message(user: &str, attributes: &[Attributes]) -> String {
    let verb = attributes.first().map_or("", |a| a.verb.as_str());
    let subresources = attributes.iter().map(|a| a.subresource).collect::<Vec<_>>().join(" ");
    format!(
        "Forbidden (user={user}, verb={verb}, resource={RESOURCE}, subresource(s)=[{subresources}])"
    )
}

#[cfg(test)]
mod tests;
