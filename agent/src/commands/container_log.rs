//! The agent's hidden logger subcommands, for an install without the small
//! `outpost-container-log` binary: `container-log` (the logger containerd's shim runs for
//! one container) and `container-log-node` (the node logger the agent starts).

use crate::cli::{ContainerLogArgs, ContainerLogNodeArgs};
use crate::runtime::logs::rotation::Limits;

/// `outpost container-log`: logs one container from the shim's fds.
pub fn container_log(
    args: ContainerLogArgs,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let limits = Limits { max_size: args.max_size, max_files: args.max_files };
    outpost_container_log::shim::Args { path: args.path, limits }.run()
}

/// `outpost container-log-node`: the node logger, in a session of its own (it outlives
/// the agent that started it).
pub fn container_log_node(
    args: ContainerLogNodeArgs,
) -> Result<(), outpost_container_log::node::Error> {
    // An error only says this process leads a session already.
    let _ = nix::unistd::setsid();
    let args = outpost_container_log::node::Args { state_dir: args.state_dir, socket: args.socket };
    outpost_container_log::node::run(&args)
}
