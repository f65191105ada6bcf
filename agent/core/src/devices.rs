//! The device manager's decisions (D1, D2), as kubelet's `pkg/kubelet/cm/devicemanager`,
//! without IO: which devices each registered resource has and which are healthy
//! ([`Devices`]), which devices a container gets ([`Devices::plan`], [`choose`]), the
//! reuse of init containers' devices, and the allocations' checkpoint in kubelet's
//! `kubelet_internal_checkpoint` format ([`checkpoint`]). The agent's `devices` module
//! talks to the plugins and applies these decisions.

pub mod checkpoint;
mod state;

pub use state::{Allocation, Capacity, Device, Devices, Error, Plan, choose, is_extended_resource};

/// The NUMA node of a device the plugin gave no topology for (kubelet's
/// `nodeWithoutTopology`).
pub const NO_NUMA_NODE: i64 = -1;

#[cfg(test)]
mod tests;
