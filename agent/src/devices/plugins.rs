//! The plugins' side of the device manager: the Registration service on `kubelet.sock`,
//! and one endpoint per registered plugin (its `ListAndWatch` stream, and the calls the
//! manager makes at admission and at a container's start).
//!
//! What this side reports, the manager decides on: [`PluginEvent`]s arrive in the order a
//! plugin's life gives them (registered, then device lists, then stopped).
//!
//! As kubelet's (D1): [`start`] creates the device-plugin directory, removes the sockets
//! left in it (so that running plugins, which watch `kubelet.sock`, register again) and
//! serves `kubelet.sock`. A registration is validated (API version, extended resource
//! name), the plugin's socket dialled and its options asked for before it is answered;
//! a plugin that registers again for its resource replaces its old endpoint. The
//! directory is watched through inotify: a `kubelet.sock` someone removed is served
//! again, and a plugin whose socket is removed is stopped.
//!
//! - `directory`: the directory (its cleanup, `kubelet.sock`'s listener, the watch);
//! - `registration`: the Registration service;
//! - `endpoints`: the registered plugins and their `ListAndWatch` streams;
//! - `server`: the task that owns them.

mod directory;
mod endpoints;
mod registration;
mod server;

use std::path::{Path, PathBuf};
use std::time::Duration;

use outpost_kubelet_api::deviceplugin::v1beta1 as api;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::task::{Stop, Task};

/// The device manager's checkpoint, in the device-plugin directory: the cleanup at start
/// leaves it (and every file that is not a socket) where it is.
pub use outpost_core::devices::checkpoint::FILE_NAME as CHECKPOINT;

/// Where the plugins' side works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The device-plugin directory: `kubelet.sock` and the plugins' own sockets.
    pub plugin_dir: PathBuf,
}

/// How long the task may take to stop its plugins' streams and its server.
const STOP: Duration = Duration::from_secs(1);

/// Prepares the device-plugin directory (created, its sockets removed), listens on
/// `kubelet.sock` there and starts watching it; the task (`device_plugins`) serves the
/// Registration service and sends what happens to the plugins to `events`. It ends when
/// `events` is closed; stopped (or dropped), it stops every plugin's stream and removes
/// `kubelet.sock`.
pub fn start(settings: Settings, events: mpsc::Sender<PluginEvent>) -> Result<Task, Error> {
    let prepared = directory::prepare(&settings.plugin_dir)?;
    let stop = CancellationToken::new();
    let task = server::run(prepared, events, stop.clone());
    Ok(Task::new("device_plugins", task).stop(Stop::Cancel(stop, STOP)))
}

/// How long a call to a plugin may take (kubelet's endpoint calls have no deadline but
/// the pod's; a plugin that hangs must not hang a pod's admission forever).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What happened to a plugin, for the manager.
#[derive(Debug)]
pub enum PluginEvent {
    /// A plugin registered for `resource` (a new one, or one that registered again: the
    /// new endpoint replaces the old, as kubelet's does).
    Registered { resource: String, endpoint: Endpoint },
    /// The plugin's whole device list, from its `ListAndWatch` stream.
    Devices { resource: String, devices: Vec<api::Device> },
    /// The plugin's stream ended or its socket went away: the endpoint is stopped (its
    /// devices stay in capacity, unhealthy, for kubelet's grace period; the manager
    /// decides).
    Stopped { resource: String, endpoint: PathBuf },
}

