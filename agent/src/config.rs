//! `outpost run` configuration: [`Settings`] is both the flags and the YAML config file
//! (the same fields, camelCase, plus the KubeletConfiguration names that mean the same
//! thing); [`Config::resolve`] merges flags over the file over the defaults below.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use clap::ValueEnum;
use serde::{Deserialize, Deserializer};

pub use k8s_openapi::api::core::v1::Taint;

pub use self::node_resources::NodeResources;

pub mod node_resources;

pub const DEFAULT_MANIFEST_DIR: &str = "/etc/outpost/manifests";
pub const DEFAULT_STATE_DIR: &str = "/var/lib/outpost";
pub use crate::runtime::containerd::DEFAULT_SOCKET as DEFAULT_CONTAINERD_SOCKET;
pub const DEFAULT_CONTAINERD: Mode = Mode::Auto;
pub const DEFAULT_WATCHER: Preference = Preference::Auto;
pub const DEFAULT_SHIM_GROUPING: ShimGrouping = ShimGrouping::Pod;
pub const DEFAULT_RUN_DIR: &str = "/run/outpost";
/// The seccomp profile root under the state directory, as kubelet's is under its root
/// directory.
pub const SECCOMP_DIR: &str = "seccomp";
pub use crate::runtime::logs::DEFAULT_POD_LOG_DIR;
pub const DEFAULT_CNI_CONF_DIR: &str = "/etc/cni/net.d";
/// Where the CNI plugins usually are: the reference location, then Debian's.
pub const DEFAULT_CNI_BIN_DIRS: [&str; 2] = ["/opt/cni/bin", "/usr/lib/cni"];
/// kubelet's `httpCheckFrequency` default.
pub const DEFAULT_MANIFEST_URL_INTERVAL: Duration = Duration::from_secs(20);
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 10250));
pub const DEFAULT_EBPF: bool = true;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("{field} {value:?}: expected a positive duration such as \"20s\" or \"1m30s\"")]
    Duration { field: &'static str, value: String },
    #[error(
        "{0} is set without {1}: serving the local API over TLS needs both a certificate and its key"
    )]
    TlsPair(&'static str, &'static str),
    #[error("manifest URL header {0:?}: expected \"Name: value\"")]
    Header(String),
    #[error("node labels {0:?}: expected key=value pairs separated by commas")]
    NodeLabel(String),
    #[error(
        "taint {0:?}: expected key[=value]:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute"
    )]
    Taint(String),
    #[error(
        "allowed unsafe sysctls: {0}; allow only namespaced sysctls (net.*, kernel.shm*, \
         kernel.msg*, kernel.sem, fs.mqueue.*)"
    )]
    UnsafeSysctl(String),
    #[error(transparent)]
    Eviction(#[from] outpost_core::eviction::Error),
    #[error("cannot determine the node name from the hostname ({0}); pass --node-name")]
    NodeName(#[source] std::io::Error),
    #[error(transparent)]
    Gc(#[from] gc::Error),
    #[error(transparent)]
    NodeResources(#[from] node_resources::Error),
    #[error(transparent)]
    Admission(#[from] admission::Error),
}

/// `--containerd`: who runs containerd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum Mode {
    // External if its socket exists, else managed if containerd is installed. (Not a doc
    // comment: clap would list the values with their descriptions.)
    Auto,
    Managed,
    External,
}

impl Mode {
    /// The runtime's choice this mode makes (`None`: auto, decided from what is there).
    pub fn choice(self) -> Option<crate::runtime::managed::Choice> {
        use crate::runtime::managed::Choice;
        match self {
            Mode::Auto => None,
            Mode::Managed => Some(Choice::Managed),
            Mode::External => Some(Choice::External),
        }
    }
}

/// `--watcher`: the kernel interface the manifest directory is watched with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum Preference {
    // fanotify, falling back to inotify (with the reason logged) when fanotify cannot
    // start, or when the first directory's filesystem cannot report file handles.
    Auto,
    Fanotify,
    Inotify,
}

/// The kernel interface the manifest directory is watched with: what `--watcher`
/// chose, once the file source has started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Fanotify,
    Inotify,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Fanotify => "fanotify",
            Backend::Inotify => "inotify",
        })
    }
}

/// `--log-format`: the agent's own logs, as text or JSON lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum LogFormat {
    Text,
    Json,
}

