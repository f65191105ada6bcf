//! `outpost run` configuration: flags, a YAML config file with the same fields, and the
//! KubeletConfiguration names that mean the same thing. Flags win over the file; the
//! file wins over defaults.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::runtime::managed::Mode as ContainerdMode;
use crate::source::file::watch::Preference;

pub const DEFAULT_MANIFEST_DIR: &str = "/etc/outpost/manifests";
pub const DEFAULT_STATE_DIR: &str = "/var/lib/outpost";
pub const DEFAULT_CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";
pub const DEFAULT_RUN_DIR: &str = "/run/outpost";
pub const DEFAULT_POD_LOG_DIR: &str = "/var/log/pods";
pub const DEFAULT_CNI_CONF_DIR: &str = "/etc/cni/net.d";
/// Where the CNI plugins usually are: the reference location, then Debian's.
pub const DEFAULT_CNI_BIN_DIRS: [&str; 2] = ["/opt/cni/bin", "/usr/lib/cni"];
/// kubelet's `httpCheckFrequency` default.
pub const DEFAULT_MANIFEST_URL_INTERVAL: Duration = Duration::from_secs(20);
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 10250));

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
    #[error("config file {path}: {field}: {message}")]
    Invalid { path: PathBuf, field: &'static str, message: String },
    #[error("{field} {value:?}: expected a positive duration such as \"20s\" or \"1m30s\"")]
    Duration { field: &'static str, value: String },
    #[error(
        "{0} is set without {1}: serving the local API over TLS needs both a certificate and its key"
    )]
    TlsPair(&'static str, &'static str),
    #[error("--manifest-url-header {0:?}: expected \"Name: value\"")]
    Header(String),
    #[error("--node-labels {0:?}: expected key=value pairs separated by commas")]
    NodeLabel(String),
    #[error(
        "--register-with-taints {0:?}: expected key[=value]:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute"
    )]
    Taint(String),
    #[error("cannot determine the node name from the hostname ({0}); pass --node-name")]
    NodeName(#[source] std::io::Error),
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
    /// Who runs containerd: auto, managed (the agent, see [`crate::runtime::managed`])
    /// or external.
    pub containerd: ContainerdMode,
    /// The external containerd's socket (auto mode uses it if it exists).
    pub containerd_socket: PathBuf,
    pub listen: SocketAddr,
    /// How the local API authenticates requests.
    pub auth: Auth,
    pub images_dir: Option<PathBuf>,
    pub watcher: Preference,
    pub containerd_namespace: String,
    pub node_ip: Option<IpAddr>,
    pub run_dir: PathBuf,
    pub pod_log_dir: PathBuf,
    pub cni_conf_dir: PathBuf,
    pub cni_bin_dirs: Vec<PathBuf>,
    pub image_credentials_file: Option<PathBuf>,
    /// Labels the Node is registered with (besides the well-known ones).
    pub node_labels: std::collections::BTreeMap<String, String>,
    /// Taints the Node is registered with.
    pub register_with_taints: Vec<Taint>,
    /// On SIGTERM, stop every pod (kubelet's graceful node shutdown) instead of leaving
    /// them running for the next agent to adopt.
    pub stop_pods_on_shutdown: bool,
    /// Start even if the manifest or images directory can be written by others than root.
    pub allow_writable_manifest_dir: bool,
    /// `--ebpf`: load the BPF programs (default true).
    pub ebpf: bool,
}

pub use k8s_openapi::api::core::v1::Taint;

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

/// Values given on the command line; `None` means "not given".
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub node_name: Option<String>,
    pub manifest_dir: Option<PathBuf>,
    pub manifest_url: Option<String>,
    pub manifest_url_header: Vec<String>,
    pub manifest_url_interval: Option<String>,
    pub manifest_url_ca_file: Option<PathBuf>,
    pub kubeconfig: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub containerd_socket: Option<PathBuf>,
    pub containerd: Option<ContainerdMode>,
    pub listen: Option<SocketAddr>,
    pub token_file: Option<PathBuf>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    pub client_ca_file: Option<PathBuf>,
    pub anonymous_loopback_reads: Option<bool>,
    pub images_dir: Option<PathBuf>,
    pub watcher: Option<Preference>,
    pub containerd_namespace: Option<String>,
    pub node_ip: Option<IpAddr>,
    pub run_dir: Option<PathBuf>,
    pub pod_log_dir: Option<PathBuf>,
    pub cni_conf_dir: Option<PathBuf>,
    pub cni_bin_dir: Vec<PathBuf>,
    pub image_credentials_file: Option<PathBuf>,
    /// `key=value[,key=value…]`, repeatable.
    pub node_labels: Vec<String>,
    /// `key[=value]:Effect[,…]`, repeatable.
    pub register_with_taints: Vec<String>,
    pub stop_pods_on_shutdown: Option<bool>,
    pub allow_writable_manifest_dir: Option<bool>,
    pub ebpf: Option<bool>,
}

