//! The pod, and the container when there is one, that a spec's error is about.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;

/// The pod, and the container when there is one, that an error is about; displays as
/// `pod default/web-node1 container app`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// `namespace/name` (neither can hold a `/`).
    pub pod: String,
    pub container: Option<String>,
}

impl Subject {
    /// The pod alone.
    pub fn pod(pod: &Pod) -> Self {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        Subject { pod: format!("{namespace}/{name}"), container: None }
    }

    /// The pod's namespace (for the `pod.namespace` field of logs).
    pub fn namespace(&self) -> &str {
        self.pod.split_once('/').map_or("", |(namespace, _)| namespace)
    }

    /// The pod's name (for the `pod.name` field of logs).
    pub fn name(&self) -> &str {
        self.pod.split_once('/').map_or(self.pod.as_str(), |(_, name)| name)
    }

    /// One container of the pod.
    pub fn container(pod: &Pod, container: &str) -> Self {
        Subject { container: Some(container.to_owned()), ..Subject::pod(pod) }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pod {}", self.pod)?;
        if let Some(container) = &self.container {
            write!(f, " container {container}")?;
        }
        Ok(())
    }
}