/// `--shim-grouping`: which containers share one containerd runc shim (containerd's
/// `io.containerd.runc.v2.group` annotation). A shim costs about 2.4 MiB PSS and each
/// container it adds about 0.15 MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum ShimGrouping {
    // One shim per pod, as containerd's CRI plugin does: a shim that dies takes one pod's
    // containers with it.
    Pod,
    // One shim for the node's containers: the least memory; a shim that dies takes every
    // container on the node with it (containerd kills the tasks it can no longer reach).
    Node,
}

impl ShimGrouping {
    /// The runtime's shim group (`io.containerd.runc.v2.group`) of a container of pod
    /// `pod_uid`.
    pub fn group(self, pod_uid: &str) -> &str {
        match self {
            ShimGrouping::Pod => pod_uid,
            ShimGrouping::Node => crate::runtime::container::NODE_SHIM_GROUP,
        }
    }
}

/// The value enums are read from the file as they are spelled on the command line; an
/// unknown name is refused with the setting's name and the known names.
macro_rules! from_value_name {
    ($($enum:ty: $setting:literal),*) => {$(
        impl TryFrom<String> for $enum {
            type Error = String;
            fn try_from(name: String) -> Result<Self, String> {
                from_value_name($setting, &name)
            }
        }
    )*};
}
from_value_name!(
    Mode: "containerd",
    Preference: "watcher",
    LogFormat: "logFormat",
    ShimGrouping: "shimGrouping"
);

fn from_value_name<T: ValueEnum>(setting: &str, name: &str) -> Result<T, String> {
    T::from_str(name, false).map_err(|_| {
        let mut names: Vec<String> = T::value_variants().iter().map(value_name).collect();
        let last = names.pop().unwrap_or_default();
        format!("{setting}: {name:?}: expected {} or {last}", names.join(", "))
    })
}

/// How `value` is spelled on the command line and in the file.
fn value_name<T: ValueEnum>(value: &T) -> String {
    value.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default()
}

/// `help` for a flag whose default `resolve` fills in.
fn with_default(help: &str, default: impl std::fmt::Display) -> String {
    format!("{help} [default: {default}]")
}

