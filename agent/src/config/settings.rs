//! [`Settings`]: `outpost run`'s flags and the config file's fields, declared once.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

use super::*;

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
        /// Kubeconfig with bootstrap credentials (a bootstrap token): while --kubeconfig has
        /// no valid client certificate, the agent requests one with it (kubelet's TLS
        /// bootstrapping) and writes --kubeconfig to use it (needs --kubeconfig).
        #[arg(long, value_name = "FILE")]
        pub bootstrap_kubeconfig: Option<PathBuf>,
        /// kubelet's `rotateCertificates`: renew the client certificate at 70-90 % of its
        /// lifetime [default: true with --bootstrap-kubeconfig, else false].
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
            default_missing_value = "true")]
        pub rotate_certificates: Option<bool>,
        /// kubelet's `serverTLSBootstrap`: serve the local API with a certificate the
        /// cluster signs (a `kubernetes.io/kubelet-serving` request for the node's name and
        /// address), renewed and swapped in without a restart [default: false].
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
            default_missing_value = "true")]
        #[serde(rename = "serverTLSBootstrap")]
        pub server_tls_bootstrap: Option<bool>,
        #[arg(long, value_name = "DIR", help = with_default("State directory", DEFAULT_STATE_DIR))]
        pub state_dir: Option<PathBuf>,
        /// The state key: a file of at least 32 random bytes, readable by its owner only,
        /// that seals the checkpoint of Secrets and tokens [default: the systemd credential
        /// outpost.state-key, when the unit loads one; else none, and they are kept plain].
        #[arg(long, value_name = "FILE")]
        pub state_key_file: Option<PathBuf>,
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
        /// Also serve plain `/healthz` on this port (kubelet's healthzPort); 0 turns it off.
        #[arg(long, value_name = "PORT",
            help = with_default("Port of the plain /healthz endpoint (0: off)", DEFAULT_HEALTHZ.port()))]
        pub healthz_port: Option<u16>,
        /// The address of --healthz-port (kubelet's healthzBindAddress).
        #[arg(long, value_name = "IP",
            help = with_default("Address of the plain /healthz endpoint", DEFAULT_HEALTHZ.ip()))]
        pub healthz_bind_address: Option<IpAddr>,
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
        /// kubelet's `--anonymous-auth`: a request without credentials is `system:anonymous`
        /// (group `system:unauthenticated`) and is authorized as such, instead of refused
        /// with 401 [default: false].
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
            default_missing_value = "true")]
        pub anonymous_auth: Option<bool>,
        /// kubelet's `--authentication-token-webhook`: check bearer tokens (service account
        /// tokens) with a TokenReview on the API server (needs --kubeconfig) [default: false].
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
            default_missing_value = "true")]
        pub authentication_token_webhook: Option<bool>,
        #[arg(long, value_name = "DURATION", help = with_default(
            "How long a TokenReview's answer is kept", "2m"))]
        pub authentication_token_webhook_cache_ttl: Option<String>,
        #[arg(long, value_name = "DURATION", help = with_default(
            "kubelet's streamingConnectionIdleTimeout: an exec, attach or port-forward \
             connection that carries no data for this long is closed", "4h"))]
        pub streaming_connection_idle_timeout: Option<String>,
        #[arg(long, value_enum, value_name = "MODE", help = with_default(
            "kubelet's --authorization-mode: \"AlwaysAllow\" (every authenticated caller may do \
             everything) or \"Webhook\" (a SubjectAccessReview on the API server for each \
             request, kubelet's nodes/<subresource> attributes; needs --kubeconfig)",
            "AlwaysAllow"))]
        pub authorization_mode: Option<node_api::AuthorizationMode>,
        #[arg(long, value_name = "DURATION", help = with_default(
            "How long an allowing SubjectAccessReview answer is kept", "5m"))]
        pub authorization_webhook_cache_authorized_ttl: Option<String>,
        #[arg(long, value_name = "DURATION", help = with_default(
            "How long a denying SubjectAccessReview answer is kept", "30s"))]
        pub authorization_webhook_cache_unauthorized_ttl: Option<String>,
        /// KubeletConfiguration's `authentication` (the file only; see `config::node_api`).
        #[arg(skip)]
        pub authentication: Option<node_api::AuthenticationSettings>,
        /// KubeletConfiguration's `authorization` (the file only).
        #[arg(skip)]
        pub authorization: Option<node_api::AuthorizationSettings>,
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
        #[arg(long, value_enum, value_name = "LOGGER", help = with_default(
            "Which process writes containers' output into their log files: \"node\" (one \
             logger for the node, outliving the agent) or \"container\" (one per container, \
             started by the shim)",
            value_name(&DEFAULT_CONTAINER_LOGGER)))]
        pub container_logger: Option<ContainerLogger>,
        #[arg(long, value_enum, value_name = "RUNTIME", help = with_default(
            "The OCI runtime the runc shim runs containers and exec with, the default \
             handler's: \"runc\" or \"crun\" (faster to start and exec; Debian's crun package)",
            value_name(&DEFAULT_RUNTIME)))]
        pub runtime: Option<OciRuntime>,
        /// A runtime handler besides the default (D5), "NAME=BINARY": the runc shim running
        /// BINARY (its BinaryName), for pods whose RuntimeClass's handler (a static pod's
        /// runtimeClassName) is NAME; repeatable. In the file, `runtimeHandlers`: by name,
        /// the binary or `{runtimeType, options}` as in containerd's config.
        #[arg(long, value_name = "NAME=BINARY")]
        #[serde(rename = "runtimeHandlers", deserialize_with = "one")]
        pub runtime_handler: Vec<runtime_handlers::HandlerSettings>,
        /// The node's IP address (status.hostIP) [default: the address of the default
        /// route's interface].
        #[arg(long, value_name = "IP")]
        pub node_ip: Option<IpAddr>,
        #[arg(long, value_name = "DIR", help = with_default(
            "kubelet's root directory: device plugins register in its device-plugins/, the pod \
             resources API is served in its pod-resources/",
            DEFAULT_ROOT_DIR))]
        pub root_dir: Option<PathBuf>,
        #[arg(long, value_name = "DIR", help = with_default(
            "Directory of Localhost seccomp profiles (kubelet's <root-dir>/seccomp)",
            format_args!("<state-dir>/{SECCOMP_DIR}")))]
        pub seccomp_profile_root: Option<PathBuf>,
        #[arg(long, value_name = "DIR", help = with_default(
            "Where CDI spec files are read, in priority order (a later directory's device \
             wins); repeatable",
            crate::runtime::cdi::DEFAULT_SPEC_DIRS.join(" and ")))]
        #[serde(rename = "cdiSpecDirs")]
        pub cdi_spec_dir: Vec<PathBuf>,
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
        /// The node Lease's duration in seconds (kubelet's nodeLeaseDurationSeconds,
        /// default 40, at least 40). The Lease is renewed on the agent's 10 s beat every
        /// quarter of it or sooner: 40 and 60 every 10 s, 80 every 20 s, 120 every 30 s.
        /// A longer Lease means fewer writes to the API server (a fleet's main load when
        /// idle) and a node noticed gone later: the node lifecycle controller's
        /// --node-monitor-grace-period must exceed the renew interval.
        #[arg(long, value_name = "SECONDS")]
        pub node_lease_duration_seconds: Option<i32>,
        /// The most pods the node runs (kubelet's maxPods, default 110): the Node's `pods`
        /// capacity; a pod beyond it is rejected with OutOfpods (K4).
        #[arg(long, value_name = "N")]
        pub max_pods: Option<u32>,
        /// On SIGTERM, stop every pod gracefully and report them (and the node) as shut down,
        /// as kubelet's graceful node shutdown does. By default the agent exits and leaves
        /// its pods running: the next agent adopts them (edge boxes restart the agent, not
        /// the workloads).
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub stop_pods_on_shutdown: Option<bool>,
        /// Graceful node shutdown (J3), as kubelet's: the time a machine shutdown is
        /// delayed for the pods to stop (logind's delay inhibitor lock), lowest priority
        /// first. 0s or absent: off.
        #[arg(long, value_name = "DURATION")]
        pub shutdown_grace_period: Option<String>,
        /// The part of shutdownGracePeriod kept for critical pods (priority ≥ 2000000000),
        /// which stop last.
        #[arg(long, value_name = "DURATION")]
        pub shutdown_grace_period_critical_pods: Option<String>,
        /// Instead of the two above (the file only): `{priority, shutdownGracePeriodSeconds}`
        /// groups, each stopped in turn, lowest priority first.
        #[arg(skip)]
        pub shutdown_grace_period_by_pod_priority: Option<Vec<node_shutdown::PriorityGroupSetting>>,
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
        /// D6, kubelet's `--fail-swap-on`: refuse to start on a node with swap on
        /// [default: true]. `false` lets the agent run there, the containers swapping as
        /// memorySwap.swapBehavior says (NoSwap: none).
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
            default_missing_value = "true")]
        pub fail_swap_on: Option<bool>,
        /// D6, KubeletConfiguration's `memorySwap` (the file only): `swapBehavior` NoSwap
        /// (the default) or LimitedSwap (cgroup v2 only).
        #[arg(skip)]
        pub memory_swap: Option<swap::MemorySwapSettings>,
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
        /// K2: the cluster DNS servers' IP addresses, comma separated; repeatable
        /// (kubelet's --cluster-dns). ClusterFirst pods get them as their nameservers.
        #[arg(long, value_name = "IPS", value_delimiter = ',')]
        #[serde(rename = "clusterDNS")]
        pub cluster_dns: Vec<IpAddr>,
        #[arg(long, value_name = "DOMAIN", help = with_default(
            "The cluster's domain: ClusterFirst pods search <namespace>.svc.<domain>, \
             svc.<domain> and <domain> (\"\": none)",
            dns::DEFAULT_CLUSTER_DOMAIN))]
        pub cluster_domain: Option<String>,
        #[arg(long, value_name = "FILE", help = with_default(
            "The resolver file pods' DNS starts from (systemd-resolved's real one is \
             /run/systemd/resolve/resolv.conf); \"\": the pods' resolver is 127.0.0.1",
            dns::DEFAULT_RESOLV_CONF))]
        pub resolv_conf: Option<String>,
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
