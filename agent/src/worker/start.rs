//! Starting one container of a pod: its image (present, or pulled by imagePullPolicy),
//! its OCI spec, the containerd container and task with the CRI labels, the logger.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod};
use outpost_core::lifecycle::{self, PullPolicy};
use outpost_core::pod;

use super::Runtime;
use super::sandbox::{Sandbox, cgroup_parent};
use crate::error_chain::describe;
use crate::runtime::container::{
    self, LABEL_CONTAINER_NAME, LABEL_GRACE_PERIOD, LABEL_HASH, LABEL_POD_NAME,
    LABEL_POD_NAMESPACE, LABEL_POD_UID, LABEL_RESTART_COUNT, LABEL_STARTED_AT, NewContainer,
};
use crate::runtime::image::pull::{self, PullErrorKind};
use crate::runtime::image::resolve::{self, Image};
use crate::runtime::logs;
use crate::runtime::spec::{self, Namespaces, PodContext};
use crate::sync::events::{EventType, pod_ref, reason};

/// Why a container could not be started: kubelet's waiting reason and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    pub reason: &'static str,
    pub message: String,
    /// Pulling failed (the next failure reports ImagePullBackOff).
    pub pull: bool,
}

impl StartFailure {
    fn new(reason: &'static str, message: String) -> StartFailure {
        StartFailure { reason, message, pull: false }
    }
}

/// A started container.
#[derive(Debug, Clone)]
pub struct Started {
    pub id: String,
    pub image_id: String,
    pub started_at: jiff::Timestamp,
}

