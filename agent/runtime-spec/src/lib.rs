//! The OCI runtime spec of a pod's containers, and the pod's `/etc/hosts` and
//! `/etc/resolv.conf`: pure functions of the pod, the image configuration and the pod's
//! context (namespaces, IPs, directories), following what kubelet asks of containerd's
//! CRI plugin, so that a pod runs here as it would under kubelet.
//!
//! [`container_spec`] (`container`) starts from containerd 1.6's default Linux spec
//! (`defaults`) and applies, with the pod's [`PodContext`] (`context`), the pod's
//! namespaces, the container's process (`process`, `env`, `expansion`), user and groups
//! (`users`, from the image's `/etc/passwd` and `/etc/group` the caller reads), security
//! context (`security`, `seccomp`, `apparmor`), the pod's sysctls (`sysctl`), resources
//! (`resources`, `quantity`; swap as kubelet's `memorySwap` decides it) and mounts (`mounts`: the pod's files and `/dev/shm`, the
//! termination-message file, volumes; those made from API objects read-only; `sub_path`
//! expands `subPathExpr`, `recursive_read_only` resolves `recursiveReadOnly`).
//! [`etc_hosts`] and [`resolv_conf`] make the pod's files (`hosts`, `dns`); `projection`
//! says what an API pod refers to and what its configMap, secret, downwardAPI and
//! projected volumes hold. `selector` reads the downward API's selectors for `env` and
//! `projection` alike. `cdi` resolves the CDI devices a container names against the CDI
//! spec files the caller reads, and applies their edits to its spec (D3). Every [`Error`] names the pod and container it is about
//! ([`Subject`]).
//!
//! Not done here, unlike kubelet with containerd's CRI plugin: `oom_score_adj` is not set
//! (the hosts this agent targets may withhold `CAP_SYS_RESOURCE`), a container that names
//! no AppArmor profile runs unconfined (containerd loads and applies its default profile
//! itself), `runAsNonRoot` with an image USER that is a name checks the uid that name has
//! in the image (kubelet refuses it, unable to check), a privileged container gets every
//! device allowed in its cgroup but only the default device nodes in `/dev`, a volume
//! mount's `mountPropagation` is checked against the host mount its source is on by the
//! path's prefix (containerd resolves symbolic links first), the pod's sysctls are set by each container's spec (there is no sandbox
//! container to hold them; they land in the same pod namespaces), `envFrom` variables come in name order (kubelet's come in Go's map order), a projected
//! `clusterTrustBundle` source's certificates are sorted (kubelet shuffles them once per
//! start), and the downward API's `metadata.labels` and
//! `metadata.annotations` files quote values as Go's `%q` except for unassigned code
//! points, which Go escapes and Outpost keeps (`projection`).
//!
//! A crate of its own below `outpost-runtime` (which hands it on as `runtime::spec`): no
//! IO crate is in its dependency graph, which a tidy test checks, so the caller reads
//! the files and the spec is decided here.

pub mod apparmor;
pub mod cdi;
pub mod claims;
mod container;
mod context;
mod defaults;
mod dns;
mod env;
mod error;
mod expansion;
mod hosts;
pub mod layout;
mod mounts;
mod plugin_devices;
mod process;
pub mod projection;
pub mod recursive_read_only;
mod resources;
pub mod seccomp;
mod security;
pub mod selector;
mod selinux;
pub mod services;
mod sub_path;
mod subject;
mod sysctl;
mod users;

pub use self::container::{container_spec, invalid_env_var_names};
pub use self::context::{
    ContainerFiles, EnvFiles, HostMount, Namespaces, NodeSwap, PodContext, SwapController,
};
pub use self::dns::{
    DNS_CONFIG_FORMING, DnsEvent, MISSING_CLUSTER_DNS, MISSING_CLUSTER_DNS_ON_NODE, NodeDns,
    PodDns, is_systemd_resolved_stub, resolv_conf,
};
pub use self::env::file_key_refs;
pub use self::error::{Error, Result, SourceMount};
pub use self::hosts::{etc_hosts, host_network_etc_hosts};
pub use self::plugin_devices::{PluginDevices, PluginMount};
pub use self::security::host_capabilities;
pub use self::sub_path::{Error as SubPathError, SubPathDir, sub_path_dirs};
pub use self::subject::Subject;
pub use outpost_core::quantity::Error as QuantityError;

#[cfg(test)]
mod tests;
