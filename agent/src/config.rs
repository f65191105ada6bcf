//! `outpost run` configuration: [`Settings`] is both the flags and the YAML config file
//! (the same fields, camelCase, plus the KubeletConfiguration names that mean the same
//! thing); [`Config::resolve`] merges flags over the file over the defaults below.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use k8s_openapi::api::core::v1::Taint;

pub use self::node::Node;
pub use self::node_resources::NodeResources;

pub mod api;
pub mod containerd;
pub mod node;
pub mod node_resources;
mod settings;
pub mod values;

pub use self::settings::{Labels, Settings, Taints};
pub use self::values::{
    Backend, ContainerLogger, LogFormat, Mode, OciRuntime, Preference, ShimGrouping,
};
use self::values::{from_value_name, value_name};

pub const DEFAULT_MANIFEST_DIR: &str = "/etc/outpost/manifests";
pub const DEFAULT_STATE_DIR: &str = "/var/lib/outpost";
/// How long a streaming connection may carry no data before it is closed: kubelet's
/// `streamingConnectionIdleTimeout` default, 4 h.
pub const DEFAULT_STREAMING_CONNECTION_IDLE_TIMEOUT: std::time::Duration =
    outpost_formats::spdy::session::DEFAULT_IDLE_TIMEOUT;
pub use crate::runtime::containerd::DEFAULT_SOCKET as DEFAULT_CONTAINERD_SOCKET;
pub const DEFAULT_CONTAINERD: Mode = Mode::Auto;
pub const DEFAULT_WATCHER: Preference = Preference::Auto;
pub const DEFAULT_SHIM_GROUPING: ShimGrouping = ShimGrouping::Pod;
pub const DEFAULT_CONTAINER_LOGGER: ContainerLogger = ContainerLogger::Node;
pub const DEFAULT_RUNTIME: OciRuntime = OciRuntime::Runc;
pub const DEFAULT_RUN_DIR: &str = "/run/outpost";
/// kubelet's `--root-dir`: the device plugins' and the pod resources API's sockets are
/// under it, where plugins and monitoring agents look for them (D1, D4).
pub const DEFAULT_ROOT_DIR: &str = "/var/lib/kubelet";
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
/// kubelet's `healthzPort` and `healthzBindAddress` defaults.
pub const DEFAULT_HEALTHZ: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 10248));

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {}: {}", place(.path, .source), message(.source))]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error("{field} {value:?}: expected a positive duration such as \"20s\" or \"1m30s\"")]
    Duration { field: &'static str, value: String },
    #[error(
        "{0} is set without {1}: serving the local API over TLS needs both a certificate and its key"
    )]
    TlsPair(&'static str, &'static str),
    #[error(
        "node lease duration {0} s: give at least {min} s (the agent renews its Lease on a \
         10 s beat, which must be at most a quarter of the duration)",
        min = outpost_core::node_status::NODE_LEASE_DURATION_SECONDS
    )]
    LeaseDuration(i32),
    #[error("manifest URL header {0:?}: expected \"Name: value\"")]
    Header(String),
    #[error("node labels {0:?}: expected key=value pairs separated by commas")]
    NodeLabel(String),
    /// K5: kubelet refuses to start with these; a real cluster's NodeRestriction would
    /// refuse the Node.
    #[error("failed to validate node labels: {0}")]
    NodeLabels(#[from] outpost_core::node_labels::Error),
    #[error(
        "taint {0:?}: expected key[=value]:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute"
    )]
    Taint(String),
    #[error(
        "allowed unsafe sysctls: {0}; allow only namespaced sysctls (net.*, kernel.shm*, \
         kernel.msg*, kernel.sem, fs.mqueue.*)"
    )]
    UnsafeSysctl(#[source] outpost_core::admission::sysctl::Error),
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
    #[error(transparent)]
    NodeApi(#[from] node_api::Error),
    #[error(transparent)]
    NodeShutdown(#[from] node_shutdown::Error),
    #[error(transparent)]
    Swap(#[from] swap::Error),
    #[error(transparent)]
    RuntimeHandlers(#[from] runtime_handlers::Error),
    #[error(
        "--bootstrap-kubeconfig needs --kubeconfig: the path where the agent writes the kubeconfig of the client certificate it gets"
    )]
    BootstrapWithoutKubeconfig,
    #[error(
        "rotateCertificates needs --bootstrap-kubeconfig: the agent renews only the client certificate it got itself (in <state-dir>/pki)"
    )]
    RotateWithoutBootstrap,
    #[error(
        "serverTLSBootstrap needs --kubeconfig (the serving certificate is requested from the API server) and no --tls-cert-file (it replaces it)"
    )]
    ServerTlsBootstrap,
}

