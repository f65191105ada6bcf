//! Outpost's pure core: everything between "bytes of a manifest" and "ordered pod deltas"
//! that can be decided without IO.
//!
//! - [`admission`]: what of a pod Outpost would not honour (A1): refused fields, warnings, priority.
//! - [`manifest`]: decode, default (SEMANTICS.md S1–S11) and validate static pod manifests.
//! - [`pod`]: pod identity, the annotations kubelet stamps, and precomputed fingerprints.
//! - [`merge`]: the `PodStore`, kubelet's PodConfig/podStorage contract (M1–M11).
//! - [`mirror`]: mirror pods (R1–R5): their content and the plan that keeps them.
//! - [`source`]: the file, URL and push sources' decisions (state machines), and what a source tells the merge.
//! - [`lifecycle`]: restart policy, CrashLoopBackOff, pod phase, defaults the API server applies.
//! - [`pod_worker`]: a pod worker's decisions, a pure state machine the agent's executor drives.
//! - [`probe`]: probes and lifecycle hooks resolved to handlers; each container's probe schedule and results.
//! - [`eviction`]: node-pressure eviction (E1–E2): signals, thresholds, pressure conditions, ranking.
//! - [`gc`]: garbage collection of dead containers and images, ephemeral-storage limits (G1).
//! - [`qos`]: a pod's QoS class and resource totals (Q1); [`quantity`]: resource quantities.
//! - [`resize`]: in-place resize of a running pod's cpu and memory (K6): allocation, its order.
//! - [`resource_config`]: the limits of the pods', QoS classes' and pods cgroups (Q2).
//! - [`runtime_class`]: the runtime handler a pod runs with, from its RuntimeClass (D5).
//! - [`container_log`]: which container instance a log request reads (kubelet's choice from the status).
//! - [`bootstrap_token`]: bootstrap tokens, CA key pins and cluster-info's JWS (J1).
//! - [`backoff`]: jittered exponential backoff (reconnects, retries).
//! - [`duration`]: durations as settings write them (Go's syntax, ISO 8601, `0`).
//! - [`ephemeral`]: ephemeral containers (`kubectl debug`) as the containers they run as, their targets, the fields the API server forbids them.
//! - [`debounce`]: bursts of messages (the kernel's network changes) turned into rounds.
//! - [`pace`]: a token bucket (pacing writes to the API server).
//! - [`node_admission`]: kubelet's admission of a pod on the node (K4): affinity, resources, taints, preemption.
//! - [`node_api`]: the node API's authorization as kubelet's (N1): path → `nodes/<subresource>`, review caches.
//! - [`node_status`]: the Node, its status and conditions, and when to report them.
//! - [`node_labels`]: `--node-labels` checked as kubelet checks them (K5).
//! - [`node_shutdown`]: graceful node shutdown (J3): priority groups, their order and grace periods.
//! - [`event_aggregate`]: Kubernetes Events rate limited, aggregated and queued (client-go's correlator).
//! - [`stats`]: the node's stats and kubelet's metrics (N2) from a reading: the Summary API, rates, text formats.
//! - [`status_queue`]: the pod status manager's coalescing, ordered, backing-off queue.
//! - [`swap`]: swap as kubelet treats it (D6): `/proc/swaps`, `swapBehavior`, each container's limit.
//! - [`error_chain`]: one line for an error and its causes (logs, `/readyz`, the CLI).
//!
//! This crate imports no async runtime, no HTTP stack and no container runtime; the
//! compiler keeps that boundary.
#![forbid(unsafe_code)]

pub mod admission;
pub mod backoff;
pub mod bootstrap_token;
pub mod certificates;
pub mod claims;
pub mod container_log;
pub mod debounce;
pub mod devices;
pub mod duration;
pub mod env_file;
pub mod ephemeral;
pub mod error_chain;
pub mod event_aggregate;
pub mod eviction;
pub mod gc;
pub mod lifecycle;
pub mod manifest;
pub mod merge;
pub mod mirror;
pub mod node_admission;
pub mod node_api;
pub mod node_labels;
pub mod node_shutdown;
pub mod node_status;
pub mod pace;
pub mod pod;
pub mod pod_worker;
pub mod probe;
pub mod qos;
pub mod quantity;
pub mod resize;
pub mod resource_config;
pub mod runtime_class;
pub mod source;
pub mod stats;
pub mod status_queue;
pub mod strconv;
pub mod swap;
