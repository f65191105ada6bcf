//! RuntimeClasses (D5): which runtime handler a pod's sandbox and containers are made
//! with, as kubelet's RuntimeClass manager and containerd's CRI decide it.
//!
//! A pod without `runtimeClassName` runs with the node's default handler. An API pod's
//! class is a RuntimeClass object (`node.k8s.io/v1`), whose `handler` names one of the
//! node's handlers; a static pod's class names the handler directly (a static pod refers
//! to no API object, V2). A class the API server says does not exist, or a handler the
//! node does not have, fails the pod's sandbox with kubelet's message (kubelet's
//! `CreatePodSandboxError`), and the sandbox is tried again at its backoff: a class or a
//! handler that comes later is taken then.
//!
//! The class's `overhead` is not read here: the API server's RuntimeClass admission
//! copies it into the pod's `spec.overhead`, which is all kubelet uses
//! ([`crate::qos::pod_overhead`]).

#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::Pod;

/// The name of containerd's default handler: a pod without a class, and a class whose
/// handler is `runc`, run with the node's default runtime.
pub const DEFAULT_HANDLER: &str = "runc";

/// What the node knows of an API pod's RuntimeClass object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// The object, by its `handler`.
    Found(&'a str),
    /// The API server says there is no such RuntimeClass.
    Absent,
    /// Neither the API server nor what the node kept can tell: why.
    Unavailable(&'a str),
}

/// Where a pod's class leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class<'a> {
    /// A static pod's class is the name of one of the node's handlers.
    Handler,
    /// An API pod's class is a RuntimeClass object: what is known of it.
    Object(Lookup<'a>),
}

/// Why a pod's sandbox cannot be made: kubelet's words (its Event says "Failed to create
/// pod sandbox: " and this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// kubelet's RuntimeClass manager: its lister says the object does not exist.
    #[error("runtimeclass.node.k8s.io \"{0}\" not found")]
    ClassNotFound(String),
    /// kubelet's RuntimeClass manager: the object could not be read.
    #[error("failed to lookup RuntimeClass {class}: {why}")]
    Lookup { class: String, why: String },
    /// containerd's CRI, as kubelet reports its answer: the node has no such handler.
    #[error(
        "rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \"{0}\" is configured"
    )]
    NoRuntime(String),
}

/// The reason of the sandbox's failure (kubelet's `ErrCreatePodSandbox`).
pub const CREATE_POD_SANDBOX_ERROR: &str = "CreatePodSandboxError";

/// The pod's `runtimeClassName`, when it names one (an empty name is no class).
pub fn class_name(pod: &Pod) -> Option<&str> {
    let name = pod.spec.as_ref()?.runtime_class_name.as_deref()?;
    (!name.is_empty()).then_some(name)
}

/// The handler that runs the pod of class `class`, reached through `lookup`; `None`: the
/// node's default handler (the class's handler is [`DEFAULT_HANDLER`]). `configured`
/// says whether the node has a handler of that name (besides the default).
pub fn handler<'a>(
    class: &'a str,
    lookup: Class<'a>,
    configured: impl Fn(&str) -> bool,
) -> Result<Option<&'a str>, Error> {
    let handler = match lookup {
        Class::Handler => class,
        Class::Object(Lookup::Found(handler)) => handler,
        Class::Object(Lookup::Absent) => return Err(Error::ClassNotFound(class.to_owned())),
        Class::Object(Lookup::Unavailable(why)) => {
            return Err(Error::Lookup { class: class.to_owned(), why: why.to_owned() });
        }
    };
    if handler.is_empty() || handler == DEFAULT_HANDLER {
        return Ok(None);
    }
    if configured(handler) { Ok(Some(handler)) } else { Err(Error::NoRuntime(handler.to_owned())) }
}
