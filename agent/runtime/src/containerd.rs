//! The connection to containerd: a gRPC channel over its unix socket, every request in
//! Outpost's containerd namespace (and, inside [`Containerd::with_lease`], in a lease).
//!
//! The namespace and lease travel as gRPC metadata (`containerd-namespace`,
//! `containerd-lease`). They are added by one interceptor that every client this module
//! hands out goes through, so no call can forget them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::content_client::ContentClient;
use containerd_client::services::v1::diff_client::DiffClient;
use containerd_client::services::v1::events_client::EventsClient;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::introspection_client::IntrospectionClient;
use containerd_client::services::v1::leases_client::LeasesClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::version_client::VersionClient;
use outpost_core::backoff::Backoff;
use outpost_core::error_chain::describe;
use tonic::metadata::{AsciiMetadataValue, errors::InvalidMetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// The snapshotter images are unpacked into, and containers' rootfs prepared on.
pub const SNAPSHOTTER: &str = "overlayfs";

/// The containerd namespace that holds everything Outpost creates (unless told otherwise).
pub const NAMESPACE: &str = "outpost";

/// containerd's own default socket.
pub const DEFAULT_SOCKET: &str = "/run/containerd/containerd.sock";

/// How long a connection attempt (and its version handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The gRPC metadata key containerd reads the namespace from.
const NAMESPACE_HEADER: &str = "containerd-namespace";
/// The gRPC metadata key containerd reads the lease from.
const LEASE_HEADER: &str = "containerd-lease";

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot connect to containerd at {}: is containerd running? Start it \
         (`systemctl start containerd`) or point --containerd-socket at its socket",
        socket.display()
    )]
    Connect {
        socket: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
    #[error(
        "containerd at {} did not answer within {CONNECT_TIMEOUT:?}: is it overloaded or hung?",
        socket.display()
    )]
    Timeout { socket: PathBuf },
    #[error(
        "{} accepted a connection but did not answer containerd's Version call: \
         is it really containerd's gRPC socket (not the ttrpc or debug socket)?",
        socket.display()
    )]
    Handshake {
        socket: PathBuf,
        #[source]
        source: tonic::Status,
    },
    #[error("asking containerd at {} for its version", socket.display())]
    Version {
        socket: PathBuf,
        #[source]
        source: tonic::Status,
    },
    #[error("containerd namespace {namespace:?} cannot be sent as gRPC metadata")]
    Namespace {
        namespace: String,
        #[source]
        source: InvalidMetadataValue,
    },
    #[error("lease id {lease:?} cannot be sent as gRPC metadata")]
    LeaseId {
        lease: String,
        #[source]
        source: InvalidMetadataValue,
    },
}

/// Whether a call failed because containerd could not be reached (it is restarting, or
/// the connection broke under the call), rather than containerd refusing it: the same
/// call may succeed once containerd is back. tonic reports a connection that breaks
/// under a call as `Unknown`, a transport error its source.
pub fn unreachable(status: &tonic::Status) -> bool {
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::Cancelled => true,
        tonic::Code::Unknown => std::error::Error::source(status)
            .is_some_and(|source| source.is::<tonic::transport::Error>()),
        _ => false,
    }
}

/// The metadata every request carries.
#[derive(Debug, Clone)]
pub struct Metadata {
    namespace: AsciiMetadataValue,
    lease: Option<AsciiMetadataValue>,
}

impl Interceptor for Metadata {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let metadata = request.metadata_mut();
        metadata.insert(NAMESPACE_HEADER, self.namespace.clone());
        if let Some(lease) = &self.lease {
            metadata.insert(LEASE_HEADER, lease.clone());
        }
        Ok(request)
    }
}

/// A channel whose requests carry Outpost's namespace (and lease, if any).
pub type Service = InterceptedService<Channel, Metadata>;

/// containerd's version, as its Version service reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub version: String,
    pub revision: String,
}