/// Errors of the plugins' side.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("device plugin {resource:?} at {}: {source}", socket.display())]
    Connect {
        resource: String,
        socket: PathBuf,
        #[source]
        source: containerd_client::tonic::transport::Error,
    },
    #[error("device plugin {resource:?}: {call} failed: {status}")]
    Call { resource: String, call: &'static str, status: tonic::Status },
    #[error("device plugin {resource:?}: {call} did not answer within {CALL_TIMEOUT:?}")]
    Timeout { resource: String, call: &'static str },
    #[error("device plugin {resource:?}: {call} answered {got} containers' results for 1")]
    Answer { resource: String, call: &'static str, got: usize },
    #[error("cannot create the device-plugin directory {}: {source}", dir.display())]
    Directory {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot remove the stale sockets {sockets:?} of the device-plugin directory {}: \
         {source}; remove them by hand",
        dir.display()
    )]
    Cleanup {
        dir: PathBuf,
        sockets: Vec<PathBuf>,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen on {}: {source}", socket.display())]
    Listen {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot watch the device-plugin directory {} with inotify: {source}; if a per-user \
         limit is reached, raise fs.inotify.max_user_instances or max_user_watches",
        dir.display()
    )]
    Watch {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One registered plugin: its socket, options and connection. Clones share the
/// connection.
#[derive(Debug, Clone)]
pub struct Endpoint {
    resource: String,
    socket: PathBuf,
    options: api::DevicePluginOptions,
    client: api::device_plugin_client::DevicePluginClient<Channel>,
}

impl Endpoint {
    /// Connects to the plugin's socket (`endpoint` in the registration, in the
    /// device-plugin directory) and asks for its options (`GetDevicePluginOptions`, as
    /// kubelet's manager does once connected: the options in the registration request
    /// are not the ones kubelet uses).
    pub async fn connect(resource: &str, socket: &Path) -> Result<Endpoint, Error> {
        let connect = containerd_client::connect(socket);
        let channel = match tokio::time::timeout(CALL_TIMEOUT, connect).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(source)) => {
                return Err(Error::Connect {
                    resource: resource.to_owned(),
                    socket: socket.to_owned(),
                    source,
                });
            }
            Err(_) => {
                return Err(Error::Timeout { resource: resource.to_owned(), call: "connect" });
            }
        };
        let mut endpoint = Endpoint {
            resource: resource.to_owned(),
            socket: socket.to_owned(),
            options: api::DevicePluginOptions::default(),
            client: api::device_plugin_client::DevicePluginClient::new(channel),
        };
        let call = "GetDevicePluginOptions";
        let mut client = endpoint.client.clone();
        endpoint.options =
            endpoint.call(call, client.get_device_plugin_options(api::Empty {})).await?;
        Ok(endpoint)
    }

    /// The extended resource the plugin registered for.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The plugin's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// What the plugin asked for (`GetDevicePluginOptions`).
    pub fn options(&self) -> &api::DevicePluginOptions {
        &self.options
    }

    /// The client, for the `ListAndWatch` stream.
    pub fn client(&self) -> api::device_plugin_client::DevicePluginClient<Channel> {
        self.client.clone()
    }

    /// `GetPreferredAllocation` for one container, when the plugin offers it; `None`
    /// when it does not.
    pub async fn preferred_allocation(
        &self,
        available: Vec<String>,
        must_include: Vec<String>,
        size: usize,
    ) -> Result<Option<Vec<String>>, Error> {
        if !self.options.get_preferred_allocation_available {
            return Ok(None);
        }
        let request = api::PreferredAllocationRequest {
            container_requests: vec![api::ContainerPreferredAllocationRequest {
                available_device_i_ds: available,
                must_include_device_i_ds: must_include,
                allocation_size: i32::try_from(size).unwrap_or(i32::MAX),
            }],
        };
        let call = "GetPreferredAllocation";
        let mut answer =
            self.call(call, self.client.clone().get_preferred_allocation(request)).await?;
        match answer.container_responses.len() {
            1 => Ok(answer.container_responses.pop().map(|r| r.device_i_ds)),
            got => Err(Error::Answer { resource: self.resource.clone(), call, got }),
        }
    }

    /// `Allocate` for one container's devices.
    pub async fn allocate(
        &self,
        devices: Vec<String>,
    ) -> Result<api::ContainerAllocateResponse, Error> {
        let request = api::AllocateRequest {
            container_requests: vec![api::ContainerAllocateRequest { devices_ids: devices }],
        };
        let call = "Allocate";
        let mut answer = self.call(call, self.client.clone().allocate(request)).await?;
        match (answer.container_responses.len(), answer.container_responses.pop()) {
            (1, Some(response)) => Ok(response),
            (got, _) => Err(Error::Answer { resource: self.resource.clone(), call, got }),
        }
    }

    /// `PreStartContainer`, when the plugin asked for it at registration.
    pub async fn pre_start(&self, devices: Vec<String>) -> Result<(), Error> {
        if !self.options.pre_start_required {
            return Ok(());
        }
        let request = api::PreStartContainerRequest { devices_ids: devices };
        let call = "PreStartContainer";
        self.call(call, self.client.clone().pre_start_container(request)).await.map(drop)
    }

    async fn call<T>(
        &self,
        call: &'static str,
        answer: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, Error> {
        let resource = || self.resource.clone();
        match tokio::time::timeout(CALL_TIMEOUT, answer).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(Error::Call { resource: resource(), call, status }),
            Err(_) => Err(Error::Timeout { resource: resource(), call }),
        }
    }
}

#[cfg(test)]
mod tests;
