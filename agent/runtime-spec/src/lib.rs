//! The OCI runtime spec of a pod's containers, and the pod's `/etc/hosts` and
//! `/etc/resolv.conf`: pure functions of the pod, the image configuration and the pod's
//! context (namespaces, IPs, directories), following what kubelet asks of containerd's
//! CRI plugin, so that a pod runs here as it would under kubelet.
//!
//! [`container_spec`] starts from containerd 1.6's default Linux spec (`defaults`) and
//! applies the container's process (`process`, `env`, `expansion`, `selector`), user and
//! groups (`users`, from the image's `/etc/passwd` and `/etc/group` the caller reads),
//! security context (`security`, `seccomp`, `apparmor`), the pod's sysctls (`sysctl`),
//! resources (`resources`, `quantity`) and mounts (`mounts`: the pod's files and
//! `/dev/shm`, the termination-message file, volumes; those made from API objects
//! read-only).
//! [`etc_hosts`] and [`resolv_conf`] make the pod's files (`hosts`, `dns`); `projection`
//! says what an API pod refers to and what its configMap, secret, downwardAPI and
//! projected volumes hold.
//!
//! Not done here, unlike kubelet with containerd's CRI plugin: `oom_score_adj` is not set
//! (the hosts this agent targets may withhold `CAP_SYS_RESOURCE`), a container that names
//! no AppArmor profile runs unconfined (containerd loads and applies its default profile
//! itself), `runAsNonRoot` with an image USER that is a name checks the uid that name has
//! in the image (kubelet refuses it, unable to check), a privileged container gets every
//! device allowed in its cgroup but only the default device nodes in `/dev`, every volume
//! mount is `rprivate` (admission refuses another `mountPropagation`), `subPathExpr` is
//! refused, the pod's sysctls are set by each container's spec (there is no sandbox
//! container to hold them; they land in the same pod namespaces), `stdin` is refused
//! (nothing attaches to hold a container's stdin open, as containerd's CRI does),
//! `envFrom` variables come in name order (kubelet's come in Go's map order), a projected
//! `clusterTrustBundle` source is refused, and the downward API's `metadata.labels` and
//! `metadata.annotations` files quote values as Go's `%q` except for unassigned code
//! points, which Go escapes and Outpost keeps (`projection`).
//!
//! A crate of its own below `outpost-runtime` (which hands it on as `runtime::spec`): no
//! IO crate is in its dependency graph, which a tidy test checks, so the caller reads
//! the files and the spec is decided here.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use self::projection::Resolved;
use oci_spec::image::ImageConfiguration;
use oci_spec::runtime::{Capability, Linux, Root, Spec};

pub mod apparmor;
mod defaults;
mod dns;
mod env;
mod expansion;
mod hosts;
pub mod layout;
mod mounts;
mod process;
pub mod projection;
mod resources;
pub mod seccomp;
mod security;
mod selector;
mod sysctl;
mod users;

pub use self::dns::{missing_cluster_dns, resolv_conf};
pub use self::hosts::{etc_hosts, host_network_etc_hosts};
pub use self::security::host_capabilities;
pub use outpost_core::quantity::Error as QuantityError;
pub(crate) use outpost_core::quantity::{self, Quantity};

/// The OCI runtime spec version written, containerd 1.6's (runc 1.1 reads it).
const OCI_VERSION: &str = "1.0.2-dev";

/// Where the pod stands: what [`container_spec`] needs besides the pod and its image.
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
    /// The capabilities the agent holds ([`host_capabilities`] of `/proc/self/status`):
    /// what a privileged container, or `capabilities.add: [ALL]`, gets. runc cannot give
    /// a capability the agent does not have (some hosts withhold `CAP_SYS_RESOURCE`).
    pub host_capabilities: &'a [Capability],
    /// Whether the host has AppArmor enabled (`outpost_host::apparmor_enabled`).
    pub apparmor_enabled: bool,
    /// The ConfigMaps and Secrets the pod's containers refer to (`env`, `envFrom`).
    pub resolved: &'a Resolved,
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
}

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

/// The pod, and the container when there is one, that an error is about; displays as
/// `pod default/web-node1 container app`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// `namespace/name` (neither can hold a `/`).
    pub pod: String,
    pub container: Option<String>,
}