/// Declares [`Settings`] and its [`Settings::or`], which takes each field from `self`
/// where given and from the other instance elsewhere.
macro_rules! settings {
    ($(#[$meta:meta])* pub struct Settings {
        $($(#[$field_meta:meta])* $vis:vis $field:ident: $ty:ty,)*
    }) => {
        $(#[$meta])*
        pub struct Settings {
            $($(#[$field_meta])* $vis $field: $ty,)*
        }

        impl Settings {
            /// `self` (the flags) over `file`, field by field.
            pub fn or(self, file: Settings) -> Settings {
                Settings { $($field: Given::or(self.$field, file.$field),)* }
            }
        }
    };
}

/// A setting that may be left out: `None`, or no values.
trait Given {
    fn or(self, other: Self) -> Self;
}

impl<T> Given for Option<T> {
    fn or(self, other: Self) -> Self {
        Option::or(self, other)
    }
}

impl<T> Given for Vec<T> {
    fn or(self, other: Self) -> Self {
        if self.is_empty() { other } else { self }
    }
}

settings! {
    /// `outpost run`'s settings as given, on the command line or in the config file (whose
    /// fields are the flags' names in camelCase, plus KubeletConfiguration's where they
    /// exist). `None` or empty means "not given": [`Config::resolve`] fills in the
    /// defaults.
    #[derive(Debug, Clone, Default, clap::Args, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    pub struct Settings {
        /// YAML config file; same fields as the flags (camelCase), plus the KubeletConfiguration
        /// names staticPodPath, staticPodURL, staticPodURLHeader, address and port.
        #[arg(long, value_name = "FILE")]
        #[serde(skip)]
        pub config: Option<PathBuf>,
        /// KubeletConfiguration's `apiVersion` and `kind`: accepted in the file, ignored.
        #[arg(skip)]
        pub api_version: Option<serde::de::IgnoredAny>,
        #[arg(skip)]
        pub kind: Option<serde::de::IgnoredAny>,
        /// Node name (default: the hostname, lowercased).
        #[arg(long)]
        pub node_name: Option<String>,
        #[arg(long, value_name = "PATH", help = with_default(
            "Directory of static pod manifests, or a single manifest file", DEFAULT_MANIFEST_DIR))]
        #[serde(alias = "staticPodPath")]
        pub manifest_dir: Option<PathBuf>,
        /// URL of a Pod or PodList manifest, polled.
        #[arg(long, value_name = "URL")]
        #[serde(alias = "staticPodURL")]
        pub manifest_url: Option<String>,
        /// Header sent with --manifest-url requests, "Name: value"; repeatable.
        #[arg(long, value_name = "HEADER")]
        pub manifest_url_header: Vec<String>,
        /// KubeletConfiguration's headers: name → values (the file only).
        #[arg(skip)]
        #[serde(rename = "staticPodURLHeader")]
        pub static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
        #[arg(long, value_name = "DURATION", help = with_default(
            "How often the manifest URL is fetched, e.g. \"20s\" (jittered)",
            format_args!("{}s", DEFAULT_MANIFEST_URL_INTERVAL.as_secs())))]
        #[serde(alias = "httpCheckFrequency")]
        pub manifest_url_interval: Option<String>,
        /// PEM file of the CAs to trust for an https manifest URL (instead of the system's).
        #[arg(long, value_name = "FILE")]
        pub manifest_url_ca_file: Option<PathBuf>,
        /// Kubeconfig for the API server.
        #[arg(long, value_name = "FILE")]
        pub kubeconfig: Option<PathBuf>,
        #[arg(long, value_name = "DIR", help = with_default("State directory", DEFAULT_STATE_DIR))]
        pub state_dir: Option<PathBuf>,
        #[arg(long, value_name = "PATH", help = with_default(
            "The external containerd's socket", DEFAULT_CONTAINERD_SOCKET))]
        pub containerd_socket: Option<PathBuf>,
        #[arg(long, value_enum, value_name = "MODE", help = with_default(
            "Who runs containerd: \"managed\" (the agent starts and supervises its own, sockets \
             in /run/outpost/containerd, data in <state-dir>/containerd), \"external\" (connect \
             to --containerd-socket), or \"auto\": external if that socket exists, else managed \
             if containerd is installed",
            value_name(&DEFAULT_CONTAINERD)))]
        pub containerd: Option<Mode>,
        #[arg(long, value_name = "ADDR",
            help = with_default("Address of the local API", DEFAULT_LISTEN))]
        pub listen: Option<SocketAddr>,
        /// KubeletConfiguration's `address` and `port` (the file only; used when `listen`
        /// is not given).
        #[arg(skip)]
        pub address: Option<IpAddr>,
        #[arg(skip)]
        pub port: Option<u16>,
        /// File with the bearer token that authenticates local API requests (mode 600, owned
        /// by the agent's user).
        #[arg(long, value_name = "FILE")]
        pub token_file: Option<PathBuf>,
        /// Serve the local API over TLS with this certificate (PEM chain).
        #[arg(long, value_name = "FILE")]
        pub tls_cert_file: Option<PathBuf>,
        /// The private key (PEM) of --tls-cert-file.
        #[arg(long, value_name = "FILE")]
        pub tls_private_key_file: Option<PathBuf>,
        /// CA bundle (PEM) whose client certificates authenticate local API requests (mTLS).
        #[arg(long, value_name = "FILE")]
        pub client_ca_file: Option<PathBuf>,
        /// Let callers on a loopback address (127.0.0.0/8, ::1) read the local API (GET /pods,
        /// /containerLogs, /metrics, ...) without credentials; changes still need them.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub anonymous_loopback_reads: Option<bool>,
        /// Directory of image tarballs to import (air-gap).
        #[arg(long, value_name = "DIR")]
        pub images_dir: Option<PathBuf>,
        #[arg(long, value_enum, help = with_default(
            "Kernel interface for watching the manifest directory", value_name(&DEFAULT_WATCHER)))]
        pub watcher: Option<Preference>,
        #[arg(long, value_name = "NAME", help = with_default(
            "containerd namespace for the agent's images and containers",
            crate::runtime::containerd::NAMESPACE))]
        pub containerd_namespace: Option<String>,
        #[arg(long, value_enum, value_name = "GROUPING", help = with_default(
            "Which containers share a containerd runc shim: \"pod\" (one shim per pod, as \
             containerd's CRI plugin) or \"node\" (one for all: the least memory, but a shim \
             that dies takes every container with it)",
            value_name(&DEFAULT_SHIM_GROUPING)))]
        pub shim_grouping: Option<ShimGrouping>,
        /// The node's IP address (status.hostIP) [default: the address of the default
        /// route's interface].
        #[arg(long, value_name = "IP")]
        pub node_ip: Option<IpAddr>,
        #[arg(long, value_name = "DIR", help = with_default(
            "Directory of Localhost seccomp profiles (kubelet's <root-dir>/seccomp)",
            format_args!("<state-dir>/{SECCOMP_DIR}")))]
        pub seccomp_profile_root: Option<PathBuf>,
        #[arg(long, value_name = "DIR", help = with_default(
            "Runtime state that a reboot clears: pods' namespaces", DEFAULT_RUN_DIR))]
        pub run_dir: Option<PathBuf>,
        #[arg(long, value_name = "DIR", help = with_default(
            "Where container logs go, kubelet's layout", DEFAULT_POD_LOG_DIR))]
        pub pod_log_dir: Option<PathBuf>,
        #[arg(long, value_name = "DIR", help = with_default(
            "CNI network configs; the first in lexical order is used, Outpost writes a bridge \
             network there if there is none",
            DEFAULT_CNI_CONF_DIR))]
        pub cni_conf_dir: Option<PathBuf>,
        #[arg(long, value_name = "DIR", help = with_default(
            "Where CNI plugins are looked up; repeatable", DEFAULT_CNI_BIN_DIRS.join(" and ")))]
        #[serde(rename = "cniBinDirs")]
        pub cni_bin_dir: Vec<PathBuf>,
        /// Registry credentials for image pulls, a docker config.json (`auths`) like kubelet's
        /// /var/lib/kubelet/config.json.
        #[arg(long, value_name = "FILE")]
        pub image_credentials_file: Option<PathBuf>,
        /// Labels to register the Node with, "key=value[,key=value]"; repeatable
        /// (kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch are always set).
        #[arg(long, value_name = "LABELS")]
        #[serde(deserialize_with = "one")]
        pub node_labels: Vec<Labels>,
        /// Taints to register the Node with, "key[=value]:Effect[,…]"; repeatable.
        #[arg(long, value_name = "TAINTS")]
        #[serde(deserialize_with = "one")]
        pub register_with_taints: Vec<Taints>,
        /// On SIGTERM, stop every pod gracefully and report them (and the node) as shut down,
        /// as kubelet's graceful node shutdown does. By default the agent exits and leaves
        /// its pods running: the next agent adopts them (edge boxes restart the agent, not
        /// the workloads).
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub stop_pods_on_shutdown: Option<bool>,
        /// Start even if the manifest directory (or --images-dir), or a directory above it, can
        /// be written by a user other than root. By default the agent refuses: whoever can write
        /// there can run any pod as root.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub allow_writable_manifest_dir: Option<bool>,
        /// Load the eBPF programs (kernel-seen container exits, OOM victims, exec audit, pod
        /// traffic metrics). Without BPF (not root, no BTF, lockdown) the agent says so once
        /// and runs on containerd's events alone. `false`: never try.
        #[arg(long, value_name = "BOOL")]
        pub ebpf: Option<bool>,
        /// Unsafe sysctls pods may set besides kubelet's safe set: names, or prefixes ending
        /// in "*" ("net.core.*"), comma separated; repeatable. Only namespaced sysctls
        /// (net.*, kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*), as kubelet's flag.
        #[arg(long, value_name = "SYSCTLS", value_delimiter = ',')]
        pub allowed_unsafe_sysctls: Vec<String>,
        /// What each source's pods may do to the host (the file only; see
        /// `config::admission`).
        #[arg(skip)]
        pub admission_policy: Option<admission::PolicySettings>,
        /// Hard eviction thresholds, "signal<quantity or percentage[,…]" (kubelet's
        /// --eviction-hard); repeatable. Giving any replaces kubelet's defaults
        /// (memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
        /// imagefs.available<15%, imagefs.inodesFree<5%) unless
        /// --merge-default-eviction-settings.
        #[arg(long, value_name = "THRESHOLDS")]
        #[serde(deserialize_with = "one")]
        pub eviction_hard: Vec<eviction::Thresholds>,
        /// Soft eviction thresholds, as --eviction-hard; each needs a grace period.
        #[arg(long, value_name = "THRESHOLDS")]
        #[serde(deserialize_with = "one")]
        pub eviction_soft: Vec<eviction::Thresholds>,
        /// How long each soft threshold must hold before eviction, "signal=duration[,…]".
        #[arg(long, value_name = "PERIODS")]
        #[serde(deserialize_with = "one")]
        pub eviction_soft_grace_period: Vec<eviction::SignalValues>,
        /// How much to reclaim beyond a threshold once it is met, "signal=quantity[,…]".
        #[arg(long, value_name = "RECLAIMS")]
        #[serde(deserialize_with = "one")]
        pub eviction_minimum_reclaim: Vec<eviction::SignalValues>,
        /// How long a pressure condition stays after its last threshold met [default: 5m].
        #[arg(long, value_name = "DURATION")]
        pub eviction_pressure_transition_period: Option<String>,
        /// The longest grace period (seconds) of a pod evicted for a soft threshold
        /// [default: 0].
        #[arg(long, value_name = "SECONDS")]
        pub eviction_max_pod_grace_period: Option<i64>,
        /// Keep kubelet's default hard thresholds for the signals --eviction-hard leaves out.
        #[arg(long, value_name = "BOOL")]
        pub merge_default_eviction_settings: Option<bool>,
        #[arg(long, value_name = "N", allow_negative_numbers = true, help = with_default(
            "Dead containers kept per container of a pod (negative: no limit), as kubelet's",
            gc::DEFAULT_MAX_PER_POD_CONTAINER))]
        pub maximum_dead_containers_per_container: Option<i32>,
        #[arg(long, value_name = "N", allow_negative_numbers = true, help = with_default(
            "Dead containers kept on the node (negative: no limit)", gc::DEFAULT_MAX_CONTAINERS))]
        pub maximum_dead_containers: Option<i32>,
        #[arg(long, value_name = "DURATION", help = with_default(
            "A dead container younger than this is not garbage-collected", "0s"))]
        pub minimum_container_ttl_duration: Option<String>,
        #[arg(long, value_name = "PERCENT", allow_negative_numbers = true, help = with_default(
            "Image filesystem usage at or above which unused images are garbage-collected \
             (100: never)",
            gc::DEFAULT_HIGH_THRESHOLD_PERCENT))]
        #[serde(alias = "imageGCHighThresholdPercent")]
        pub image_gc_high_threshold: Option<i64>,
        #[arg(long, value_name = "PERCENT", allow_negative_numbers = true, help = with_default(
            "Image garbage collection frees space down to below this usage",
            gc::DEFAULT_LOW_THRESHOLD_PERCENT))]
        #[serde(alias = "imageGCLowThresholdPercent")]
        pub image_gc_low_threshold: Option<i64>,
        #[arg(long, value_name = "DURATION", help = with_default(
            "An image first seen less than this long ago is not garbage-collected", "2m"))]
        #[serde(alias = "imageMinimumGCAge")]
        pub minimum_image_ttl_duration: Option<String>,
        #[arg(long, value_name = "DURATION", help = with_default(
            "Images unused for longer than this are garbage-collected whatever the disk \
             (0: never)", "0s"))]
        #[serde(alias = "imageMaximumGCAge")]
        pub image_maximum_gc_age: Option<String>,
        #[arg(long, value_enum, value_name = "DRIVER", help = with_default(
            "Who manages the pods' cgroups: cgroupfs (the agent and runc write the cgroup \
             files), or systemd (slices set through systemctl; needs systemd as PID 1)",
            "cgroupfs"))]
        pub cgroup_driver: Option<node_resources::CgroupDriver>,
        #[arg(long, value_name = "CGROUP", help = with_default(
            "The cgroup the pods' cgroups go under (<cgroup-root>/kubepods/…)",
            node_resources::DEFAULT_CGROUP_ROOT))]
        pub cgroup_root: Option<String>,
        #[arg(long, value_name = "N", allow_negative_numbers = true, help = with_default(
            "The most processes and threads a pod may have (its cgroup's pids.max); -1: unlimited",
            node_resources::DEFAULT_POD_PIDS_LIMIT))]
        #[serde(rename = "podPidsLimit", alias = "podMaxPids")]
        pub pod_max_pids: Option<i64>,
        /// Resources reserved for the system, kept out of node allocatable:
        /// "cpu=100m,memory=100Mi,ephemeral-storage=1Gi,pid=1000"; repeatable.
        #[arg(long, value_name = "RESOURCES")]
        #[serde(deserialize_with = "one")]
        pub system_reserved: Vec<node_resources::ReservedList>,
        /// Resources reserved for Kubernetes' daemons (the agent, containerd), kept out of
        /// node allocatable: as --system-reserved; repeatable.
        #[arg(long, value_name = "RESOURCES")]
        #[serde(deserialize_with = "one")]
        pub kube_reserved: Vec<node_resources::ReservedList>,
        #[arg(long, value_name = "LEVELS", value_delimiter = ',', help = with_default(
            "Where node allocatable is enforced: \"pods\" limits the pods' cgroup (kubepods) to \
             it, \"none\" does not",
            node_resources::DEFAULT_ENFORCE_NODE_ALLOCATABLE))]
        pub enforce_node_allocatable: Option<Vec<String>>,
    }
}

