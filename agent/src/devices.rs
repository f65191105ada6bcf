//! The device manager (D1, D2), as kubelet's `pkg/kubelet/cm/devicemanager`: device
//! plugins register on `kubelet.sock` in the device-plugin directory, their healthy
//! devices become extended resources in the Node's capacity and allocatable, and a
//! container that requests one is given devices through the plugin's
//! `GetPreferredAllocation`/`Allocate`/`PreStartContainer`. The pod resources API (D4)
//! reports what was given.
//!
//! - [`plugins`]: the Registration service and one endpoint per plugin (the gRPC side);
//!   it reports [`plugins::PluginEvent`]s and calls a plugin through its
//!   [`plugins::Endpoint`].
//! - [`podresources`]: the pod resources API (`podresources/v1`, D4), read through a
//!   [`podresources::Source`].
//! - [`socket`]: the sockets both serve on.

pub mod plugins;
pub mod podresources;
pub mod socket;
