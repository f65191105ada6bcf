//! The device manager (D1, D2), as kubelet's `pkg/kubelet/cm/devicemanager`: device
//! plugins register on `kubelet.sock` in the device-plugin directory, their healthy
//! devices become extended resources in the Node's capacity and allocatable, and a
//! container that requests one is given devices through the plugin's
//! `GetPreferredAllocation`/`Allocate`/`PreStartContainer`. The pod resources API (D4)
//! reports what was given.
//!
//! - [`manager`]: the state (the core's `Devices`), fed by the plugins' events, asked
//!   by admission and by the pod workers, checkpointed in kubelet's format;
//! - [`plugins`]: the Registration service and one endpoint per plugin (the gRPC side);
//!   it reports [`plugins::PluginEvent`]s and calls a plugin through its
//!   [`plugins::Endpoint`].
//! - [`podresources`]: the pod resources API (`podresources/v1`, D4), read through a
//!   [`podresources::Source`].
//! - [`socket`]: the sockets both serve on.

pub mod manager;
pub mod nodes;
pub mod plugins;
pub mod podresources;
pub mod socket;

pub use manager::{ContainerDevices, Manager};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::task::Task;

/// The device-plugin directory under kubelet's root directory.
pub fn plugin_dir(root_dir: &Path) -> PathBuf {
    root_dir.join("device-plugins")
}

/// The pod resources socket under kubelet's root directory.
pub fn pod_resources_socket(root_dir: &Path) -> PathBuf {
    root_dir.join("pod-resources").join("kubelet.sock")
}

/// Errors starting the device manager's servers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Plugins(#[from] plugins::Error),
    #[error(transparent)]
    PodResources(#[from] podresources::Error),
}

/// The device manager as the agent starts it: its state from the checkpoint in the
/// device-plugin directory; the Registration service on `kubelet.sock` there, whose
/// events the manager's task applies; and the pod resources API, which reads `pods`.
pub fn start(
    root_dir: &Path,
    host: &dyn crate::host::Host,
    pods: impl FnOnce(Manager) -> Arc<dyn podresources::Source>,
) -> Result<(Manager, Vec<Task>), Error> {
    let plugin_dir = plugin_dir(root_dir);
    let boot_id = host.proc("sys/kernel/random/boot_id").map(|id| id.trim().to_owned());
    let (manager, awaited) = Manager::open(&plugin_dir, boot_id.unwrap_or_default());
    let (events, received) = tokio::sync::mpsc::channel(64);
    let registration = plugins::start(plugins::Settings { plugin_dir }, events)?;
    let run = Task::infallible("device_manager", manager.clone().run(received, awaited));
    let source = pods(manager.clone());
    let pod_resources = podresources::start(pod_resources_socket(root_dir), source)?;
    Ok((manager, vec![registration, run, pod_resources]))
}
