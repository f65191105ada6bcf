//! The manifest directory source (kubelet's `staticPodPath`).

pub mod watch;
