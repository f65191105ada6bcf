//! The container runtime: containerd's native gRPC API (not CRI), in the containerd
//! namespace `outpost`.

pub mod containerd;
pub mod image;

pub use self::containerd::Containerd;
