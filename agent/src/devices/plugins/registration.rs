//! The Registration service on `kubelet.sock` (kubelet's `server.Register`): a request is
//! validated with kubelet's words, the plugin's socket dialled and its options asked for,
//! and the endpoint handed to the task that owns the endpoints before the plugin is
//! answered; any failure is the plugin's answer.

use std::path::PathBuf;

use outpost_core::error_chain::describe;
use outpost_core::strconv;
use outpost_kubelet_api::deviceplugin::v1beta1 as api;
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Response, Status};
use tracing::{info, warn};

use super::{Endpoint, Error};
use crate::devices::socket::{FileId, identity};

/// The API versions a plugin may register with (kubelet's `SupportedVersions`).
pub(super) const SUPPORTED_VERSIONS: [&str; 1] = [api::VERSION];

/// A validated, connected plugin, for the task that owns the endpoints; `done` is
/// answered once it is registered.
#[derive(Debug)]
pub(super) struct Command {
    pub endpoint: Endpoint,
    /// The plugin's socket as it was dialled (it is stopped when that file goes).
    pub file: FileId,
    pub done: oneshot::Sender<()>,
}

/// The service; clones share the channel to the endpoints' owner.
#[derive(Debug, Clone)]
pub(super) struct Registration {
    dir: PathBuf,
    commands: mpsc::Sender<Command>,
}

impl Registration {
    pub(super) fn new(dir: PathBuf, commands: mpsc::Sender<Command>) -> Registration {
        Registration { dir, commands }
    }
}

/// Why kubelet refuses a registration before dialling the plugin: an API version it does
/// not serve, or a resource name that is not an extended resource's; in kubelet's words.
pub(super) fn validate(request: &api::RegisterRequest) -> Result<(), String> {
    if !SUPPORTED_VERSIONS.contains(&request.version.as_str()) {
        let supported: Vec<String> = SUPPORTED_VERSIONS.iter().map(|v| strconv::quote(v)).collect();
        return Err(format!(
            "requested API version {} is not supported by kubelet. Supported version is [{}]",
            strconv::quote(&request.version),
            supported.join(" ")
        ));
    }
    if !outpost_core::devices::is_extended_resource(&request.resource_name) {
        return Err(format!(
            "the ResourceName {} is invalid",
            strconv::quote(&request.resource_name)
        ));
    }
    Ok(())
}

/// The plugin's answer when it cannot be dialled or asked for its options (kubelet's
/// `failed to dial device plugin:` and `failed to get device plugin options:`).
fn refusal(error: &Error) -> String {
    match error {
        Error::Connect { .. } | Error::Timeout { call: "connect", .. } => {
            format!("failed to dial device plugin: {}", describe(error))
        }
        _ => format!("failed to get device plugin options: {}", describe(error)),
    }
}

#[tonic::async_trait]
impl api::registration_server::Registration for Registration {
    async fn register(
        &self,
        request: Request<api::RegisterRequest>,
    ) -> Result<Response<api::Empty>, Status> {
        let request = request.into_inner();
        let resource = request.resource_name.as_str();
        info!(
            resource,
            endpoint = request.endpoint,
            version = request.version,
            "device plugin registration"
        );
        if let Err(message) = validate(&request) {
            warn!(resource, error = message, "bad registration request from a device plugin");
            return Err(Status::unknown(message));
        }
        let socket = self.dir.join(&request.endpoint);
        let endpoint = Endpoint::connect(resource, &socket).await.map_err(|error| {
            let message = refusal(&error);
            warn!(resource, error = message, "cannot connect to a device plugin");
            Status::unknown(message)
        })?;
        let Some(file) = identity(&socket) else {
            let message = format!("failed to dial device plugin: {} is gone", socket.display());
            warn!(resource, error = message, "cannot connect to a device plugin");
            return Err(Status::unknown(message));
        };
        let stopping = || Status::unavailable("the device manager is stopping");
        let (done, registered) = oneshot::channel();
        self.commands.send(Command { endpoint, file, done }).await.map_err(|_| stopping())?;
        registered.await.map_err(|_| stopping())?;
        info!(resource, socket = %socket.display(), "device plugin registered");
        Ok(Response::new(api::Empty {}))
    }
}
