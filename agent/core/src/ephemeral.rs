//! Ephemeral containers (`spec.ephemeralContainers`, what `kubectl debug` adds): a
//! pod's ephemeral container read as the container it runs as, and the process
//! namespace it joins (X1, X2).

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod};
use serde_json::Value;

/// The ephemeral container `name` of the pod's spec.
pub fn find<'a>(pod: &'a Pod, name: &str) -> Option<&'a EphemeralContainer> {
    let spec = pod.spec.as_ref()?;
    spec.ephemeral_containers.iter().flatten().find(|c| c.name == name)
}

/// The ephemeral containers of the pod's spec, in order.
pub fn all(pod: &Pod) -> impl Iterator<Item = &EphemeralContainer> {
    pod.spec.iter().flat_map(|s| s.ephemeral_containers.iter().flatten())
}

/// X2: the container an ephemeral container runs as: its fields as they are, without
/// what kubelet never does for one (probes, lifecycle hooks, ports, resources, a
/// restart policy; the API server forbids them, a static pod's may not reach here with
/// them either).
pub fn as_container(ephemeral: &EphemeralContainer) -> Container {
    Container {
        name: ephemeral.name.clone(),
        image: ephemeral.image.clone(),
        image_pull_policy: ephemeral.image_pull_policy.clone(),
        command: ephemeral.command.clone(),
        args: ephemeral.args.clone(),
        working_dir: ephemeral.working_dir.clone(),
        env: ephemeral.env.clone(),
        env_from: ephemeral.env_from.clone(),
        volume_mounts: ephemeral.volume_mounts.clone(),
        volume_devices: ephemeral.volume_devices.clone(),
        security_context: ephemeral.security_context.clone(),
        stdin: ephemeral.stdin,
        stdin_once: ephemeral.stdin_once,
        tty: ephemeral.tty,
        termination_message_path: ephemeral.termination_message_path.clone(),
        termination_message_policy: ephemeral.termination_message_policy.clone(),
        ..Container::default()
    }
}

/// The container `name` of the pod, whichever list it is in: its regular, init or
/// ephemeral containers (the last as [`as_container`] gives it).
pub fn any_container<'a>(pod: &'a Pod, name: &str) -> Option<Cow<'a, Container>> {
    if let Some(container) = crate::pod::container(pod, name) {
        return Some(Cow::Borrowed(container));
    }
    find(pod, name).map(|e| Cow::Owned(as_container(e)))
}

/// X1: the container whose process namespace the ephemeral container `name` shares
/// (`targetContainerName`), if it names one.
pub fn target<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    find(pod, name)?.target_container_name.as_deref().filter(|t| !t.is_empty())
}

/// kubelet's message when the target is not running (`getTargetID`): the start fails
/// with CreateContainerConfigError and is tried again.
pub fn target_not_found(target: &str) -> String {
    format!("unable to find target container {target}")
}

/// The API server's word for a field an ephemeral container may not set.
pub const FORBIDDEN: &str = "cannot be set for an Ephemeral Container";

/// X2: the fields of an ephemeral container the API server forbids (its
/// `allowedEphemeralContainerFields`: what the pod's services rely on), by JSON name.
pub const FORBIDDEN_FIELDS: &[&str] = &[
    "lifecycle",
    "livenessProbe",
    "ports",
    "readinessProbe",
    "resizePolicy",
    "resources",
    "restartPolicy",
    "restartPolicyRules",
    "startupProbe",
];

/// X2: what kube-apiserver's validation says of one ephemeral container (as JSON) at
/// `path` (`spec.ephemeralContainers[0]`): each forbidden field set, and each volume
/// mount's `subPath` or `subPathExpr`, as `<path>.<field>` (the message is
/// [`FORBIDDEN`]).
pub fn forbidden(container: &Value, path: &str) -> Vec<String> {
    let Some(object) = container.as_object() else { return Vec::new() };
    let mut found: Vec<String> = FORBIDDEN_FIELDS
        .iter()
        .filter(|field| object.get(**field).is_some_and(is_set))
        .map(|field| format!("{path}.{field}"))
        .collect();
    let mounts = object.get("volumeMounts").and_then(Value::as_array).into_iter().flatten();
    for (i, mount) in mounts.enumerate() {
        for field in ["subPath", "subPathExpr"] {
            if mount.get(field).is_some_and(is_set) {
                found.push(format!("{path}.volumeMounts[{i}].{field}"));
            }
        }
    }
    found
}

/// X4: what is wrong with adding `container` (as JSON) to `pod`'s ephemeral containers,
/// each as `<field>: <message>` in kube-apiserver's words (`validateEphemeralContainers`):
/// a name and an image, a name no other container of the pod has, a target among its
/// regular and init containers, none of the [`FORBIDDEN_FIELDS`]. Empty: it may be added.
pub fn addition_problems(pod: &Pod, container: &Value) -> Vec<String> {
    let at = format!("spec.ephemeralContainers[{}]", all(pod).count());
    let text = |field: &str| container.get(field).and_then(Value::as_str).unwrap_or_default();
    let mut problems = Vec::new();
    for field in ["name", "image"] {
        if text(field).is_empty() {
            problems.push(format!("{at}.{field}: Required value"));
        }
    }
    let spec = pod.spec.as_ref();
    let regular = spec
        .into_iter()
        .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
    let names: Vec<&str> = regular.map(|c| c.name.as_str()).collect();
    let name = text("name");
    if !name.is_empty() && (names.contains(&name) || find(pod, name).is_some()) {
        problems.push(format!("{at}.name: Duplicate value: {name:?}"));
    }
    let target = text("targetContainerName");
    if !target.is_empty() && !names.contains(&target) {
        problems.push(format!("{at}.targetContainerName: Not found: {target:?}"));
    }
    problems.extend(
        forbidden(container, &at)
            .into_iter()
            .map(|field| format!("{field}: Forbidden: {FORBIDDEN}")),
    );
    problems
}

/// Go's zero value is "not set": null, false, 0, "", an empty list, or an object with
/// nothing set in it.
fn is_set(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => false,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(fields) => fields.values().any(is_set),
        Value::Bool(true) => true,
    }
}

#[cfg(test)]
mod tests;