/// A file field given once (a map, a list) where the flag is repeated.
fn one<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    T::deserialize(d).map(|value| vec![value])
}

/// `--node-labels` (`key=value[,…]`); in the file, a map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Labels(pub BTreeMap<String, String>);

impl FromStr for Labels {
    type Err = Error;
    fn from_str(raw: &str) -> Result<Labels, Error> {
        parse_labels(&[raw.to_owned()]).map(Labels)
    }
}

/// `--register-with-taints` (`key[=value]:Effect[,…]`); in the file, Taint objects.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct Taints(pub Vec<Taint>);

impl FromStr for Taints {
    type Err = Error;
    fn from_str(raw: &str) -> Result<Taints, Error> {
        parse_taints(&[raw.to_owned()]).map(Taints)
    }
}

/// Everything `outpost run` needs, resolved.
#[derive(Debug, Clone)]
pub struct Config {
    pub node_name: String,
    pub manifest_dir: PathBuf,
    pub manifest_url: Option<String>,
    pub manifest_url_headers: Vec<(String, String)>,
    /// How often the manifest URL is fetched (jittered), kubelet's `httpCheckFrequency`.
    pub manifest_url_interval: Duration,
    /// PEM bundle of CAs trusted for an `https` manifest URL (in addition to none: when
    /// set, only these are trusted).
    pub manifest_url_ca_file: Option<PathBuf>,
    pub kubeconfig: Option<PathBuf>,
    pub state_dir: PathBuf,
    /// Where `Localhost` seccomp profiles are (`<state-dir>/seccomp` unless given).
    pub seccomp_profile_root: PathBuf,
    /// Who runs containerd: auto, managed (the agent, see [`crate::runtime::managed`])
    /// or external.
    pub containerd: Mode,
    /// The external containerd's socket (auto mode uses it if it exists).
    pub containerd_socket: PathBuf,
    pub listen: SocketAddr,
    /// How the local API authenticates requests.
    pub auth: Auth,
    pub images_dir: Option<PathBuf>,
    pub watcher: Preference,
    pub containerd_namespace: String,
    pub shim_grouping: ShimGrouping,
    pub node_ip: Option<IpAddr>,
    pub run_dir: PathBuf,
    pub pod_log_dir: PathBuf,
    pub cni_conf_dir: PathBuf,
    pub cni_bin_dirs: Vec<PathBuf>,
    pub image_credentials_file: Option<PathBuf>,
    /// Labels the Node is registered with (besides the well-known ones).
    pub node_labels: BTreeMap<String, String>,
    /// Taints the Node is registered with.
    pub register_with_taints: Vec<Taint>,
    /// On SIGTERM, stop every pod (kubelet's graceful node shutdown) instead of leaving
    /// them running for the next agent to adopt.
    pub stop_pods_on_shutdown: bool,
    /// Start even if the manifest or images directory can be written by others than root.
    pub allow_writable_manifest_dir: bool,
    /// `--ebpf`: load the BPF programs.
    pub ebpf: bool,
    /// `--allowed-unsafe-sysctls`, checked to be namespaced.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// What each source's pods may do to the host (`admissionPolicy`).
    pub admission_policy: outpost_core::admission::Policy,
    /// The eviction thresholds and periods (`--eviction-*`, kubelet's defaults).
    pub eviction: outpost_core::eviction::Config,
    /// Garbage collection of dead containers and images (G1).
    pub gc: gc::GcConfig,
    /// The pods' cgroups and node allocatable.
    pub node_resources: NodeResources,
}