/// Everything `outpost run` needs, resolved: the node, then each component's own config
/// (each built by its `Config::build`; the root, `commands::run`, only wires them).
#[derive(Debug, Clone)]
pub struct Config {
    /// The node: its name, address, directories and what it registers with.
    pub node: Node,
    /// The manifest directory, URL and push endpoint (S1-S12).
    pub sources: sources::Config,
    pub kubeconfig: Option<PathBuf>,
    /// `--state-key-file`: the state key (V3), when not the systemd credential.
    pub state_key_file: Option<PathBuf>,
    /// J1: TLS bootstrapping and rotation of the client certificate.
    pub certificates: Certificates,
    /// Who runs containerd, and where.
    pub containerd: containerd::Config,
    /// What the pod workers run pods with.
    pub pods: pods::Config,
    /// The local API: where it listens and how it authenticates.
    pub api: api::Config,
    /// What a stop or the machine's shutdown does to the pods (J3).
    pub shutdown: Shutdown,
    /// Start even if the manifest or images directory can be written by others than root.
    pub allow_writable_manifest_dir: bool,
    /// `--ebpf`: load the BPF programs.
    pub ebpf: bool,
    /// The eviction thresholds and periods (`--eviction-*`, kubelet's defaults).
    pub eviction: outpost_core::eviction::Config,
    /// Garbage collection of dead containers and images (G1).
    pub gc: gc::GcConfig,
    /// The pods' cgroups and node allocatable.
    pub node_resources: NodeResources,
    /// D6: `failSwapOn` and `memorySwap.swapBehavior`.
    pub swap: swap::Swap,
}

/// What a stop or the machine's shutdown does to the pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shutdown {
    /// On SIGTERM, stop every pod (kubelet's graceful node shutdown) instead of leaving
    /// them running for the next agent to adopt.
    pub stop_pods: bool,
    /// Graceful node shutdown's priority groups (J3), sorted; empty: off.
    pub groups: Vec<outpost_core::node_shutdown::PriorityGroup>,
}

/// J1, J2: the node's client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Certificates {
    /// `--bootstrap-kubeconfig`: the credentials a new client certificate is requested
    /// with when `--kubeconfig` has no valid one.
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// `rotateCertificates`: renew the client certificate before it expires.
    pub rotate: bool,
    /// `serverTLSBootstrap`: the local API's serving certificate comes from the cluster.
    pub server_tls_bootstrap: bool,
}

impl Config {
    /// Resolves `flags` over the config file they name (if any) over the defaults, one
    /// component at a time.
    pub fn resolve(flags: Settings) -> Result<Config, Error> {
        let file = match &flags.config {
            Some(path) => read_file(path)?,
            None => Settings::default(),
        };
        let mut s = flags.or(file);
        let eviction = eviction::resolve(&s)?;
        let eviction_hard = eviction::hard_eviction(&eviction);
        let node = resolve_node(&mut s)?;
        let api = resolve_api(&mut s)?;
        let certificates = resolve_certificates(&mut s, &api)?;
        let sources = resolve_sources(&mut s, &api.auth)?;
        let containerd = resolve_containerd(&mut s);
        let swap = swap::Swap::resolve(s.fail_swap_on, s.memory_swap.take())?;
        let pods = resolve_pods(&mut s, &node, &swap)?;
        Ok(Config {
            node,
            sources,
            kubeconfig: s.kubeconfig.take(),
            state_key_file: s.state_key_file.take().map(absolute),
            certificates,
            containerd,
            pods,
            api,
            shutdown: Shutdown {
                stop_pods: s.stop_pods_on_shutdown.unwrap_or(false),
                groups: node_shutdown::resolve(
                    s.shutdown_grace_period.take(),
                    s.shutdown_grace_period_critical_pods.take(),
                    s.shutdown_grace_period_by_pod_priority.take(),
                )?,
            },
            allow_writable_manifest_dir: s.allow_writable_manifest_dir.unwrap_or(false),
            ebpf: s.ebpf.unwrap_or(DEFAULT_EBPF),
            eviction,
            gc: resolve_gc(&mut s)?,
            node_resources: NodeResources::resolve(node_resources::Given {
                cgroup_driver: s.cgroup_driver.take(),
                cgroup_root: s.cgroup_root.take(),
                pod_max_pids: s.pod_max_pids.take(),
                system_reserved: std::mem::take(&mut s.system_reserved),
                kube_reserved: std::mem::take(&mut s.kube_reserved),
                enforce_node_allocatable: std::mem::take(&mut s.enforce_node_allocatable),
            })?
            .with_eviction_hard(eviction_hard),
            swap,
        })
    }
}

