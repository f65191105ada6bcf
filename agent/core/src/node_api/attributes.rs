//! kubelet's mapping of a request on its API to the authorizer's attributes
//! (`pkg/kubelet/server/auth.go`, `GetRequestAttributes`, as of 1.33 with
//! `KubeletFineGrainedAuthz` on): every request is on the resource `nodes`, named after
//! the node, API version `v1`, with a subresource by path:
//!
//! | path (itself or below it)        | subresources, tried in order |
//! |----------------------------------|------------------------------|
//! | `/stats`                         | `stats`                      |
//! | `/metrics` (`/metrics/cadvisor`) | `metrics`                    |
//! | `/logs`                          | `log`                        |
//! | `/checkpoint`                    | `checkpoint`                 |
//! | `/pods`, `/runningpods`          | `pods`, then `proxy`         |
//! | `/healthz`                       | `healthz`, then `proxy`      |
//! | `/configz`                       | `configz`, then `proxy`      |
//! | anything else                    | `proxy`                      |
//!
//! The fine-grained subresources (`pods`, `healthz`, `configz`) fall back to `proxy`, so
//! a role written for kubelet before 1.32 (`nodes/proxy`) keeps working.
//!
//! The verb comes from the method (`GET` → `get`, `POST` → `create`, `PUT` → `update`,
//! `PATCH` → `patch`, `DELETE` → `delete`, any other → none, which no rule grants but
//! `*`). One difference from kubelet, on purpose: a protocol upgrade (a WebSocket or
//! SPDY `/exec`, `/attach`, `/portForward`) is `create` whatever its method. kubelet
//! takes a WebSocket's `GET` as `get`, so `get nodes/proxy`, a read-only grant
//! monitoring tools hold, would run commands in containers; here it needs `create`,
//! as the same stream through the API server (`pods/exec`) does.
//!
//! A path "is below" a prefix as kubelet's `isSubpath` says: equal to it, or followed
//! by `/`. `/metricsfoo` is not below `/metrics`.

/// The resource every attribute set names.
pub const RESOURCE: &str = "nodes";
/// The API version every attribute set names (core group).
pub const API_VERSION: &str = "v1";

/// A request's verb, from its method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    Get,
    Create,
    Update,
    Patch,
    Delete,
    /// A method kubelet does not map (`HEAD`, `OPTIONS`, ...): the empty verb.
    Other,
}

impl Verb {
    /// The verb of an HTTP method (its name as sent, upper case) and whether the request
    /// asks for a protocol upgrade.
    pub fn of(method: &str, upgrade: bool) -> Verb {
        if upgrade {
            return Verb::Create;
        }
        match method {
            "GET" => Verb::Get,
            "POST" => Verb::Create,
            "PUT" => Verb::Update,
            "PATCH" => Verb::Patch,
            "DELETE" => Verb::Delete,
            _ => Verb::Other,
        }
    }

    /// The verb as a SubjectAccessReview names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::Other => "",
        }
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One attribute set of a request (the parts that vary; the resource is [`RESOURCE`],
/// the API version [`API_VERSION`], the group and namespace empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Attributes {
    pub verb: Verb,
    /// The node's name.
    pub name: String,
    pub subresource: &'static str,
}

/// The subresources a path maps to, in the order they are tried.
pub fn subresources(path: &str) -> &'static [&'static str] {
    const FINE_GRAINED: [(&str, &[&str]); 4] = [
        ("/pods", &["pods", "proxy"]),
        ("/healthz", &["healthz", "proxy"]),
        ("/configz", &["configz", "proxy"]),
        ("/runningpods", &["pods", "proxy"]),
    ];
    const COARSE: [(&str, &[&str]); 4] = [
        ("/stats", &["stats"]),
        ("/metrics", &["metrics"]),
        ("/logs", &["log"]),
        ("/checkpoint", &["checkpoint"]),
    ];
    FINE_GRAINED
        .iter()
        .chain(COARSE.iter())
        .find(|(prefix, _)| is_below(path, prefix))
        .map_or(&["proxy"], |(_, subresources)| subresources)
}

/// The attribute sets of a request on the node `node`, in the order they are tried.
pub fn request_attributes(node: &str, method: &str, upgrade: bool, path: &str) -> Vec<Attributes> {
    let verb = Verb::of(method, upgrade);
    subresources(path)
        .iter()
        .map(|&subresource| Attributes { verb, name: node.to_owned(), subresource })
        .collect()
}

/// kubelet's `isSubpath`: `path` is `prefix` (a trailing `/` of the prefix ignored) or
/// is under it.
pub fn is_below(path: &str, prefix: &str) -> bool {
    let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
    path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}