/// The config file. Outpost's own names, plus KubeletConfiguration's where they exist.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    // KubeletConfiguration carries these two; accept and ignore them.
    #[serde(rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(rename = "kind")]
    _kind: Option<String>,
    node_name: Option<String>,
    #[serde(alias = "staticPodPath")]
    manifest_dir: Option<PathBuf>,
    #[serde(alias = "staticPodURL")]
    manifest_url: Option<String>,
    /// A list of "Name: value" strings.
    manifest_url_header: Option<Vec<String>>,
    /// KubeletConfiguration's form: header name → values.
    #[serde(rename = "staticPodURLHeader")]
    static_pod_url_header: Option<std::collections::BTreeMap<String, Vec<String>>>,
    /// A duration such as "20s" (KubeletConfiguration's `httpCheckFrequency`).
    #[serde(alias = "httpCheckFrequency")]
    manifest_url_interval: Option<String>,
    manifest_url_ca_file: Option<PathBuf>,
    kubeconfig: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    containerd_socket: Option<PathBuf>,
    containerd: Option<String>,
    listen: Option<SocketAddr>,
    /// KubeletConfiguration's `address` + `port` (used when `listen` is not given).
    address: Option<IpAddr>,
    port: Option<u16>,
    token_file: Option<PathBuf>,
    tls_cert_file: Option<PathBuf>,
    tls_private_key_file: Option<PathBuf>,
    client_ca_file: Option<PathBuf>,
    anonymous_loopback_reads: Option<bool>,
    images_dir: Option<PathBuf>,
    watcher: Option<String>,
    containerd_namespace: Option<String>,
    node_ip: Option<IpAddr>,
    run_dir: Option<PathBuf>,
    pod_log_dir: Option<PathBuf>,
    cni_conf_dir: Option<PathBuf>,
    cni_bin_dirs: Option<Vec<PathBuf>>,
    image_credentials_file: Option<PathBuf>,
    node_labels: Option<std::collections::BTreeMap<String, String>>,
    /// KubeletConfiguration's form: a list of Taint objects.
    register_with_taints: Option<Vec<Taint>>,
    stop_pods_on_shutdown: Option<bool>,
    allow_writable_manifest_dir: Option<bool>,
    ebpf: Option<bool>,
}

