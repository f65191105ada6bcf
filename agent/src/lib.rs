//! The Outpost node agent as a library; `main.rs` only parses arguments and starts it.
//! The pure core (manifests, fingerprints, merge) lives in `outpost-core`.

pub mod api;
pub mod apiserver;
pub mod audit;
pub mod certificates;
pub mod checkpoint;
pub mod cli;
pub mod commands;
pub mod config;
pub mod containerd;
pub mod debug_containers;
pub mod devices;
pub mod ebpf;
pub mod eviction;
pub mod gc;
pub mod heap_profile;
pub mod insecure_skip_verify;
pub mod json;
pub mod logging;
pub mod memory_release;
pub mod metrics;
pub mod node_shutdown;
pub mod objects;
pub mod permissions;
pub mod pod_side;
pub mod podconfig;
pub mod shutdown;
pub mod source;
pub mod stats;
pub mod status;
pub mod sync;
pub mod systemd;
pub mod task;
pub mod worker;

// Crates below the agent, under the names its modules use.
pub use outpost_core::error_chain;
pub use outpost_host as host;
pub use outpost_runtime as runtime;