/// Authentication of the local API. Reads and writes need the token or a client
/// certificate; with neither configured, only `/healthz` and `/readyz` answer (and, with
/// `anonymous_loopback_reads`, reads from loopback).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Auth {
    /// File holding the bearer token (surrounding whitespace ignored).
    pub token_file: Option<PathBuf>,
    /// Serve the API over TLS with this certificate chain and key (kubelet's
    /// tlsCertFile/tlsPrivateKeyFile).
    pub tls: Option<Tls>,
    /// CAs whose client certificates authenticate a caller (kubelet's
    /// authentication.x509.clientCAFile); needs `tls`.
    pub client_ca_file: Option<PathBuf>,
    /// Callers on a loopback address may read (GET) without credentials.
    pub anonymous_loopback_reads: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl Config {
    /// Resolves `flags` over the config file they name (if any) over the defaults.
    pub fn resolve(flags: Settings) -> Result<Config, Error> {
        let file = match &flags.config {
            Some(path) => read_file(path)?,
            None => Settings::default(),
        };
        let s = flags.or(file);
        let eviction = eviction::resolve(&s)?;
        let eviction_hard = eviction::hard_eviction(&eviction);
        let node_name = match s.node_name {
            Some(name) => name,
            None => hostname().map_err(Error::NodeName)?,
        };
        let listen = s.listen.unwrap_or_else(|| {
            SocketAddr::new(
                s.address.unwrap_or(DEFAULT_LISTEN.ip()),
                s.port.unwrap_or(DEFAULT_LISTEN.port()),
            )
        });
        let mut manifest_url_headers =
            s.manifest_url_header.iter().map(|h| parse_header(h)).collect::<Result<Vec<_>, _>>()?;
        for (name, values) in s.static_pod_url_header.unwrap_or_default() {
            manifest_url_headers.extend(values.into_iter().map(|v| (name.clone(), v)));
        }
        let manifest_url_interval = match s.manifest_url_interval {
            Some(raw) => outpost_core::duration::positive(&raw)
                .ok_or(Error::Duration { field: "manifest-url-interval", value: raw })?,
            None => DEFAULT_MANIFEST_URL_INTERVAL,
        };
        let tls = match (s.tls_cert_file, s.tls_private_key_file) {
            (Some(cert_file), Some(key_file)) => Some(Tls { cert_file, key_file }),
            (None, None) => None,
            (Some(_), None) => return Err(Error::TlsPair("tls-cert-file", "tls-private-key-file")),
            (None, Some(_)) => return Err(Error::TlsPair("tls-private-key-file", "tls-cert-file")),
        };
        if s.client_ca_file.is_some() && tls.is_none() {
            return Err(Error::TlsPair("client-ca-file", "tls-cert-file and tls-private-key-file"));
        }
        let cni_bin_dirs = match s.cni_bin_dir {
            dirs if dirs.is_empty() => DEFAULT_CNI_BIN_DIRS.iter().map(PathBuf::from).collect(),
            dirs => dirs,
        };
        let state_dir = absolute(s.state_dir.unwrap_or_else(|| DEFAULT_STATE_DIR.into()));
        Ok(Config {
            node_name: node_name.to_lowercase(),
            manifest_dir: s.manifest_dir.unwrap_or_else(|| DEFAULT_MANIFEST_DIR.into()),
            manifest_url: s.manifest_url,
            manifest_url_headers,
            manifest_url_interval,
            manifest_url_ca_file: s.manifest_url_ca_file,
            kubeconfig: s.kubeconfig,
            seccomp_profile_root: absolute(
                s.seccomp_profile_root.unwrap_or_else(|| state_dir.join(SECCOMP_DIR)),
            ),
            state_dir,
            containerd: s.containerd.unwrap_or(DEFAULT_CONTAINERD),
            containerd_socket: s
                .containerd_socket
                .unwrap_or_else(|| DEFAULT_CONTAINERD_SOCKET.into()),
            listen,
            auth: Auth {
                token_file: s.token_file,
                tls,
                client_ca_file: s.client_ca_file,
                anonymous_loopback_reads: s.anonymous_loopback_reads.unwrap_or(false),
            },
            images_dir: s.images_dir,
            watcher: s.watcher.unwrap_or(DEFAULT_WATCHER),
            containerd_namespace: s
                .containerd_namespace
                .unwrap_or_else(|| crate::runtime::containerd::NAMESPACE.to_owned()),
            shim_grouping: s.shim_grouping.unwrap_or(DEFAULT_SHIM_GROUPING),
            node_ip: s.node_ip,
            // Absolute: containerd's shims get log paths, and they run elsewhere.
            run_dir: absolute(s.run_dir.unwrap_or_else(|| DEFAULT_RUN_DIR.into())),
            pod_log_dir: absolute(s.pod_log_dir.unwrap_or_else(|| DEFAULT_POD_LOG_DIR.into())),
            cni_conf_dir: s.cni_conf_dir.unwrap_or_else(|| DEFAULT_CNI_CONF_DIR.into()),
            cni_bin_dirs,
            image_credentials_file: s.image_credentials_file,
            node_labels: s.node_labels.into_iter().flat_map(|labels| labels.0).collect(),
            register_with_taints: s.register_with_taints.into_iter().flat_map(|t| t.0).collect(),
            stop_pods_on_shutdown: s.stop_pods_on_shutdown.unwrap_or(false),
            allow_writable_manifest_dir: s.allow_writable_manifest_dir.unwrap_or(false),
            ebpf: s.ebpf.unwrap_or(DEFAULT_EBPF),
            allowed_unsafe_sysctls: allowed_unsafe_sysctls(s.allowed_unsafe_sysctls)?,
            admission_policy: admission::resolve(s.admission_policy)?,
            eviction,
            gc: gc::GcConfig::resolve(gc::Given {
                maximum_dead_containers_per_container: s.maximum_dead_containers_per_container,
                maximum_dead_containers: s.maximum_dead_containers,
                minimum_container_ttl_duration: s.minimum_container_ttl_duration,
                image_gc_high_threshold: s.image_gc_high_threshold,
                image_gc_low_threshold: s.image_gc_low_threshold,
                minimum_image_ttl_duration: s.minimum_image_ttl_duration,
                image_maximum_gc_age: s.image_maximum_gc_age,
            })?,
            node_resources: NodeResources::resolve(node_resources::Given {
                cgroup_driver: s.cgroup_driver,
                cgroup_root: s.cgroup_root,
                pod_max_pids: s.pod_max_pids,
                system_reserved: s.system_reserved,
                kube_reserved: s.kube_reserved,
                enforce_node_allocatable: s.enforce_node_allocatable,
            })?
            .with_eviction_hard(eviction_hard),
        })
    }
}

