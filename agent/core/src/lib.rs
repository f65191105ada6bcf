//! Outpost's pure core: everything between "bytes of a manifest" and "ordered pod deltas"
//! that can be decided without IO.
//!
//! - [`manifest`]: decode, default (SEMANTICS.md S1–S11) and validate static pod manifests.
//! - [`pod`]: pod identity, the annotations kubelet stamps, and precomputed fingerprints.
//! - [`merge`]: the `PodStore`, kubelet's PodConfig/podStorage contract (M1–M11).
//! - [`lifecycle`]: restart policy, CrashLoopBackOff, pod phase, defaults the API server applies.
//! - [`backoff`]: jittered exponential backoff (reconnects, retries).
//! - [`pace`]: a token bucket (pacing writes to the API server).
//! - [`status_queue`]: the pod status manager's coalescing, ordered, backing-off queue.
//!
//! This crate imports no async runtime, no HTTP stack and no container runtime; the
//! compiler keeps that boundary.
#![forbid(unsafe_code)]

pub mod backoff;
pub mod lifecycle;
pub mod manifest;
pub mod merge;
pub mod pace;
pub mod pod;
pub mod status_queue;
