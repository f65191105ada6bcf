//! The formats Outpost reads from outside its own process, parsed without IO: the
//! callers read the bytes, these modules say what they mean.
//!
//! - [`image`]: image tarballs' and registries' documents (OCI index, manifest, config;
//!   docker-archive), containerd's GC labels, chain IDs, and image references.
//! - [`cni`]: CNI network configuration files, and one plugin call's environment, stdin,
//!   result and error.
//! - [`bpf`]: the records the agent's BPF programs write (`agent-ebpf/src/outpost.h`).
//! - [`fanotify`]: the events a fanotify descriptor reads out (`FAN_REPORT_DFID_NAME`).
//! - [`spdy`]: SPDY/3.1's frames and compressed header blocks, for kubelet's streams.
//!
//! No IO crate is in this crate's dependency graph, which a tidy test checks.
#![forbid(unsafe_code)]

pub mod bpf;
pub mod cni;
pub mod fanotify;
pub mod image;
pub mod spdy;
