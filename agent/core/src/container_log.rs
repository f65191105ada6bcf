//! Which container instance a log request reads, decided from the pod's status as
//! kubelet's `validateContainerLogStatus` decides it: `previous` reads the run the status
//! names as `lastState.terminated`; otherwise the running instance, or, while the
//! container waits or has terminated, the last run that ended. The status is the truth
//! (not the log files present): in a crash loop the newest file is the run that just
//! ended, and the runs before it are gone.
//!
//! [`named_instances`] lists every instance a status names, which the container garbage
//! collector keeps while the status names it (G1): a log request following the status
//! never finds its instance collected.

use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};

/// Why no instance can be read; the messages are kubelet's (the API server passes them
/// on to `kubectl logs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("container {container:?} in pod {pod:?} is not available")]
    NoStatus { pod: String, container: String },
    #[error("previous terminated container {container:?} in pod {pod:?} not found")]
    NoPrevious { pod: String, container: String },
    #[error("container {container:?} in pod {pod:?} is terminated")]
    Terminated { pod: String, container: String },
    #[error("container {container:?} in pod {pod:?} is waiting to start: {why}")]
    Waiting { pod: String, container: String, why: String },
    #[error("container {container:?} in pod {pod:?} is waiting to start - no logs yet")]
    NoState { pod: String, container: String },
}

/// The instance (its containerd ID, without the `containerd://` prefix) whose log
/// `container` of pod `pod` (`namespace/name`, for messages) shows under `status`.
pub fn choose(
    status: &PodStatus,
    pod: &str,
    container: &str,
    previous: bool,
) -> Result<String, Unavailable> {
    let names = || (pod.to_owned(), container.to_owned());
    let Some(found) = container_status(status, container) else {
        let (pod, container) = names();
        return Err(Unavailable::NoStatus { pod, container });
    };
    let last = found.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let last_id = last.and_then(|t| non_empty(t.container_id.as_deref()));
    let state = found.state.as_ref();
    let running = state.and_then(|s| s.running.as_ref());
    let terminated = state.and_then(|s| s.terminated.as_ref());
    let waiting = state.and_then(|s| s.waiting.as_ref());
    let id = if previous {
        last_id.ok_or_else(|| {
            let (pod, container) = names();
            Unavailable::NoPrevious { pod, container }
        })?
    } else if running.is_some() {
        non_empty(found.container_id.as_deref()).ok_or_else(|| {
            let (pod, container) = names();
            Unavailable::NoState { pod, container }
        })?
    } else if let Some(terminated) = terminated {
        // The next run did not start: its own ID is empty, the last run's is the one.
        non_empty(terminated.container_id.as_deref()).or(last_id).ok_or_else(|| {
            let (pod, container) = names();
            Unavailable::Terminated { pod, container }
        })?
    } else if let Some(last) = last {
        non_empty(last.container_id.as_deref()).ok_or_else(|| {
            let (pod, container) = names();
            Unavailable::Terminated { pod, container }
        })?
    } else if let Some(waiting) = waiting {
        let why = match waiting.reason.as_deref().unwrap_or_default() {
            "ErrImagePull" => "image can't be pulled".to_owned(),
            "ImagePullBackOff" => "trying and failing to pull image".to_owned(),
            other => other.to_owned(),
        };
        let (pod, container) = names();
        return Err(Unavailable::Waiting { pod, container, why });
    } else {
        let (pod, container) = names();
        return Err(Unavailable::NoState { pod, container });
    };
    Ok(strip_scheme(id).to_owned())
}

/// Every container instance `status` names (running, terminated, or as the last
/// termination), by containerd ID without the scheme.
pub fn named_instances(status: &PodStatus) -> impl Iterator<Item = &str> {
    let lists = [
        status.container_statuses.as_deref(),
        status.init_container_statuses.as_deref(),
        status.ephemeral_container_statuses.as_deref(),
    ];
    lists.into_iter().flatten().flatten().flat_map(|c| {
        let current = non_empty(c.container_id.as_deref());
        let state = c.state.as_ref().and_then(|s| s.terminated.as_ref());
        let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
        let ended = [state, last].into_iter().flatten();
        current
            .into_iter()
            .chain(ended.filter_map(|t| non_empty(t.container_id.as_deref())))
            .map(strip_scheme)
    })
}

fn container_status<'a>(status: &'a PodStatus, name: &str) -> Option<&'a ContainerStatus> {
    [
        status.container_statuses.as_deref(),
        status.init_container_statuses.as_deref(),
        status.ephemeral_container_statuses.as_deref(),
    ]
    .into_iter()
    .flatten()
    .flatten()
    .find(|c| c.name == name)
}

fn non_empty(id: Option<&str>) -> Option<&str> {
    id.filter(|id| !id.is_empty())
}

/// `containerd://abc` → `abc` (an ID without a scheme is taken as it is).
fn strip_scheme(id: &str) -> &str {
    id.split_once("://").map_or(id, |(_, id)| id)
}

#[cfg(test)]
mod tests;