/// `path` made absolute against the current directory (kept as is if that fails).
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

fn read_file(path: &Path) -> Result<Settings, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| Error::Read { path: path.into(), source })?;
    if text.trim().is_empty() {
        return Ok(Settings::default());
    }
    serde_yaml_ng::from_str(&text).map_err(|source| Error::Parse { path: path.into(), source })
}

/// `--allowed-unsafe-sysctls`, each checked to be namespaced as kubelet checks them.
pub fn allowed_unsafe_sysctls(patterns: Vec<String>) -> Result<Vec<String>, Error> {
    for pattern in &patterns {
        outpost_core::admission::check_allowed_unsafe_sysctl(pattern)
            .map_err(Error::UnsafeSysctl)?;
    }
    Ok(patterns)
}

/// kubelet's `--node-labels`: `key=value` pairs separated by commas (each flag value may
/// hold several).
pub fn parse_labels(raw: &[String]) -> Result<std::collections::BTreeMap<String, String>, Error> {
    let mut labels = std::collections::BTreeMap::new();
    for pair in raw.iter().flat_map(|r| r.split(',')).filter(|p| !p.trim().is_empty()) {
        match pair.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                labels.insert(key.trim().to_owned(), value.trim().to_owned());
            }
            _ => return Err(Error::NodeLabel(pair.to_owned())),
        }
    }
    Ok(labels)
}

