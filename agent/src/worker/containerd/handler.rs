//! The runtime handler a pod's sandbox and containers are made with (D5): the handler of
//! its class, looked up as kubelet's RuntimeClass manager does (an API pod's RuntimeClass
//! object, from the objects' cache) or by name (a static pod's), among the node's.

use k8s_openapi::api::core::v1::Pod;
use outpost_core::pod;
use outpost_core::pod_worker::{SandboxProblem, SandboxReason};
use outpost_core::runtime_class::{self, Class, Lookup};

use super::Pods;
use super::sandbox::problem;
use crate::runtime::handler::Handler;
use crate::runtime::spec::projection::{Object, Reference, Resolution};

/// D5: the runtime handler of the pod's class, and its name (`None`: the default
/// handler): an API pod's through its RuntimeClass object (as the objects' cache knows
/// it, kept through an outage), a static pod's by name among the node's handlers. A
/// class or a handler that is not there fails the sandbox with kubelet's words.
pub(super) async fn resolve(
    pods: &Pods,
    pod: &Pod,
) -> Result<(Option<String>, Handler), SandboxProblem> {
    let handlers = &pods.settings.handlers;
    let configured = |name: &str| handlers.has(name);
    let chosen = match runtime_class::class_name(pod) {
        None => Ok(None),
        Some(class) if crate::objects::is_static(pod) => {
            runtime_class::handler(class, Class::Handler, configured).map(|h| h.map(str::to_owned))
        }
        Some(class) => {
            let reference = Reference::RuntimeClass(class.to_owned());
            let references = std::collections::BTreeSet::from([reference.clone()]);
            let resolved = pods.settings.objects.resolve(pod, &references).await;
            let lookup = match resolved.0.get(&reference) {
                Some(Resolution::Found(Object::RuntimeClass(object))) => {
                    Lookup::Found(object.handler.as_str())
                }
                Some(Resolution::Absent) => Lookup::Absent,
                Some(Resolution::Unavailable(why)) => Lookup::Unavailable(why.as_str()),
                Some(Resolution::Found(_)) | None => Lookup::Unavailable("not read yet"),
            };
            runtime_class::handler(class, Class::Object(lookup), configured)
                .map(|h| h.map(str::to_owned))
        }
    };
    let name = chosen.map_err(|e| problem(SandboxReason::CreatePodSandboxError, e.to_string()))?;
    let handler = handlers
        .get(name.as_deref())
        .cloned()
        .unwrap_or_else(|| handlers.default_handler().clone());
    if let Some(name) = &name {
        tracing::info!(
            pod.uid = pod::uid(pod),
            handler = name,
            "running the pod with runtime handler"
        );
    }
    Ok((name, handler))
}
