//! API errors, and their wire form: a `metav1.Status` with the HTTP code, `reason` and
//! `details` the real API server gives for the same failure.

use serde_json::{Value, json};

/// A failed API request. [`Error::status`] is the `metav1.Status` body sent for it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// 404: no object of that name.
    #[error("{} \"{name}\" not found", resource.qualified())]
    NotFound { resource: GroupResource, name: String },
    /// 404: a path that names no served resource.
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// 409: create of a name that is taken.
    #[error("{} \"{name}\" already exists", resource.qualified())]
    AlreadyExists { resource: GroupResource, name: String },
    /// 409: a stale `resourceVersion` or a failed delete precondition.
    #[error("Operation cannot be fulfilled on {} \"{name}\": {problem}", resource.qualified())]
    Conflict { resource: GroupResource, name: String, problem: String },
    /// 403: an authorizer or an admission plugin refuses the request (`NewForbidden`:
    /// without the name when there is none, without the resource for a path).
    #[error("{}", forbidden(resource, name, problem))]
    Forbidden { resource: GroupResource, name: String, problem: String },
    /// 422: the object fails validation.
    #[error("{}{} \"{name}\" is invalid: {}", kind, group_suffix(group), describe(causes))]
    Invalid { kind: String, group: String, name: String, causes: Vec<Cause> },
    /// 400: the request itself is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 401: no or a wrong bearer token.
    #[error("Unauthorized")]
    Unauthorized,
    /// 405: the verb is not served on that path.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// 415: a body or patch type the server does not take.
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// 410: a resourceVersion or continue token older than the kept history.
    #[error("{0}")]
    Expired(String),
    /// 413: a body over the size limit.
    #[error("the request body is too large")]
    TooLarge,
    /// 500: a request the real server also fails on without a better reason, such as
    /// a create that carries a `resourceVersion`.
    #[error("{0}")]
    Internal(String),
    /// 429: too many requests in flight (injected by tests).
    #[error("Too many requests, please try again later.")]
    TooManyRequests { retry_after: Option<u64> },
    /// 503: the server cannot serve now (injected by tests).
    #[error("the server is currently unable to handle the request")]
    Unavailable { retry_after: Option<u64> },
    /// 504: a resourceVersion newer than the server has (it waited and gave up).
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion { requested: u64, current: u64 },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A resource as errors name it: `pods`, `leases.coordination.k8s.io`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupResource {
    pub group: &'static str,
    pub resource: &'static str,
}

impl GroupResource {
    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// One field that failed validation (`StatusCause`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueForbidden`.
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl Cause {
    pub fn required(field: &str) -> Cause {
        Cause {
            reason: "FieldValueRequired",
            field: field.to_string(),
            message: "Required value".to_string(),
        }
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> Cause {
        Cause { reason: "FieldValueInvalid", field: field.to_string(), message: message.into() }
    }

    pub fn forbidden(field: &str, message: impl Into<String>) -> Cause {
        Cause { reason: "FieldValueForbidden", field: field.to_string(), message: message.into() }
    }
}

/// `apierrors.NewForbidden`'s message.
fn forbidden(resource: &GroupResource, name: &str, problem: &str) -> String {
    match (resource.resource, name) {
        ("", _) => format!("forbidden: {problem}"),
        (_, "") => format!("{} is forbidden: {problem}", resource.qualified()),
        (_, name) => format!("{} {name:?} is forbidden: {problem}", resource.qualified()),
    }
}

/// `.group` after a kind, as a qualified kind is written (`Lease.coordination.k8s.io`).
fn group_suffix(group: &str) -> String {
    if group.is_empty() { String::new() } else { format!(".{group}") }
}

fn describe(causes: &[Cause]) -> String {
    let parts: Vec<String> = causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
    if parts.len() == 1 { parts.concat() } else { format!("[{}]", parts.join(", ")) }
}

impl Error {
    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            Error::NotFound { .. } | Error::NoRoute => 404,
            Error::AlreadyExists { .. } | Error::Conflict { .. } => 409,
            Error::Forbidden { .. } => 403,
            Error::Invalid { .. } => 422,
            Error::BadRequest(_) => 400,
            Error::Unauthorized => 401,
            Error::MethodNotAllowed => 405,
            Error::UnsupportedMediaType(_) => 415,
            Error::Expired(_) => 410,
            Error::TooLarge => 413,
            Error::Internal(_) => 500,
            Error::TooManyRequests { .. } => 429,
            Error::Unavailable { .. } => 503,
            Error::TooLargeResourceVersion { .. } => 504,
        }
    }

    /// The `reason` of the Status (`metav1.StatusReason`).
    pub fn reason(&self) -> &'static str {
        match self {
            Error::NotFound { .. } | Error::NoRoute => "NotFound",
            Error::AlreadyExists { .. } => "AlreadyExists",
            Error::Conflict { .. } => "Conflict",
            Error::Forbidden { .. } => "Forbidden",
            Error::Invalid { .. } => "Invalid",
            Error::BadRequest(_) => "BadRequest",
            Error::Unauthorized => "Unauthorized",
            Error::MethodNotAllowed => "MethodNotAllowed",
            Error::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Error::Expired(_) => "Expired",
            Error::TooLarge => "RequestEntityTooLarge",
            Error::Internal(_) => "InternalError",
            Error::TooManyRequests { .. } => "TooManyRequests",
            Error::Unavailable { .. } => "ServiceUnavailable",
            Error::TooLargeResourceVersion { .. } => "Timeout",
        }
    }

    /// The `Retry-After` the answer carries, in seconds.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Error::TooManyRequests { retry_after } | Error::Unavailable { retry_after } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// The `metav1.Status` object for this error.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        if let Some(details) = self.details() {
            status["details"] = details;
        }
        status
    }

    fn details(&self) -> Option<Value> {
        let for_resource = |resource: &GroupResource, name: &str| {
            let mut details = json!({ "name": name, "kind": resource.resource });
            if !resource.group.is_empty() {
                details["group"] = json!(resource.group);
            }
            details
        };
        match self {
            Error::NotFound { resource, name }
            | Error::AlreadyExists { resource, name }
            | Error::Conflict { resource, name, .. }
            | Error::Forbidden { resource, name, .. } => Some(for_resource(resource, name)),
            Error::Invalid { kind, group, name, causes } => {
                let causes: Vec<Value> = causes
                    .iter()
                    .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
                    .collect();
                let mut details = json!({ "name": name, "kind": kind, "causes": causes });
                if !group.is_empty() {
                    details["group"] = json!(group);
                }
                Some(details)
            }
            Error::Internal(message) => Some(json!({ "causes": [{ "message": message }] })),
            Error::TooManyRequests { retry_after: Some(seconds) }
            | Error::Unavailable { retry_after: Some(seconds) } => {
                Some(json!({ "retryAfterSeconds": seconds }))
            }
            Error::TooLargeResourceVersion { .. } => Some(json!({
                "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
                "retryAfterSeconds": 1,
            })),
            _ => None,
        }
    }
}

/// The `Status` of a successful delete that removed the object (for resources whose
/// delete does not return the object).
pub fn success(resource: &GroupResource, name: &str, uid: &str) -> Value {
    let mut details = json!({ "name": name, "kind": resource.resource, "uid": uid });
    if !resource.group.is_empty() {
        details["group"] = json!(resource.group);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}
