//! The pod and the container a streaming path names, found in the pod's live status.

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::{Named, Refusal};
use crate::api::AppState;

/// A container found running.
#[derive(Debug)]
pub(super) struct Found {
    pub uid: String,
    /// The containerd container ID.
    pub id: String,
    /// Its spec's `stdin` and `stdinOnce`.
    pub stdin: Stdin,
}

/// Whether a container has stdin to attach to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stdin {
    None,
    /// `stdin: true`: open across attach sessions.
    Open,
    /// `stdinOnce` too: closed when the first attach that wrote to it ends.
    Once,
}

impl Stdin {
    fn of(pod: &Pod, container: &str) -> Stdin {
        let Some(spec) = &pod.spec else { return Stdin::None };
        let mut regular = spec.containers.iter().chain(spec.init_containers.iter().flatten());
        let flags =
            regular.find(|c| c.name == container).map(|c| (c.stdin, c.stdin_once)).or_else(|| {
                let mut ephemeral = spec.ephemeral_containers.iter().flatten();
                ephemeral.find(|c| c.name == container).map(|c| (c.stdin, c.stdin_once))
            });
        match flags {
            Some((Some(true), Some(true))) => Stdin::Once,
            Some((Some(true), _)) => Stdin::Open,
            _ => Stdin::None,
        }
    }
}

/// A pod found, for `/portForward`.
#[derive(Debug)]
pub(super) struct FoundPod {
    pub uid: String,
    /// `hostNetwork`: its ports are the host's.
    pub host_network: bool,
}

/// The pod the path names (its UID too, when the path has one).
fn find(state: &AppState, named: &Named) -> Result<std::sync::Arc<Pod>, Refusal> {
    super::super::pod::find(state, &named.namespace, &named.pod)
        .filter(|pod| named.uid.as_deref().is_none_or(|uid| outpost_core::pod::uid(pod) == uid))
        .ok_or_else(|| Refusal::PodNotFound(named.pod.clone()))
}

/// The pod the path names, for `/portForward`. (kubelet forwards into a pod whose
/// sandbox is there, running or not; so does this, as long as the agent has the pod.)
pub(super) fn locate_pod(state: &AppState, named: &Named) -> Result<FoundPod, Refusal> {
    let pod = find(state, named)?;
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
    Ok(FoundPod { uid: outpost_core::pod::uid(&pod).to_owned(), host_network })
}

/// The running container the path names.
pub(super) fn locate(state: &AppState, named: &Named) -> Result<Found, Refusal> {
    let shown = format!("{}/{}", named.namespace, named.pod);
    let pod = find(state, named)?;
    let uid = outpost_core::pod::uid(&pod).to_owned();
    let names = container_names(&pod);
    if !names.contains(&named.container) {
        return Err(Refusal::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!(
                "container {:?} not found in pod {shown}; its containers: {}",
                named.container,
                names.join(", ")
            ),
        ));
    }
    let live = container_status(&pod, &named.container);
    let running = live.filter(|s| s.state.as_ref().is_some_and(|s| s.running.is_some()));
    match running.and_then(|s| s.container_id.as_deref()).map(container_id) {
        Some(id) if !id.is_empty() => {
            Ok(Found { uid, id: id.to_owned(), stdin: Stdin::of(&pod, &named.container) })
        }
        _ => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "container {:?} in pod {shown} is not running ({}); a command runs only in a running container",
                named.container,
                describe_state(live)
            ),
        )),
    }
}

/// Every container name of the pod, init and ephemeral ones included.
pub(super) fn container_names(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else { return Vec::new() };
    let init = spec.init_containers.iter().flatten().map(|c| &c.name);
    let ephemeral = spec.ephemeral_containers.iter().flatten().map(|c| &c.name);
    spec.containers.iter().map(|c| &c.name).chain(init).chain(ephemeral).cloned().collect()
}

fn container_status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    [
        &status.container_statuses,
        &status.init_container_statuses,
        &status.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .find(|s| s.name == name)
}

/// `<runtime>://<id>` → `<id>`.
pub(super) fn container_id(full: &str) -> &str {
    full.split_once("://").map_or(full, |(_, id)| id)
}

/// A container's state in a few words: `waiting: ContainerCreating`, `terminated: Completed`.
pub(super) fn describe_state(status: Option<&ContainerStatus>) -> String {
    let Some(state) = status.and_then(|s| s.state.as_ref()) else {
        return "it has not been created yet".to_owned();
    };
    let reason = |r: Option<&String>| r.map(|r| format!(": {r}")).unwrap_or_default();
    if let Some(waiting) = &state.waiting {
        format!("waiting{}", reason(waiting.reason.as_ref()))
    } else if let Some(terminated) = &state.terminated {
        format!(
            "terminated{}, exit code {}",
            reason(terminated.reason.as_ref()),
            terminated.exit_code
        )
    } else if state.running.is_some() {
        "running, but without a container ID yet".to_owned()
    } else {
        "its state is not known yet".to_owned()
    }
}