/// Creates and starts `container` of `pod` as restart number `restart_count`; its task
/// events are routed to `outbox` from before it starts.
pub async fn start(
    runtime: &Runtime,
    pod: &Pod,
    sandbox: &Sandbox,
    container: &Container,
    restart_count: u32,
    hash: &str,
    outbox: &super::Outbox,
) -> Result<Started, StartFailure> {
    let object = pod_ref(pod, Some(&container.name));
    let image = ensure_image(runtime, container, &object).await?;
    let id = new_container_id();
    let uid = pod::uid(pod);
    let parent = cgroup_parent(uid);
    let ns = &sandbox.namespaces;
    let context = PodContext {
        pod,
        node_name: &runtime.settings.node_name,
        pod_ips: &sandbox.ips,
        host_ip: runtime.settings.host_ip,
        namespaces: Namespaces {
            network: ns.network.as_deref(),
            ipc: ns.ipc.as_deref(),
            uts: ns.uts.as_deref(),
        },
        pod_dir: &sandbox.pod_dir,
        cgroup_parent: &parent,
        host_capabilities: &runtime.settings.host_capabilities,
    };
    let spec = spec::container_spec(&context, container, &image.config, &id)
        .map_err(|e| StartFailure::new("CreateContainerConfigError", describe(&e)))?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let log_path = logs::container_log_path(
        &runtime.settings.pod_log_dir,
        namespace,
        name,
        uid,
        &container.name,
        restart_count,
    );
    let log_uri = logs::logger_uri(&runtime.settings.exe, &log_path)
        .map_err(|e| StartFailure::new("CreateContainerError", describe(&e)))?;
    let started_at = jiff::Timestamp::now();
    let labels: HashMap<String, String> = [
        (LABEL_POD_UID, uid.to_owned()),
        (LABEL_POD_NAMESPACE, namespace.to_owned()),
        (LABEL_POD_NAME, name.to_owned()),
        (LABEL_CONTAINER_NAME, container.name.clone()),
        (LABEL_RESTART_COUNT, restart_count.to_string()),
        (LABEL_HASH, hash.to_owned()),
        (LABEL_STARTED_AT, started_at.to_string()),
        (LABEL_GRACE_PERIOD, lifecycle::grace_period(pod).as_secs().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let new = NewContainer {
        id: &id,
        image: &image.name,
        parent_snapshot: &image.chain_id,
        spec: &spec,
        labels,
        log_uri: &log_uri,
    };
    container::create(&runtime.containerd, &new)
        .await
        .map_err(|e| StartFailure::new("CreateContainerError", describe(&e)))?;
    let events = &runtime.events;
    events.emit(
        &object,
        EventType::Normal,
        reason::CREATED,
        format!("Created container: {}", container.name),
    );
    runtime.routes.add(&id, outbox);
    if let Err(e) = container::start(&runtime.containerd, &id).await {
        runtime.routes.remove(&id);
        let _ = container::remove(&runtime.containerd, &id).await;
        return Err(StartFailure::new("RunContainerError", describe(&e)));
    }
    events.emit(
        &object,
        EventType::Normal,
        reason::STARTED,
        format!("Started container {}", container.name),
    );
    Ok(Started { id, image_id: image.digest, started_at })
}

/// The container's image, pulled first if its imagePullPolicy says so. An `Always` image
/// that cannot be pulled because the registry is unreachable runs from the local copy
/// when there is one: an edge node must restart its pods with no network. Records
/// kubelet's image events on `object` (the container).
async fn ensure_image(
    runtime: &Runtime,
    container: &Container,
    object: &ObjectReference,
) -> Result<Image, StartFailure> {
    let events = &runtime.events;
    let reference = container.image.as_deref().unwrap_or_default();
    let present = resolve::resolve(&runtime.containerd, reference).await.map_err(|e| {
        let message = format!("Failed to inspect image \"{reference}\": {}", describe(&e));
        events.emit(object, EventType::Warning, reason::INSPECT_FAILED, message.clone());
        StartFailure::new("InspectFailed", message)
    })?;
    let policy = PullPolicy::of(container);
    match (policy, present) {
        (PullPolicy::Never, None) => {
            let message =
                format!("Container image \"{reference}\" is not present with pull policy of Never");
            events.emit(object, EventType::Warning, reason::ERR_IMAGE_NEVER_PULL, message.clone());
            Err(StartFailure::new("ErrImageNeverPull", message))
        }
        (PullPolicy::Never | PullPolicy::IfNotPresent, Some(image)) => {
            events.emit(
                object,
                EventType::Normal,
                reason::PULLED,
                format!("Container image \"{reference}\" already present on machine"),
            );
            Ok(image)
        }
        (_, present) => {
            events.emit(
                object,
                EventType::Normal,
                reason::PULLING,
                format!("Pulling image \"{reference}\""),
            );
            let began = std::time::Instant::now();
            let pulled = pull::pull(
                &runtime.containerd,
                reference,
                &runtime.settings.keyring,
                &runtime.settings.pull,
            )
            .await;
            match (pulled, present) {
                (Ok(_), _) => {
                    runtime.metrics.image_pulled(began.elapsed());
                    events.emit(
                        object,
                        EventType::Normal,
                        reason::PULLED,
                        format!(
                            "Successfully pulled image \"{reference}\" in {:.3}s",
                            began.elapsed().as_secs_f64()
                        ),
                    );
                    resolve::resolve(&runtime.containerd, reference)
                        .await
                        .map_err(|e| StartFailure::new("InspectFailed", describe(&e)))?
                        .ok_or_else(|| {
                            StartFailure::new(
                                "ErrImagePull",
                                format!(
                                    "image \"{reference}\" was pulled but is not in containerd"
                                ),
                            )
                        })
                }
                (Err(e), Some(image)) if e.kind() == PullErrorKind::Unreachable => {
                    tracing::warn!(image = reference, error = %describe(&e),
                        "registry unreachable; running the image already present");
                    Ok(image)
                }
                (Err(e), _) => {
                    let message = describe(&e);
                    events.emit(
                        object,
                        EventType::Warning,
                        reason::FAILED,
                        format!("Failed to pull image \"{reference}\": {message}"),
                    );
                    Err(StartFailure { reason: "ErrImagePull", message, pull: true })
                }
            }
        }
    }
}

/// A new containerd container ID (CRI style: random hex).
fn new_container_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// The hash of a container's spec, as kubelet labels containers with it: a different
/// hash means the container must be recreated.
pub fn container_hash(container: &Container) -> String {
    let bytes = serde_json::to_vec(container).unwrap_or_default();
    format!("{:x}", xxhash_rust::xxh3::xxh3_64(&bytes))
}