/// The node's name, address, directories and registration.
fn resolve_node(s: &mut Settings) -> Result<Node, Error> {
    let name = match s.node_name.take() {
        Some(name) => name,
        None => hostname(&crate::host::Kernel).map_err(Error::NodeName)?,
    };
    Ok(Node {
        name: name.to_lowercase(),
        ip: s.node_ip,
        state_dir: absolute(s.state_dir.take().unwrap_or_else(|| DEFAULT_STATE_DIR.into())),
        // Absolute: containerd's shims get log paths, and they run elsewhere.
        run_dir: absolute(s.run_dir.take().unwrap_or_else(|| DEFAULT_RUN_DIR.into())),
        pod_log_dir: absolute(s.pod_log_dir.take().unwrap_or_else(|| DEFAULT_POD_LOG_DIR.into())),
        labels: node_labels(std::mem::take(&mut s.node_labels))?,
        taints: std::mem::take(&mut s.register_with_taints).into_iter().flat_map(|t| t.0).collect(),
        max_pods: s.max_pods.unwrap_or(outpost_core::node_status::MAX_PODS),
        lease_duration_seconds: lease_duration(s.node_lease_duration_seconds)?,
    })
}

/// The local API: its addresses, TLS files and who may call it (N1).
fn resolve_api(s: &mut Settings) -> Result<api::Config, Error> {
    let listen = s.listen.unwrap_or_else(|| {
        SocketAddr::new(
            s.address.unwrap_or(DEFAULT_LISTEN.ip()),
            s.port.unwrap_or(DEFAULT_LISTEN.port()),
        )
    });
    let tls = match (s.tls_cert_file.take(), s.tls_private_key_file.take()) {
        (Some(cert_file), Some(key_file)) => Some(api::Tls { cert_file, key_file }),
        (None, None) => None,
        (Some(_), None) => return Err(Error::TlsPair("tls-cert-file", "tls-private-key-file")),
        (None, Some(_)) => return Err(Error::TlsPair("tls-private-key-file", "tls-cert-file")),
    };
    let mut authentication = s.authentication.take();
    let client_ca_file = s.client_ca_file.take().or_else(|| {
        authentication.as_mut().and_then(|a| a.x509.take()).and_then(|x| x.client_ca_file)
    });
    let access = node_api::resolve(
        node_api::Flags {
            token_webhook: s.authentication_token_webhook,
            token_webhook_cache_ttl: s.authentication_token_webhook_cache_ttl.take(),
            anonymous: s.anonymous_auth,
            mode: s.authorization_mode.take(),
            authorized_ttl: s.authorization_webhook_cache_authorized_ttl.take(),
            unauthorized_ttl: s.authorization_webhook_cache_unauthorized_ttl.take(),
        },
        authentication,
        s.authorization.take(),
        s.kubeconfig.is_some(),
    )?;
    let healthz = match s.healthz_port.unwrap_or(DEFAULT_HEALTHZ.port()) {
        0 => None,
        port => Some(SocketAddr::new(s.healthz_bind_address.unwrap_or(DEFAULT_HEALTHZ.ip()), port)),
    };
    let auth = api::Auth {
        token_file: s.token_file.take(),
        tls,
        client_ca_file,
        anonymous_loopback_reads: s.anonymous_loopback_reads.unwrap_or(false),
        access,
    };
    let streaming_idle_timeout = match s.streaming_connection_idle_timeout.take() {
        Some(raw) => outpost_core::duration::positive(&raw)
            .ok_or(Error::Duration { field: "streamingConnectionIdleTimeout", value: raw })?,
        None => DEFAULT_STREAMING_CONNECTION_IDLE_TIMEOUT,
    };
    Ok(api::Config { listen, healthz, auth, streaming_idle_timeout })
}

/// J1, J2: the client certificate's bootstrap and rotation, the serving certificate's
/// bootstrap; each needs what it names.
fn resolve_certificates(s: &mut Settings, api: &api::Config) -> Result<Certificates, Error> {
    let server_tls_bootstrap = s.server_tls_bootstrap.unwrap_or(false);
    if server_tls_bootstrap && (s.kubeconfig.is_none() || api.auth.tls.is_some()) {
        return Err(Error::ServerTlsBootstrap);
    }
    if api.auth.client_ca_file.is_some() && api.auth.tls.is_none() && !server_tls_bootstrap {
        return Err(Error::TlsPair("client-ca-file", "tls-cert-file and tls-private-key-file"));
    }
    if s.bootstrap_kubeconfig.is_some() && s.kubeconfig.is_none() {
        return Err(Error::BootstrapWithoutKubeconfig);
    }
    if s.rotate_certificates == Some(true) && s.bootstrap_kubeconfig.is_none() {
        return Err(Error::RotateWithoutBootstrap);
    }
    Ok(Certificates {
        server_tls_bootstrap,
        rotate: s.rotate_certificates.unwrap_or(s.bootstrap_kubeconfig.is_some()),
        bootstrap_kubeconfig: s.bootstrap_kubeconfig.take().map(absolute),
    })
}