impl Subject {
    /// The pod alone.
    pub fn pod(pod: &Pod) -> Self {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        Subject { pod: format!("{namespace}/{name}"), container: None }
    }

    /// The pod's namespace (for the `pod.namespace` field of logs).
    pub fn namespace(&self) -> &str {
        self.pod.split_once('/').map_or("", |(namespace, _)| namespace)
    }

    /// The pod's name (for the `pod.name` field of logs).
    pub fn name(&self) -> &str {
        self.pod.split_once('/').map_or(self.pod.as_str(), |(_, name)| name)
    }

    /// One container of the pod.
    pub fn container(pod: &Pod, container: &str) -> Self {
        Subject { container: Some(container.to_owned()), ..Subject::pod(pod) }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pod {}", self.pod)?;
        if let Some(container) = &self.container {
            write!(f, " container {container}")?;
        }
        Ok(())
    }
}

/// Why a spec or a pod file cannot be made. Each names the pod (and container) and
/// what to change in the manifest.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{at}: env {name}: valueFrom.{source_kind} is not supported by Outpost; put the value \
         in `value`, or mount the file as a volume"
    )]
    UnsupportedEnvSource { at: Subject, name: String, source_kind: &'static str },

    #[error(
        "{at}: env {name}: valueFrom has no source; set fieldRef, resourceFieldRef, \
         configMapKeyRef or secretKeyRef, or use `value`"
    )]
    EmptyEnvSource { at: Subject, name: String },

    /// kubelet's words (`configmap "x" not found`, `couldn't get secret ns/x: ...`).
    #[error("{source}")]
    EnvObject {
        at: Subject,
        #[source]
        source: Box<projection::Error>,
    },

    /// kubelet's words: `couldn't find key k in ConfigMap ns/x` (`object` is
    /// `ConfigMap ns/x`).
    #[error("couldn't find key {key} in {object}")]
    EnvKey { at: Subject, key: String, object: String },

    #[error(
        "{at}: env {name}: fieldRef {path:?} is not supported; use metadata.name, \
         metadata.namespace, metadata.uid, metadata.labels['KEY'], metadata.annotations['KEY'], \
         spec.nodeName, spec.serviceAccountName, status.podIP, status.podIPs, status.hostIP or \
         status.hostIPs"
    )]
    FieldPath { at: Subject, name: String, path: String },

    #[error(
        "{at}: {field}: resourceFieldRef {resource:?} is not supported; use limits.cpu, \
         limits.memory, limits.ephemeral-storage, requests.cpu, requests.memory or \
         requests.ephemeral-storage"
    )]
    ResourceField { at: Subject, field: String, resource: String },

    #[error(
        "{at}: {field}: resourceFieldRef names container {container:?}, which the pod does not have"
    )]
    ResourceContainer { at: Subject, field: String, container: String },

    #[error(
        "{at}: {field}: resourceFieldRef {resource} is not set on the container, and Outpost \
         does not publish the node's allocatable resources; set resources.{resource}"
    )]
    LimitNotSet { at: Subject, field: String, resource: String },

    #[error(
        "{at}: {field}: {value:?} is not a valid quantity (e.g. \"500m\", \"2\", \"64Mi\", \"1G\")"
    )]
    Quantity {
        at: Subject,
        field: String,
        value: String,
        #[source]
        source: quantity::Error,
    },

    #[error(
        "{at}: no command to run: the container has no `command` or `args` and the image has no \
         ENTRYPOINT or CMD; set `command`"
    )]
    NoCommand { at: Subject },

    #[error(
        "{at}: the image runs as user {user:?}, which is not in the image's /etc/passwd; set \
         securityContext.runAsUser (and runAsGroup), or use a user the image has"
    )]
    UnknownUser { at: Subject, user: String },

    #[error(
        "{at}: the image runs as user {user:?} but has no /etc/passwd to find its uid in; set \
         securityContext.runAsUser (and runAsGroup)"
    )]
    NoPasswd { at: Subject, user: String },

    #[error("{at}: allowPrivilegeEscalation: false cannot be set with {with}; remove one of them")]
    PrivilegeEscalation { at: Subject, with: &'static str },

    #[error(
        "{at}: securityContext.procMount: Unmasked needs a user namespace (hostUsers: false), \
         which Outpost does not make; use procMount: Default"
    )]
    ProcMountUnmasked { at: Subject },

    #[error("{at}: securityContext.procMount: {value:?} is not valid; use Default")]
    ProcMount { at: Subject, value: String },

    #[error(
        "{at}: {field}: {value:?} is not a seccomp profile type; use RuntimeDefault, Localhost or Unconfined"
    )]
    SeccompType { at: Subject, field: String, value: String },

    #[error(
        "{at}: {field}: type Localhost needs localhostProfile, a file under the seccomp profile root"
    )]
    SeccompLocalhostMissing { at: Subject, field: String },

    #[error(
        "{at}: {field}: {path:?} must be a relative path without \"..\" (under the seccomp \
         profile root)"
    )]
    SeccompLocalhostPath { at: Subject, field: String, path: String },

    #[error(
        "{at}: annotation {annotation}: {value:?} is not a seccomp profile; use runtime/default, \
         unconfined or localhost/<path>"
    )]
    SeccompAnnotation { at: Subject, annotation: String, value: String },

    #[error("{at}: the Localhost seccomp profile {} was not read", name.display())]
    SeccompNotRead { at: Subject, name: PathBuf },

    #[error("{at}: seccomp profile {}: {problem}", path.display())]
    SeccompProfile { at: Subject, path: PathBuf, problem: String },

    #[error(
        "{at}: {field}: {value:?} is not an AppArmor profile type; use RuntimeDefault, Localhost or Unconfined"
    )]
    AppArmorType { at: Subject, field: String, value: String },

    #[error(
        "{at}: {field}: type Localhost needs localhostProfile, the name of a loaded AppArmor profile"
    )]
    AppArmorLocalhostMissing { at: Subject, field: String },

    #[error(
        "{at}: annotation {annotation}: {value:?} is not an AppArmor profile; use runtime/default, \
         unconfined or localhost/<profile>"
    )]
    AppArmorAnnotation { at: Subject, annotation: String, value: String },

    #[error(
        "{at}: Cannot enforce AppArmor: AppArmor is not enabled on the host; use an \
         appArmorProfile of type Unconfined, or run the pod on a host with AppArmor"
    )]
    AppArmorDisabled { at: Subject },

    #[error(
        "{at}: runAsNonRoot is set but the container would run as root (uid 0); set \
         securityContext.runAsUser to a non-zero uid, or use an image whose USER is not root"
    )]
    RunAsRoot { at: Subject },

    #[error("{at}: {field}: {value} is not a valid id; use a number from 0 to 4294967294")]
    Id { at: Subject, field: &'static str, value: i64 },

    #[error(
        "{at}: securityContext.capabilities: {name:?} is not a Linux capability; use names such \
         as NET_ADMIN or CAP_NET_ADMIN, or ALL"
    )]
    Capability { at: Subject, name: String },

    #[error("{at}: volumeMounts[{index}] (volume {volume:?})")]
    Volume {
        at: Subject,
        index: usize,
        volume: String,
        #[source]
        source: Box<layout::Error>,
    },

    #[error(
        "{at}: volumeMounts[{index}].subPath {sub_path:?} must be a relative path without \"..\""
    )]
    SubPath { at: Subject, index: usize, sub_path: String },

    #[error(
        "{at}: volumeMounts[{index}].subPathExpr is not supported; use subPath with a fixed path"
    )]
    SubPathExpr { at: Subject, index: usize },

    #[error(
        "{at}: dnsPolicy {policy:?} is not supported; use ClusterFirst, ClusterFirstWithHostNet, \
         Default or None"
    )]
    DnsPolicy { at: Subject, policy: String },

    #[error(
        "{at}: dnsPolicy is None but dnsConfig.nameservers is empty; list at least one nameserver"
    )]
    DnsNoNameserver { at: Subject },

    #[error(
        "{at}: securityContext.sysctls: {name:?} not allowed with host {namespace} enabled; \
         remove the sysctl, or run the pod without hostNetwork/hostIPC"
    )]
    SysctlHostNamespace { at: Subject, name: String, namespace: &'static str },

    #[error(
        "{at}: failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is \
         too long ({max} characters is the max, {length} characters requested); shorten \
         hostname or subdomain, or unset setHostnameAsFQDN",
        max = hosts::MAX_KERNEL_HOSTNAME
    )]
    FqdnTooLong { at: Subject, fqdn: String, length: usize },

    #[error(
        "{at}: stdin is not supported: Outpost does not attach to containers, so stdin would \
         read end-of-file at once instead of staying open as under kubelet; remove stdin and \
         stdinOnce"
    )]
    Stdin { at: Subject },

    #[error(
        "{at}: shareProcessNamespace and hostPID cannot both be set (the API server rejects \
         it too); remove one"
    )]
    SharedAndHostPid { at: Subject },

    #[error("{at}: dnsConfig.{field} has {count} entries, over the limit of {limit}; remove some")]
    DnsLimit { at: Subject, field: &'static str, count: usize, limit: usize },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The OCI runtime spec of one container of the pod, to be created in containerd as
/// `container_id` with its rootfs at `rootfs` (the snapshot's mounts given at task
/// creation).
pub fn container_spec(
    ctx: &PodContext<'_>,
    container: &Container,
    image: &ImageConfiguration,
    files: &ContainerFiles,
    container_id: &str,
) -> Result<Spec> {
    let at = Subject::container(ctx.pod, &container.name);
    let pod_spec = ctx.pod.spec.as_ref();
    if pod_spec.and_then(|s| s.share_process_namespace).unwrap_or(false)
        && pod_spec.and_then(|s| s.host_pid).unwrap_or(false)
    {
        return Err(Error::SharedAndHostPid { at });
    }
    if container.stdin.unwrap_or(false) {
        return Err(Error::Stdin { at });
    }
    let security = security::Security::of(ctx.pod, container);
    security.check(&at)?;
    let image_config = image.config().as_ref();

    let environment = env::environment(ctx, container, image_config, &at)?;
    let mut process =
        process::process(container, image_config, &environment, &security, files, &at)?;
    let capabilities = security.capabilities(ctx.host_capabilities, &at)?;
    let bounding: Vec<Capability> = capabilities.bounding().iter().flatten().copied().collect();
    let seccomp = seccomp::seccomp(
        &seccomp::profile(ctx.pod, container)?,
        files.seccomp_profile.as_ref(),
        &bounding,
        security.privileged,
        &at,
    )?;
    let apparmor = apparmor::process_profile(
        &apparmor::profile(ctx.pod, container)?,
        ctx.apparmor_enabled,
        security.privileged,
        &at,
    )?;
    process.set_capabilities(Some(capabilities)).set_apparmor_profile(apparmor);

    let mut linux = Linux::default();
    linux
        .set_namespaces(Some(defaults::namespaces(ctx)))
        .set_cgroups_path(Some(ctx.cgroups_path.into()))
        .set_resources(Some(resources::resources(container, &security, &at)?))
        .set_devices(None)
        .set_uid_mappings(None)
        .set_gid_mappings(None)
        .set_sysctl(sysctl::sysctls(ctx.pod, &at)?)
        .set_seccomp(seccomp);
    if security.privileged {
        linux.set_masked_paths(None).set_readonly_paths(None);
    } else {
        linux
            .set_masked_paths(Some(defaults::masked_paths()))
            .set_readonly_paths(Some(defaults::readonly_paths()));
    }

    let mut root = Root::default();
    root.set_path("rootfs".into()).set_readonly(Some(security.read_only_root));

    let mut spec = Spec::default();
    spec.set_version(OCI_VERSION.to_owned())
        .set_root(Some(root))
        .set_mounts(Some(mounts::mounts(ctx, container, container_id, &security, &at)?))
        .set_process(Some(process))
        .set_hostname(hosts::container_hostname(ctx, &at)?)
        .set_annotations(None)
        .set_linux(Some(linux));
    Ok(spec)
}

/// kubelet's `InvalidEnvironmentVariableNames` warnings for the container: one per
/// `envFrom` source some of whose keys are not valid variable names, and so are left out
/// of its environment. None when the environment cannot be made (its spec says why).
pub fn invalid_env_var_names(pod: &Pod, container: &Container, resolved: &Resolved) -> Vec<String> {
    env::invalid_names(pod, container, resolved)
}

#[cfg(test)]
mod tests;