/// How many kills and task deletions run at once in a shim shared by the whole node
/// (`shimGrouping: node`, [`Containerd::with_shared_shim`]). containerd 1.6's runc shim
/// holds a container's lock while its `runc kill` runs and waits for that runc's exit from
/// the shim's reaper, and handles every exit on one goroutine that needs the exiting
/// container's lock; the reaper hands exits to that goroutine through a channel of 32. A
/// hundred kills at once (B5's teardown, issue 38) fill it with runc's and the containers'
/// exits while the exit goroutine waits on a killed container's lock: the reaper then
/// delivers one exit a second, and every call into the shim waits behind it for minutes.
/// A few calls at a time keep the exits in flight far below 32. Per-pod shims have a
/// reaper each and need no bound.
pub const SHARED_SHIM_CALLS: usize = 4;

/// A connection to containerd. Cheap to clone; requests reconnect by themselves if
/// containerd restarts.
#[derive(Debug, Clone)]
pub struct Containerd {
    socket: PathBuf,
    channel: Channel,
    metadata: Metadata,
    /// With one shim for the node: the turns of the calls that make its processes exit
    /// ([`SHARED_SHIM_CALLS`]), shared by every clone.
    shared_shim: Option<std::sync::Arc<tokio::sync::Semaphore>>,
}

impl Containerd {
    /// Connects to the socket and checks that containerd answers (its Version call).
    pub async fn connect(socket: &Path) -> Result<Containerd> {
        let timeout = |_| Error::Timeout { socket: socket.to_owned() };
        let channel = tokio::time::timeout(CONNECT_TIMEOUT, containerd_client::connect(socket))
            .await
            .map_err(timeout)?
            .map_err(|source| Error::Connect { socket: socket.to_owned(), source })?;
        let containerd = Containerd {
            socket: socket.to_owned(),
            channel,
            metadata: Metadata {
                namespace: AsciiMetadataValue::from_static(NAMESPACE),
                lease: None,
            },
            shared_shim: None,
        };
        let mut version = containerd.version_client();
        tokio::time::timeout(CONNECT_TIMEOUT, version.version(()))
            .await
            .map_err(timeout)?
            .map_err(|source| Error::Handshake { socket: socket.to_owned(), source })?;
        Ok(containerd)
    }

