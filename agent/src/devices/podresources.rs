//! The pod resources API (D4), as kubelet's `podresources/v1` server (`server_v1.go`):
//! served on `<root-dir>/pod-resources/kubelet.sock`, for the node's monitoring agents
//! (a GPU exporter asks which container holds which device).
//!
//! - `List`: the active pods (admitted, not terminated), each with its restartable init
//!   containers (sidecars, which hold their devices while the pod runs) and then its
//!   containers, and each container's devices;
//! - `GetAllocatableResources`: the devices pods may be given, allocated or not;
//! - `Get`: one pod the node knows, by namespace and name (active or not, as kubelet's
//!   pod manager answers); an unknown pod is kubelet's error, "pod NAME in namespace NS
//!   not found".
//!
//! Outpost has no CPU or memory manager: `cpu_ids` and `memory` are always empty. Calls
//! are rate limited as kubelet's (a token bucket of 10 calls refilled at 100 a second,
//! `ResourceExhausted` "rejected by rate limit" past it).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};
use outpost_core::pace::TokenBucket;
use outpost_kubelet_api::podresources::v1;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use tracing::{Instrument, info, info_span};

use crate::devices::socket::{Removal, listen_in_place};
use crate::task::{Stop, Task};

/// Calls a second, and at once (kubelet's `DefaultQPS` and `DefaultBurstTokens`).
pub const QPS: f64 = 100.0;
pub const BURST: u32 = 10;

/// What the API reads: the pods (the pod workers') and their devices (the device
/// manager's).
pub trait Source: Send + Sync + 'static {
    /// The node's active pods: admitted and not terminated (kubelet's `GetActivePods`).
    fn active_pods(&self) -> Vec<Arc<Pod>>;
    /// A pod the node knows, by namespace and name, active or not (kubelet's pod
    /// manager's `GetPodByName`).
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    /// The devices given to a container of the pod with UID `pod_uid`, one entry per
    /// resource (and NUMA node, as kubelet's device manager groups them).
    fn container_devices(&self, pod_uid: &str, container: &str) -> Vec<v1::ContainerDevices>;
    /// The node's devices pods may be given, allocated or not: the healthy devices of
    /// the registered plugins.
    fn allocatable_devices(&self) -> Vec<v1::ContainerDevices>;
}

/// Errors of the pod resources API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on the pod resources socket {}: {source}", socket.display())]
    Listen {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("serving the pod resources API on {} failed: {source}", socket.display())]
    Serve {
        socket: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
}

/// How long a stopping server may take to answer the calls it is serving.
const STOP: Duration = Duration::from_secs(1);

/// Listens on `socket` (its directory made, what was there replaced) and returns the task
/// (`pod_resources`) that serves the API from `source`. Stopped (or dropped), the task
/// removes the socket.
pub fn start(socket: PathBuf, source: Arc<dyn Source>) -> Result<Task, Error> {
    let (listener, id) = listen_in_place(&socket)
        .map_err(|source| Error::Listen { socket: socket.clone(), source })?;
    let removal = Removal { socket: socket.clone(), id: Some(id) };
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    let task = async move {
        let _removal = removal;
        let listener = tokio::net::UnixListener::from_std(listener)
            .map_err(|source| Error::Listen { socket: socket.clone(), source })?;
        let limiter = Limiter::new();
        let service = v1::pod_resources_lister_server::PodResourcesListerServer::with_interceptor(
            Lister { source },
            move |request| limiter.check(request),
        );
        info!(socket = %socket.display(), "serving the pod resources API");
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), stopped.cancelled())
            .instrument(info_span!("pod_resources", socket = %socket.display()))
            .await
            .map_err(|source| Error::Serve { socket, source })
    };
    Ok(Task::new("pod_resources", task).stop(Stop::Cancel(stop, STOP)))
}

/// kubelet's rate limit: a call past the bucket is refused before it is served.
#[derive(Debug, Clone)]
struct Limiter {
    bucket: Arc<Mutex<(Instant, TokenBucket)>>,
}

impl Limiter {
    fn new() -> Limiter {
        let bucket = TokenBucket::new(QPS, BURST, Duration::ZERO);
        Limiter { bucket: Arc::new(Mutex::new((Instant::now(), bucket))) }
    }

    fn check(&self, request: Request<()>) -> Result<Request<()>, Status> {
        let mut guard = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let (origin, bucket) = &mut *guard;
        admit(bucket, origin.elapsed())?;
        Ok(request)
    }
}

/// Takes a call's token at `now` from `bucket`, or refuses it with kubelet's status.
pub(crate) fn admit(bucket: &mut TokenBucket, now: Duration) -> Result<(), Status> {
    if bucket.try_take(now) {
        Ok(())
    } else {
        Err(Status::resource_exhausted("rejected by rate limit"))
    }
}

/// The service.
struct Lister {
    source: Arc<dyn Source>,
}

impl std::fmt::Debug for Lister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lister").finish_non_exhaustive()
    }
}

/// A restartable init container (a sidecar: `restartPolicy: Always`), which keeps its
/// devices while the pod runs.
fn is_restartable(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

impl Lister {
    /// A pod's resources: its restartable init containers, then its containers.
    fn pod_resources(&self, pod: &Pod) -> v1::PodResources {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let spec = pod.spec.as_ref();
        let init = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or_default();
        let main = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
        let containers = init
            .iter()
            .filter(|c| is_restartable(c))
            .chain(main)
            .map(|container| v1::ContainerResources {
                name: container.name.clone(),
                devices: self.source.container_devices(uid, &container.name),
                cpu_ids: Vec::new(),
                memory: Vec::new(),
            })
            .collect();
        v1::PodResources {
            name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            containers,
        }
    }
}

#[tonic::async_trait]
impl v1::pod_resources_lister_server::PodResourcesLister for Lister {
    async fn list(
        &self,
        _: Request<v1::ListPodResourcesRequest>,
    ) -> Result<Response<v1::ListPodResourcesResponse>, Status> {
        let pod_resources =
            self.source.active_pods().iter().map(|pod| self.pod_resources(pod)).collect();
        Ok(Response::new(v1::ListPodResourcesResponse { pod_resources }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<v1::AllocatableResourcesRequest>,
    ) -> Result<Response<v1::AllocatableResourcesResponse>, Status> {
        Ok(Response::new(v1::AllocatableResourcesResponse {
            devices: self.source.allocatable_devices(),
            cpu_ids: Vec::new(),
            memory: Vec::new(),
        }))
    }

    async fn get(
        &self,
        request: Request<v1::GetPodResourcesRequest>,
    ) -> Result<Response<v1::GetPodResourcesResponse>, Status> {
        let request = request.into_inner();
        let Some(pod) = self.source.pod(&request.pod_namespace, &request.pod_name) else {
            return Err(Status::unknown(format!(
                "pod {} in namespace {} not found",
                request.pod_name, request.pod_namespace
            )));
        };
        let pod_resources = Some(self.pod_resources(&pod));
        Ok(Response::new(v1::GetPodResourcesResponse { pod_resources }))
    }
}

#[cfg(test)]
mod tests;
