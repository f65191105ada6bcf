//! Why a spec or a pod file cannot be made.

use std::path::PathBuf;

use outpost_core::quantity;

use crate::subject::Subject;
use crate::{layout, projection, selector};

/// Why a spec or a pod file cannot be made. Each names the pod (and container) and
/// what to change in the manifest.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// KEP-3721: a `fileKeyRef` that cannot be resolved (boxed: it names a file).
    #[error(transparent)]
    EnvFile(Box<EnvFileError>),

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
        "{at}: {field}: {value:?} is not a valid quantity (e.g. \"500m\", \"2\", \"64Mi\", \"1G\")"
    )]
    Quantity {
        at: Subject,
        field: String,
        value: String,
        #[source]
        source: quantity::Error,
    },

    /// A `resourceFieldRef` that cannot be read.
    #[error(transparent)]
    Selector(Box<selector::Error>),

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

    /// containerd CRI's words for a level it cannot read, checked with SELinux on or off.
    #[error(
        "{at}: {field}: the format of 'level' {level:?} is not correct; write an MLS level such \
         as s0 or s0:c123,c456"
    )]
    SelinuxLevel { at: Subject, field: &'static str, level: String },

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
    SeccompProfile {
        at: Subject,
        path: PathBuf,
        #[source]
        problem: crate::seccomp::Error,
    },

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

    /// K3: kubelet's words (`makeBlockVolumes`), its `CreateContainerConfigError`.
    #[error("{source}")]
    VolumeDevice {
        at: Subject,
        #[source]
        source: crate::claims::DeviceError,
    },

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

    /// kubelet's `CreateContainerConfigError`, with its words.
    #[error(
        "{at}: volumeMounts[{index}].recursiveReadOnly: failed to resolve recursive read-only mode"
    )]
    RecursiveReadOnly {
        at: Subject,
        index: usize,
        #[source]
        source: crate::recursive_read_only::Error,
    },

    /// kubelet's `CreateContainerConfigError`: the cause is kubelet's message.
    #[error("{at}: volumeMounts[{index}].subPathExpr {expr:?}")]
    SubPathExpr {
        at: Subject,
        index: usize,
        expr: String,
        #[source]
        source: crate::sub_path::Error,
    },

    #[error(
        "{at}: volumeMounts[{index}].mountPropagation: Bidirectional mount propagation is \
         available only to privileged containers"
    )]
    BidirectionalUnprivileged { at: Subject, index: usize },

    #[error(
        "{at}: volumeMounts[{index}].mountPropagation: invalid MountPropagation mode {mode:?}; \
         use None, HostToContainer or Bidirectional"
    )]
    PropagationMode { at: Subject, index: usize, mode: String },

    #[error(
        "{at}: volumeMounts[{index}].mountPropagation: path {} is mounted on {} but it is not a \
         {wanted} mount; make it so on the host (mount --make-rshared)",
        mount.path.display(),
        mount.mount_point.as_ref().map_or_else(|| "no mount the agent can see".to_owned(), |p| p.display().to_string())
    )]
    PropagationSource { at: Subject, index: usize, mount: Box<SourceMount>, wanted: &'static str },

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
         hostname or subdomain, or unset setHostnameAsFQDN"
    )]
    FqdnTooLong { at: Subject, fqdn: String, length: usize, max: usize },

    #[error(
        "{at}: shareProcessNamespace and hostPID cannot both be set (the API server rejects \
         it too); remove one"
    )]
    SharedAndHostPid { at: Subject },

    #[error(
        "{at}: the node's resolv.conf (--resolv-conf) has a nameserver line without an \
         address (kubelet: \"nameserver list is empty\"); give it an address or remove it"
    )]
    DnsHostNameserver { at: Subject },

    #[error("{at}: dnsConfig.{field} has {count} entries, over the limit of {limit}; remove some")]
    DnsLimit { at: Subject, field: &'static str, count: usize, limit: usize },
}

impl From<selector::Error> for Error {
    fn from(error: selector::Error) -> Error {
        Error::Selector(Box::new(error))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A volume mount's host path and the host mount it is on (`None`: none the agent sees).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceMount {
    pub path: PathBuf,
    pub mount_point: Option<PathBuf>,
}

/// Why a `fileKeyRef` variable cannot be set (KEP-3721).
#[derive(Debug, thiserror::Error)]
pub enum EnvFileError {
    /// KEP-3721: the env file a `fileKeyRef` names is not there (and it is not optional).
    #[error(
        "{at}: env {name}: fileKeyRef: no file {path:?} in volume {volume:?}; write it before \
         the container starts (from an init container), or set optional: true"
    )]
    Missing { at: Subject, name: String, volume: String, path: String },

    /// kubelet's words: the key is not in the file (an empty value counts as none).
    #[error(
        "{at}: env {name}: environment variable key {key:?} not found in file {path:?} of \
         volume {volume:?}; add a {key}=VALUE line, or set optional: true"
    )]
    Key { at: Subject, name: String, key: String, volume: String, path: String },

    #[error("{at}: env {name}: fileKeyRef: file {path:?} of volume {volume:?}: {source}")]
    Format {
        at: Subject,
        name: String,
        volume: String,
        path: String,
        #[source]
        source: outpost_core::env_file::Error,
    },

    /// The API server's rule for `fileKeyRef.path`, which a static pod has not met.
    #[error(
        "{at}: env {name}: fileKeyRef.path {path:?} must be a relative path without \"..\" \
         (a file inside volume {volume:?})"
    )]
    Path { at: Subject, name: String, volume: String, path: String },
}
