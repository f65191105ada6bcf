//! The container logger: what containerd's shim runs, once per container, to write the
//! container's stdout and stderr into its CRI log file
//! (`/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restartCount>.log`), rotated as
//! kubelet rotates it.
//!
//! It is a crate and a binary of its own, `outpost-container-log`, installed beside
//! `outpost`: a process of the agent's own binary (tens of MiB, mostly async runtime, gRPC
//! and Kubernetes types) cost every container about 1.4 MiB of proportional memory in
//! relocated data and heap it never used; this one carries the logger alone. The agent
//! still answers `outpost container-log` with the same code, for an install that lacks
//! the small binary.
//!
//! - [`cri`]: the record format (encode, split into records, decode, join back);
//! - [`rotation`]: kubelet's size-based rotation of the live file;
//! - [`logger`]: the copy loop, one thread per stream;
//! - [`shim`]: the process's side of containerd's `binary://` log protocol;
//! - [`node`]: the node logger, one process per node that holds every container's
//!   output (on FIFOs), outlives the agent and survives its own restart without losing a
//!   line;
//! - [`time`]: the UTC timestamps both formats write.

pub mod cri;
pub mod logger;
pub mod node;
pub mod rotation;
pub mod shim;
pub mod time;

/// The small logger binary's file name; the agent looks for it beside its own executable.
pub const BINARY: &str = "outpost-container-log";

/// The first argument the shim passes: the key of the log URI's query
/// (`binary://<logger>?container-log=<path>` runs `<logger> container-log <path>`). It is
/// also the name of the agent's hidden subcommand that runs the same logger.
pub const SUBCOMMAND: &str = "container-log";