impl Config {
    /// Resolves flags over the config file (if any) over defaults.
    pub fn resolve(flags: Flags) -> Result<Config, Error> {
        let file = match &flags.config {
            Some(path) => read_file(path)?,
            None => File::default(),
        };
        let path = flags.config.clone().unwrap_or_default();
        let node_name = match flags.node_name.or(file.node_name) {
            Some(name) => name,
            None => hostname().map_err(Error::NodeName)?,
        };
        let listen = match (flags.listen, file.listen, file.address, file.port) {
            (Some(l), ..) | (None, Some(l), ..) => l,
            (None, None, address, port) => SocketAddr::new(
                address.unwrap_or(DEFAULT_LISTEN.ip()),
                port.unwrap_or(DEFAULT_LISTEN.port()),
            ),
        };
        let containerd = match (flags.containerd, file.containerd.as_deref()) {
            (Some(mode), _) => mode,
            (None, None | Some("auto")) => ContainerdMode::Auto,
            (None, Some("managed")) => ContainerdMode::Managed,
            (None, Some("external")) => ContainerdMode::External,
            (None, Some(other)) => {
                return Err(Error::Invalid {
                    path,
                    field: "containerd",
                    message: format!("{other:?}: expected auto, managed or external"),
                });
            }
        };
        let containerd_socket = flags
            .containerd_socket
            .or(file.containerd_socket)
            .unwrap_or_else(|| DEFAULT_CONTAINERD_SOCKET.into());
        let watcher = match (flags.watcher, file.watcher.as_deref()) {
            (Some(w), _) => w,
            (None, None | Some("auto")) => Preference::Auto,
            (None, Some("fanotify")) => Preference::Fanotify,
            (None, Some("inotify")) => Preference::Inotify,
            (None, Some(other)) => {
                return Err(Error::Invalid {
                    path,
                    field: "watcher",
                    message: format!("{other:?}: expected auto, fanotify or inotify"),
                });
            }
        };
        let mut headers = Vec::new();
        let raw = if flags.manifest_url_header.is_empty() {
            file.manifest_url_header.unwrap_or_default()
        } else {
            flags.manifest_url_header
        };
        for h in raw {
            headers.push(parse_header(&h)?);
        }
        for (name, values) in file.static_pod_url_header.unwrap_or_default() {
            headers.extend(values.into_iter().map(|v| (name.clone(), v)));
        }
        let manifest_url_interval = match flags.manifest_url_interval.or(file.manifest_url_interval)
        {
            Some(raw) => parse_duration(&raw)
                .ok_or(Error::Duration { field: "manifest-url-interval", value: raw })?,
            None => DEFAULT_MANIFEST_URL_INTERVAL,
        };
        let tls = match (
            flags.tls_cert_file.or(file.tls_cert_file),
            flags.tls_private_key_file.or(file.tls_private_key_file),
        ) {
            (Some(cert_file), Some(key_file)) => Some(Tls { cert_file, key_file }),
            (None, None) => None,
            (Some(_), None) => return Err(Error::TlsPair("tls-cert-file", "tls-private-key-file")),
            (None, Some(_)) => return Err(Error::TlsPair("tls-private-key-file", "tls-cert-file")),
        };
        let client_ca_file = flags.client_ca_file.or(file.client_ca_file);
        if client_ca_file.is_some() && tls.is_none() {
            return Err(Error::TlsPair("client-ca-file", "tls-cert-file and tls-private-key-file"));
        }
        let node_labels = if flags.node_labels.is_empty() {
            file.node_labels.unwrap_or_default()
        } else {
            parse_labels(&flags.node_labels)?
        };
        let register_with_taints = if flags.register_with_taints.is_empty() {
            file.register_with_taints.unwrap_or_default()
        } else {
            parse_taints(&flags.register_with_taints)?
        };
        let auth = Auth {
            token_file: flags.token_file.or(file.token_file),
            tls,
            client_ca_file,
            anonymous_loopback_reads: flags
                .anonymous_loopback_reads
                .or(file.anonymous_loopback_reads)
                .unwrap_or(false),
        };
        Ok(Config {
            node_name: node_name.to_lowercase(),
            manifest_dir: flags
                .manifest_dir
                .or(file.manifest_dir)
                .unwrap_or_else(|| DEFAULT_MANIFEST_DIR.into()),
            manifest_url: flags.manifest_url.or(file.manifest_url),
            manifest_url_headers: headers,
            manifest_url_interval,
            manifest_url_ca_file: flags.manifest_url_ca_file.or(file.manifest_url_ca_file),
            kubeconfig: flags.kubeconfig.or(file.kubeconfig),
            state_dir: absolute(
                flags.state_dir.or(file.state_dir).unwrap_or_else(|| DEFAULT_STATE_DIR.into()),
            ),
            containerd,
            containerd_socket,
            listen,
            auth,
            images_dir: flags.images_dir.or(file.images_dir),
            watcher,
            containerd_namespace: flags
                .containerd_namespace
                .or(file.containerd_namespace)
                .unwrap_or_else(|| crate::runtime::containerd::NAMESPACE.to_owned()),
            node_ip: flags.node_ip.or(file.node_ip),
            // Absolute: containerd's shims get log paths, and they run elsewhere.
            run_dir: absolute(
                flags.run_dir.or(file.run_dir).unwrap_or_else(|| DEFAULT_RUN_DIR.into()),
            ),
            pod_log_dir: absolute(
                flags
                    .pod_log_dir
                    .or(file.pod_log_dir)
                    .unwrap_or_else(|| DEFAULT_POD_LOG_DIR.into()),
            ),
            cni_conf_dir: flags
                .cni_conf_dir
                .or(file.cni_conf_dir)
                .unwrap_or_else(|| DEFAULT_CNI_CONF_DIR.into()),
            cni_bin_dirs: match (flags.cni_bin_dir, file.cni_bin_dirs) {
                (dirs, _) if !dirs.is_empty() => dirs,
                (_, Some(dirs)) => dirs,
                _ => DEFAULT_CNI_BIN_DIRS.iter().map(PathBuf::from).collect(),
            },
            image_credentials_file: flags.image_credentials_file.or(file.image_credentials_file),
            node_labels,
            register_with_taints,
            stop_pods_on_shutdown: flags
                .stop_pods_on_shutdown
                .or(file.stop_pods_on_shutdown)
                .unwrap_or(false),
            allow_writable_manifest_dir: flags
                .allow_writable_manifest_dir
                .or(file.allow_writable_manifest_dir)
                .unwrap_or(false),
            ebpf: flags.ebpf.or(file.ebpf).unwrap_or(true),
        })
    }
}

/// `path` made absolute against the current directory (kept as is if that fails).
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

fn read_file(path: &Path) -> Result<File, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| Error::Read { path: path.into(), source })?;
    if text.trim().is_empty() {
        return Ok(File::default());
    }
    serde_yaml_ng::from_str(&text).map_err(|source| Error::Parse { path: path.into(), source })
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

/// A positive duration: "20s", "1m30s", "500ms", or ISO 8601 ("PT20S").
pub fn parse_duration(raw: &str) -> Option<Duration> {
    let parsed: jiff::SignedDuration = raw.trim().parse().ok()?;
    Duration::try_from(parsed).ok().filter(|d| !d.is_zero())
}

/// The kernel's node name (what `hostname` prints), as kubelet's default.
pub fn hostname() -> std::io::Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")?;
    Ok(name.trim().to_owned())
}

#[cfg(test)]
mod tests;