    /// Connects, retrying with `backoff` until containerd answers; logs each distinct
    /// failure once (and a retry count with it), then success. Cancel by dropping it.
    pub async fn connect_with_backoff(socket: &Path, mut backoff: Backoff) -> Containerd {
        let mut last_failure: Option<String> = None;
        let mut attempts = 0u64;
        loop {
            attempts += 1;
            match Containerd::connect(socket).await {
                Ok(containerd) => {
                    if last_failure.is_some() {
                        tracing::info!(socket = %socket.display(), attempts, "connected to containerd");
                    }
                    return containerd;
                }
                Err(e) => {
                    let failure = describe(&e);
                    let delay = backoff.next_delay(fastrand::f64());
                    if last_failure.as_deref() != Some(failure.as_str()) {
                        tracing::warn!(
                            socket = %socket.display(),
                            error = %failure,
                            retry_in = ?delay,
                            "containerd is not reachable; retrying with backoff"
                        );
                        last_failure = Some(failure);
                    } else {
                        tracing::debug!(attempts, retry_in = ?delay, "containerd still not reachable");
                    }
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// containerd's version (for the node's nodeInfo).
    pub async fn version(&self) -> Result<Version> {
        let response = self
            .version_client()
            .version(())
            .await
            .map_err(|source| Error::Version { socket: self.socket.clone(), source })?
            .into_inner();
        Ok(Version { version: response.version, revision: response.revision })
    }

    /// The same connection, in the containerd namespace `namespace`.
    pub fn with_namespace(&self, namespace: &str) -> Result<Containerd> {
        let value = AsciiMetadataValue::try_from(namespace)
            .map_err(|source| Error::Namespace { namespace: namespace.to_owned(), source })?;
        let mut containerd = self.clone();
        containerd.metadata.namespace = value;
        Ok(containerd)
    }

    /// The socket it connects to (the shims it starts name it as `-address`).
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// The containerd namespace requests go to.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.to_str().unwrap_or(NAMESPACE)
    }

    /// The same connection with every request inside the lease `id` (containerd's GC
    /// keeps what is written or prepared under a lease until the lease is deleted).
    pub fn with_lease(&self, id: &str) -> Result<Containerd> {
        let lease = AsciiMetadataValue::try_from(id)
            .map_err(|source| Error::LeaseId { lease: id.to_owned(), source })?;
        let mut containerd = self.clone();
        containerd.metadata.lease = Some(lease);
        Ok(containerd)
    }

    /// The same connection for a node whose containers all share one shim: every kill and
    /// task deletion (of a container or an exec process) made through it, and through its
    /// clones, waits for one of [`SHARED_SHIM_CALLS`] turns ([`Containerd::in_shim`]).
    pub fn with_shared_shim(&self) -> Containerd {
        let mut containerd = self.clone();
        let turns = tokio::sync::Semaphore::new(SHARED_SHIM_CALLS);
        containerd.shared_shim = Some(std::sync::Arc::new(turns));
        containerd
    }

    /// Makes `call`, a kill or a task deletion, waiting first for a turn in the node's one
    /// shim when it has one ([`Containerd::with_shared_shim`]). Waiting for an exit needs no
    /// turn: it makes none.
    pub async fn in_shim<T>(&self, call: impl Future<Output = T>) -> T {
        // Never closed; were it, the call would go unbounded rather than fail.
        let _turn = match &self.shared_shim {
            Some(turns) => turns.acquire().await.ok(),
            None => None,
        };
        call.await
    }

    fn service(&self) -> Service {
        InterceptedService::new(self.channel.clone(), self.metadata.clone())
    }

    pub fn version_client(&self) -> VersionClient<Service> {
        VersionClient::new(self.service())
    }

    pub fn content(&self) -> ContentClient<Service> {
        ContentClient::new(self.service())
    }

    pub fn images(&self) -> ImagesClient<Service> {
        ImagesClient::new(self.service())
    }

    pub fn snapshots(&self) -> SnapshotsClient<Service> {
        SnapshotsClient::new(self.service())
    }

    pub fn diff(&self) -> DiffClient<Service> {
        DiffClient::new(self.service())
    }

    pub fn leases(&self) -> LeasesClient<Service> {
        LeasesClient::new(self.service())
    }

    pub fn containers(&self) -> ContainersClient<Service> {
        ContainersClient::new(self.service())
    }

    pub fn tasks(&self) -> TasksClient<Service> {
        TasksClient::new(self.service())
    }

    pub fn events(&self) -> EventsClient<Service> {
        EventsClient::new(self.service())
    }

    /// containerd's plugins and what they export (the snapshotter's root: imagefs).
    pub fn introspection(&self) -> IntrospectionClient<Service> {
        IntrospectionClient::new(self.service())
    }

    /// Where containerd keeps images and writable layers (imagefs): the root its
    /// snapshotter exports, the agent's ([`super::image::SNAPSHOTTER`]) first, as its
    /// introspection service reports it (the same for a managed or an external
    /// containerd); `None` when no snapshotter exports one.
    pub async fn snapshotter_root(&self) -> Result<Option<std::path::PathBuf>, tonic::Status> {
        use containerd_client::services::v1::PluginsRequest;
        let request =
            PluginsRequest { filters: vec!["type==io.containerd.snapshotter.v1".to_owned()] };
        let plugins = self.introspection().plugins(request).await?.into_inner().plugins;
        let ours = SNAPSHOTTER;
        let root = plugins
            .iter()
            .filter(|p| p.id == ours)
            .chain(plugins.iter().filter(|p| p.id != ours))
            .find_map(|p| p.exports.get("root"))
            .map(std::path::PathBuf::from);
        Ok(root)
    }
}

#[cfg(test)]
mod tests;