/// The manifest directory, the manifest URL and its headers, and whether the push
/// endpoint exists (only when callers of the local API can authenticate).
fn resolve_sources(s: &mut Settings, auth: &api::Auth) -> Result<sources::Config, Error> {
    let mut manifest_url_headers =
        s.manifest_url_header.iter().map(|h| parse_header(h)).collect::<Result<Vec<_>, _>>()?;
    for (name, values) in s.static_pod_url_header.take().unwrap_or_default() {
        manifest_url_headers.extend(values.into_iter().map(|v| (name.clone(), v)));
    }
    let manifest_url_interval = match s.manifest_url_interval.take() {
        Some(raw) => outpost_core::duration::positive(&raw)
            .ok_or(Error::Duration { field: "manifest-url-interval", value: raw })?,
        None => DEFAULT_MANIFEST_URL_INTERVAL,
    };
    Ok(sources::Config {
        manifest_dir: s.manifest_dir.take().unwrap_or_else(|| DEFAULT_MANIFEST_DIR.into()),
        watcher: s.watcher.unwrap_or(DEFAULT_WATCHER),
        manifest_url: s.manifest_url.take(),
        manifest_url_headers,
        manifest_url_interval,
        manifest_url_ca_file: s.manifest_url_ca_file.take(),
        push: auth.token_file.is_some() || auth.client_ca_file.is_some(),
    })
}

/// Who runs containerd, its socket and namespace.
fn resolve_containerd(s: &mut Settings) -> containerd::Config {
    containerd::Config {
        mode: s.containerd.unwrap_or(DEFAULT_CONTAINERD),
        socket: s.containerd_socket.take().unwrap_or_else(|| DEFAULT_CONTAINERD_SOCKET.into()),
        namespace: s
            .containerd_namespace
            .take()
            .unwrap_or_else(|| crate::runtime::containerd::NAMESPACE.to_owned()),
        shim_grouping: s.shim_grouping.unwrap_or(DEFAULT_SHIM_GROUPING),
    }
}

/// What the pod workers run pods with: the OCI runtime, the runtime handlers (D5) and the
/// logger, CNI, image credentials and the images dir, seccomp profiles, CDI specs,
/// admission, DNS, swap.
fn resolve_pods(s: &mut Settings, node: &Node, swap: &swap::Swap) -> Result<pods::Config, Error> {
    let cni_bin_dirs = match std::mem::take(&mut s.cni_bin_dir) {
        dirs if dirs.is_empty() => DEFAULT_CNI_BIN_DIRS.iter().map(PathBuf::from).collect(),
        dirs => dirs,
    };
    let driver = s.cgroup_driver.unwrap_or(node_resources::CgroupDriver::Cgroupfs);
    let cdi_spec_dirs = match std::mem::take(&mut s.cdi_spec_dir) {
        dirs if dirs.is_empty() => {
            crate::runtime::cdi::DEFAULT_SPEC_DIRS.iter().map(PathBuf::from).collect()
        }
        dirs => dirs,
    };
    Ok(pods::Config {
        container_logger: s.container_logger.unwrap_or(DEFAULT_CONTAINER_LOGGER),
        runtime: s.runtime.unwrap_or(DEFAULT_RUNTIME),
        runtime_handlers: runtime_handlers::resolve(
            std::mem::take(&mut s.runtime_handler),
            driver,
        )?,
        cni_conf_dir: s.cni_conf_dir.take().unwrap_or_else(|| DEFAULT_CNI_CONF_DIR.into()),
        cni_bin_dirs,
        image_credentials_file: s.image_credentials_file.take(),
        images_dir: s.images_dir.take(),
        root_dir: absolute(s.root_dir.take().unwrap_or_else(|| DEFAULT_ROOT_DIR.into())),
        seccomp_profile_root: absolute(
            s.seccomp_profile_root.take().unwrap_or_else(|| node.state_dir.join(SECCOMP_DIR)),
        ),
        cdi_spec_dirs,
        allowed_unsafe_sysctls: allowed_unsafe_sysctls(std::mem::take(
            &mut s.allowed_unsafe_sysctls,
        ))?,
        admission_policy: admission::resolve(s.admission_policy.take())?,
        dns: dns::Dns::resolve(
            std::mem::take(&mut s.cluster_dns),
            s.cluster_domain.take(),
            s.resolv_conf.take(),
        ),
        swap_behavior: swap.behavior,
    })
}

