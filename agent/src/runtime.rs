//! The container runtime: containerd's native gRPC API (not CRI), in the containerd
//! namespace `outpost`, plus what containerd leaves to its clients: pod namespaces, CNI,
//! the OCI runtime spec, volumes and container logs.

pub mod cgroups;
pub mod cni;
pub mod container;
pub mod container_files;
pub mod containerd;
pub mod events;
pub mod exec;
pub mod image;
pub mod logs;
pub mod managed;
pub mod netns;
pub mod spec;
pub mod termination;
pub mod volumes;

pub use self::containerd::Containerd;
