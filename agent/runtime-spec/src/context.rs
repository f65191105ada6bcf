//! Where a pod stands, and what a container's spec takes from files outside the
//! manifest: what [`container_spec`](crate::container_spec) needs besides the pod and its
//! image.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use oci_spec::runtime::Capability;

use crate::claims::Claimed;
use crate::plugin_devices::PluginDevices;
use crate::projection::Resolved;
use crate::seccomp;
use crate::services::ServiceEnv;
use outpost_core::swap;

/// Where the pod stands: what [`container_spec`](crate::container_spec) needs besides
/// the pod and its image.
#[derive(Debug, Clone, Copy)]
pub struct PodContext<'a> {
    /// The pod, defaulted by `outpost_core::manifest`.
    pub pod: &'a Pod,
    /// This node's name (`spec.nodeName` for the downward API).
    pub node_name: &'a str,
    /// The pod's IPs, primary first; empty until the network is up. A `hostNetwork` pod
    /// may be given the host's IPs. `/etc/hosts` is mounted only once there is one, as
    /// kubelet does.
    pub pod_ips: &'a [IpAddr],
    /// The node's IP (`status.hostIP`), when known.
    pub host_ip: Option<IpAddr>,
    /// K2: the cluster domain (`--cluster-domain`; empty: none), which ends a pod's
    /// fully qualified name when it has a `subdomain`.
    pub cluster_domain: &'a str,
    /// The pod's bind-mounted namespaces.
    pub namespaces: Namespaces<'a>,
    /// What every container gets at `/dev/shm`: the pod's tmpfs (containerd CRI's
    /// sandbox shm, 64 MiB), or the host's `/dev/shm` with `hostIPC`.
    pub dev_shm: &'a Path,
    /// `<state>/pods/<uid>`: holds `etc-hosts`, `resolv.conf` and `volumes/`, as made by
    /// `outpost_runtime::volumes::prepare`.
    pub pod_dir: &'a Path,
    /// The container's runc `cgroupsPath`, in its pod's cgroup (Q2): under the cgroupfs
    /// driver `<cgroup-root>/kubepods[/burstable|/besteffort]/pod<uid>/<container id>`
    /// (`outpost_runtime::cgroups::Layout::container_path`).
    pub cgroups_path: &'a str,
    /// The capabilities the agent holds ([`host_capabilities`](crate::host_capabilities) of `/proc/self/status`):
    /// what a privileged container, or `capabilities.add: [ALL]`, gets. runc cannot give
    /// a capability the agent does not have (some hosts withhold `CAP_SYS_RESOURCE`).
    pub host_capabilities: &'a [Capability],
    /// Whether the host has AppArmor enabled (`outpost_host::apparmor_enabled`).
    pub apparmor_enabled: bool,
    /// The ConfigMaps and Secrets the pod's containers refer to (`env`, `envFrom`).
    pub resolved: &'a Resolved,
    /// K1: the pod's Service variables ([`service_env`](crate::services::service_env));
    /// [`NO_SERVICES`](crate::services::NO_SERVICES) without an API server.
    pub services: &'a ServiceEnv,
    /// K3: the host paths of the pod's claim volumes (`persistentVolumeClaim`,
    /// `ephemeral`), by volume name, as `outpost_runtime::volumes::prepare` set them up.
    pub claimed: &'a BTreeMap<String, Claimed>,
    /// D6: the host's mounts, read when one of the container's volume mounts asks for
    /// `mountPropagation` (empty otherwise).
    pub host_mounts: &'a [HostMount],
    /// D6: what the containers' swap limits are decided from.
    pub swap: NodeSwap,
    /// Whether the node has recursively read-only mounts (`recursive_read_only`:
    /// runc's `rro`, on Linux 5.12 or later), for `recursiveReadOnly`.
    pub recursive_read_only: bool,
}

/// D6: what a container's swap limit is decided from, as kubelet's runtime manager holds
/// it: `memorySwap.swapBehavior`, the node's memory and swap, and the cgroup file that
/// limits swap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeSwap {
    pub behavior: swap::Behavior,
    pub capacity: swap::Capacity,
    pub controller: SwapController,
}

/// The cgroup file that limits a container's swap, if the kernel has one (kubelet's
/// `swapControllerAvailable`: the v1 memory controller's `memory.memsw.limit_in_bytes`,
/// the v2 `memory.swap.max` of the agent's own cgroup).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SwapController {
    /// No swap accounting: the spec says nothing of swap.
    #[default]
    None,
    /// cgroup v1's `memory.memsw.limit_in_bytes`: memory and swap together.
    MemorySwap,
    /// cgroup v2's `memory.swap.max`: swap alone.
    SwapMax,
}

/// A mount of the host, as its mountinfo line shows it: where, and how mounts propagate
/// from it (`shared`: a peer group's member; `slave`: a slave of one). What a volume
/// mount's `mountPropagation` needs of the host mount its source is on (D6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMount {
    pub mount_point: PathBuf,
    pub shared: bool,
    pub slave: bool,
}

/// What a container's spec takes from files outside the manifest, read by the caller:
/// the image's user databases and the container's `Localhost` seccomp profile.
#[derive(Debug, Clone, Default)]
pub struct ContainerFiles {
    /// The image's `/etc/passwd`; `None` when it has none.
    pub passwd: Option<String>,
    /// The image's `/etc/group`; `None` when it has none.
    pub group: Option<String>,
    /// The file [`seccomp::profile`] names, when it is `Localhost`.
    pub seccomp_profile: Option<seccomp::LocalhostProfile>,
    /// D2: what the container's device plugins gave it.
    pub devices: PluginDevices,
    /// The env files its `fileKeyRef` variables name, by (volume, path) (KEP-3721).
    pub env_files: EnvFiles,
}

/// The files of `env[].valueFrom.fileKeyRef`, by volume name and path in the volume:
/// the file's text, or `None` where there is no such file.
pub type EnvFiles = std::collections::BTreeMap<(String, String), Option<String>>;

/// Paths of the namespaces a pod's containers join; `None` is the host's namespace.
#[derive(Debug, Clone, Copy, Default)]
pub struct Namespaces<'a> {
    /// The pod's shared pid namespace (`shareProcessNamespace`); `None` gives each
    /// container a new one (or the host's, with `hostPID`).
    pub pid: Option<&'a Path>,
    pub network: Option<&'a Path>,
    pub ipc: Option<&'a Path>,
    pub uts: Option<&'a Path>,
}
