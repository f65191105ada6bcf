//! Outpost's integration and end-to-end tests: one test binary, one module per area.

// Test code fails by panicking; the no-unwrap rule is for the agent's own code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admission;
mod admission_policy;
mod api_objects;
mod api_source;
mod cli;
mod cni;
mod containerd;
mod ebpf;
mod etcd;
mod eviction;
mod exec;
mod exec_runtime;
mod file_source;
mod gc;
mod hardening;
mod images;
mod images_dir;
mod init_containers;
mod lifecycle;
mod local_api;
mod logs;
mod managed;
mod manifest_audit;
mod metrics;
mod operator_cli;
mod packaging;
mod pod_spec;
mod pods;
mod probes;
mod pull;
mod push;
mod push_load;
mod qos;
mod runtime_spec;
mod security;
mod security_context;
mod static_pods;
mod sync_events;
mod sync_mirror;
mod sync_node;
mod sync_status;
mod tidy;
mod url_source;