/// Garbage collection's thresholds and ages (G1).
fn resolve_gc(s: &mut Settings) -> Result<gc::GcConfig, Error> {
    Ok(gc::GcConfig::resolve(gc::Given {
        maximum_dead_containers_per_container: s.maximum_dead_containers_per_container,
        maximum_dead_containers: s.maximum_dead_containers,
        minimum_container_ttl_duration: s.minimum_container_ttl_duration.take(),
        image_gc_high_threshold: s.image_gc_high_threshold,
        image_gc_low_threshold: s.image_gc_low_threshold,
        minimum_image_ttl_duration: s.minimum_image_ttl_duration.take(),
        image_maximum_gc_age: s.image_maximum_gc_age.take(),
    })?)
}

/// `nodeLeaseDurationSeconds`: kubelet's 40 unless given; at least that.
fn lease_duration(given: Option<i32>) -> Result<i32, Error> {
    let minimum = outpost_core::node_status::NODE_LEASE_DURATION_SECONDS;
    match given {
        None => Ok(minimum),
        Some(seconds) if seconds >= minimum => Ok(seconds),
        Some(seconds) => Err(Error::LeaseDuration(seconds)),
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
    Settings::from_yaml(&text)
        .map_err(|source| Error::Parse { path: path.into(), source: Box::new(source) })
}

impl Settings {
    /// The config file's fields from its text (one YAML document).
    pub fn from_yaml(text: &str) -> Result<Settings, serde_saphyr::Error> {
        // A key given twice is refused, not silently the last one. Only YAML 1.2's
        // true/false are booleans (`ebpf: no` is refused, not false). The budget is a
        // generous bound for a file of a few hundred lines. No snippet: [`Error::Parse`]
        // is one line, `file:line:column: message`.
        let options = serde_saphyr::options! {
            budget: serde_saphyr::budget! {
                max_documents: 1,
                max_depth: 32,
                max_events: 100_000,
                max_total_scalar_bytes: 1 << 20,
            },
            duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
            strict_booleans: true,
            with_snippet: false,
        };
        serde_saphyr::from_str_with_options(text, options)
    }
}

/// `path:line:column` where `error` has a place in the file, else `path`.
fn place(path: &Path, error: &serde_saphyr::Error) -> String {
    match error.location() {
        Some(at) => format!("{}:{}:{}", path.display(), at.line(), at.column()),
        None => path.display().to_string(),
    }
}

/// `error`'s message in serde-saphyr's wording for users, without the place (which
/// [`place`] puts first).
fn message(error: &serde_saphyr::Error) -> String {
    let formatter = serde_saphyr::UserMessageFormatter.with_localizer(&NoPlace);
    error.render_with_options(serde_saphyr::render_options! { formatter: &formatter })
}

/// English wording with no " at line L, column C" suffix.
struct NoPlace;

impl serde_saphyr::Localizer for NoPlace {
    fn attach_location<'a>(
        &self,
        message: Cow<'a, str>,
        _: serde_saphyr::Location,
    ) -> Cow<'a, str> {
        message
    }
}

/// `--allowed-unsafe-sysctls`, each checked to be namespaced as kubelet checks them.
pub fn allowed_unsafe_sysctls(patterns: Vec<String>) -> Result<Vec<String>, Error> {
    for pattern in &patterns {
        outpost_core::admission::check_allowed_unsafe_sysctl(pattern)
            .map_err(Error::UnsafeSysctl)?;
    }
    Ok(patterns)
}

/// `--node-labels` of every flag and the file, checked as kubelet checks them (K5).
fn node_labels(given: Vec<Labels>) -> Result<BTreeMap<String, String>, Error> {
    let labels = given.into_iter().flat_map(|labels| labels.0).collect();
    outpost_core::node_labels::validate(&labels)?;
    Ok(labels)
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
pub fn hostname(host: &dyn crate::host::Host) -> std::io::Result<String> {
    let name = host.proc("sys/kernel/hostname")?;
    Ok(name.trim().to_owned())
}

pub mod admission;
pub mod configz;
pub mod dns;
pub mod eviction;

pub mod gc;
pub mod node_api;
pub mod node_shutdown;
pub mod pods;
pub mod runtime_handlers;
pub mod sources;
pub mod swap;
#[cfg(test)]
mod tests;
