//! Who runs containerd and where the agent finds it (built by `crate::containerd`).

use std::path::PathBuf;

use super::values::{Mode, ShimGrouping};

/// Who runs containerd and where the agent finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Who runs containerd: auto, managed (the agent, see [`crate::runtime::managed`])
    /// or external.
    pub mode: Mode,
    /// The external containerd's socket (auto mode uses it if it exists).
    pub socket: PathBuf,
    /// The containerd namespace of the agent's containers and images.
    pub namespace: String,
    pub shim_grouping: ShimGrouping,
}
