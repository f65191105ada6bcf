//! The container runtime: containerd's native gRPC API (not CRI), in the containerd
//! namespace `outpost`, plus what containerd leaves to its clients: pod namespaces, CNI,
//! the OCI runtime spec, volumes and container logs.
//!
//! A crate below the agent (which names it `outpost::runtime`): it imports only
//! `outpost-core` and `outpost-host` of Outpost's crates, so nothing here can reach up
//! into the pod workers, the sources or the API.

pub mod cdi;
pub mod cgroups;
pub mod cni;
pub mod container;
pub mod container_files;
pub mod containerd;
pub mod device_node;
pub mod events;
pub mod exec;
pub mod handler;
pub mod image;
pub mod logs;
pub mod managed;
pub mod netns;
pub mod node_logger;
pub mod shim;
pub mod stdio;
pub mod termination;
pub mod volumes;

pub use self::containerd::Containerd;
/// The OCI runtime spec of a pod's containers (pure: the crate `outpost-runtime-spec`).
pub use outpost_runtime_spec as spec;