/// kubelet's `--register-with-taints`: `key[=value]:Effect` separated by commas.
pub fn parse_taints(raw: &[String]) -> Result<Vec<Taint>, Error> {
    let mut taints = Vec::new();
    for item in raw.iter().flat_map(|r| r.split(',')).filter(|p| !p.trim().is_empty()) {
        let item = item.trim();
        let (key_value, effect) = item.rsplit_once(':').ok_or_else(|| Error::Taint(item.into()))?;
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            return Err(Error::Taint(item.into()));
        }
        let (key, value) = match key_value.split_once('=') {
            Some((key, value)) => (key, Some(value.to_owned())),
            None => (key_value, None),
        };
        if key.is_empty() {
            return Err(Error::Taint(item.into()));
        }
        taints.push(Taint {
            key: key.to_owned(),
            value: value.filter(|v| !v.is_empty()),
            effect: effect.to_owned(),
            time_added: None,
        });
    }
    Ok(taints)
}

/// `Name: value` → (name, value), as curl's `-H` takes it.
pub fn parse_header(raw: &str) -> Result<(String, String), Error> {
    match raw.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(Error::Header(raw.to_owned())),
    }
}

/// The kernel's node name (what `hostname` prints), as kubelet's default.
pub fn hostname() -> std::io::Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")?;
    Ok(name.trim().to_owned())
}

pub mod admission;
pub mod eviction;

pub mod gc;
#[cfg(test)]
mod tests;
