//! Command-line interface: what `outpost --help` shows.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::{self, Flags};
use crate::runtime::managed;
use crate::source::file::watch::Preference;

#[derive(Debug, Parser)]
#[command(
    name = "outpost",
    version,
    about = "A small, offline-first node agent: static pods from a directory, a URL, a push endpoint and the API server, run through containerd."
)]
pub struct Cli {
    /// Log format for the agent's own logs (default: text on a terminal, JSON otherwise).
    #[arg(long, global = true, value_enum)]
    pub log_format: Option<LogFormat>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent.
    Run(Box<RunArgs>),
    /// Check manifests offline; prints `file:line:col: message` per problem, exits 1 if any.
    Validate(ValidateArgs),
    /// Manage the images in containerd's `outpost` namespace.
    #[command(subcommand)]
    Images(ImagesCommand),
    /// Print the version.
    Version,
    /// List the agent's pods, as `kubectl get pods` does (every namespace unless -n).
    Pods(PodsArgs),
    /// Show a pod in detail (containers, conditions, recent events), as `kubectl describe
    /// pod` does.
    Describe(DescribeArgs),
    /// Show the agent at a glance: pod sources, API server, runtime, pods.
    #[command(after_help = "Exit status: 0 if the agent is ready (every pod source seen, \
containerd connected), 1 if it is not ready or cannot be reached.")]
    Status(StatusArgs),
    /// The file source's manifests: `outpost manifests audit` shows who changed them.
    #[command(subcommand)]
    Manifests(ManifestsCommand),
    /// Print a container's logs, through the agent's local API; while the agent is down,
    /// from the files under the pod log directory.
    Logs(LogsCommand),
    /// The container logger containerd's shim runs (internal; see `runtime::logs`).
    #[command(name = crate::runtime::logs::LOGGER_SUBCOMMAND, hide = true)]
    ContainerLog(ContainerLogArgs),
}

/// Where the agent's local API is and how to authenticate to it (`pods`, `describe`,
/// `status`, `logs`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientArgs {
    /// The agent's local API [default: from the agent's config (listen, or address and
    /// port; https when it has tlsCertFile), else http://127.0.0.1:10250].
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// File with the bearer token to send [default: the agent config's tokenFile].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// PEM bundle of the CAs that sign the agent's certificate [default: the agent
    /// config's tlsCertFile, else the system's CAs].
    #[arg(long, value_name = "FILE")]
    pub certificate_authority: Option<PathBuf>,
    /// Client certificate (PEM) to present, for an agent with --client-ca-file.
    #[arg(long, value_name = "FILE", requires = "client_key")]
    pub client_certificate: Option<PathBuf>,
    /// The private key (PEM) of --client-certificate.
    #[arg(long, value_name = "FILE", requires = "client_certificate")]
    pub client_key: Option<PathBuf>,
    /// The agent's YAML config, read for its address and credentials [default:
    /// /etc/outpost/config.yaml, if it exists].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PodsOutput {
    /// The table, with IP and NODE.
    Wide,
    /// The `v1 PodList`, as JSON.
    Json,
    /// The `v1 PodList`, as YAML.
    Yaml,
}

#[derive(Debug, clap::Args)]
pub struct PodsArgs {
    /// Only the pods of this namespace (the NAMESPACE column is then left out).
    #[arg(short, long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Every namespace (the default: a node has few pods; accepted for kubectl's habit).
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Output format [default: the table].
    #[arg(short, long, value_enum, value_name = "FORMAT")]
    pub output: Option<PodsOutput>,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum ManifestsCommand {
    /// The manifest audit log (`/manifests/audit`): every change the file source acted on
    /// (added, changed, removed, rejected) and the process that wrote it, oldest first.
    Audit(AuditArgs),
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Only this manifest (its name in the manifest directory, or its full path).
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
    /// Only the newest N entries.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Print the agent's answer as JSON instead of the table.
    #[arg(short, long, value_enum, value_name = "FORMAT")]
    pub output: Option<StatusOutput>,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Args)]
pub struct DescribeArgs {
    /// The pod, NAMESPACE/NAME (NAME alone: namespace default).
    #[arg(value_name = "NAMESPACE/POD")]
    pub pod: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print the agent's `/status` answer as JSON instead of text.
    #[arg(short, long, value_enum, value_name = "FORMAT")]
    pub output: Option<StatusOutput>,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusOutput {
    Json,
}

/// `outpost logs`: what to print ([`LogsArgs`], which the file reader takes too), how
/// far back, and how to reach the agent.
#[derive(Debug, clap::Args)]
pub struct LogsCommand {
    #[command(flatten)]
    pub logs: LogsArgs,
    /// Only output newer than this, e.g. 10s, 5m or 2h (needs the agent: ignored when
    /// reading the files).
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// The pod, NAMESPACE/NAME (NAME alone: namespace default).
    #[arg(value_name = "NAMESPACE/POD")]
    pub pod: String,
    /// The container (default: the pod's only container).
    #[arg(short, long)]
    pub container: Option<String>,
    /// Keep printing new output, across rotations and restarts, until interrupted.
    #[arg(short, long, conflicts_with = "previous")]
    pub follow: bool,
    /// Print only the last N lines of the current file.
    #[arg(long, value_name = "N")]
    pub tail: Option<usize>,
    /// Print the logs of the previous run of the container.
    #[arg(short, long)]
    pub previous: bool,
    /// Start each line with its timestamp (RFC 3339).
    #[arg(long)]
    pub timestamps: bool,
    /// Where the pod logs are (read when the agent is down).
    #[arg(long, value_name = "DIR", default_value = crate::runtime::logs::DEFAULT_POD_LOG_DIR)]
    pub pod_log_dir: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ContainerLogArgs {
    /// The live log file to write (`.../<restartCount>.log`).
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// Rotate the file before it grows past this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::runtime::logs::DEFAULT_MAX_SIZE)]
    pub max_size: u64,
    /// Files to keep, the live one included.
    #[arg(long, value_name = "N", default_value_t = crate::runtime::logs::DEFAULT_MAX_FILES, value_parser = at_least_one)]
    pub max_files: usize,
}

fn at_least_one(value: &str) -> Result<usize, String> {
    match value.parse() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}")),
    }
}

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Import OCI image-layout or docker-archive (`docker save`) tarballs and unpack them;
    /// prints `imported NAME DIGEST` per image, exits 1 if any tarball fails.
    Import(ImportArgs),
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// containerd socket.
    #[arg(long, value_name = "PATH", default_value = crate::runtime::containerd::DEFAULT_SOCKET)]
    pub containerd_socket: PathBuf,
    /// containerd namespace to import into (the agent's `--containerd-namespace`).
    #[arg(long, value_name = "NAME", default_value = crate::runtime::containerd::NAMESPACE)]
    pub containerd_namespace: String,
    /// Image tarballs (uncompressed).
    #[arg(required = true, value_name = "TAR")]
    pub tarballs: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// YAML config file; same fields as the flags (camelCase), plus the KubeletConfiguration
    /// names staticPodPath, staticPodURL, staticPodURLHeader, address and port.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Node name (default: the hostname, lowercased).
    #[arg(long)]
    pub node_name: Option<String>,
    /// Directory of static pod manifests, or a single manifest file [default: /etc/outpost/manifests].
    #[arg(long, value_name = "PATH")]
    pub manifest_dir: Option<PathBuf>,
    /// URL of a Pod or PodList manifest, polled.
    #[arg(long, value_name = "URL")]
    pub manifest_url: Option<String>,
    /// Header sent with --manifest-url requests, "Name: value"; repeatable.
    #[arg(long, value_name = "HEADER")]
    pub manifest_url_header: Vec<String>,
    /// How often the manifest URL is fetched, e.g. "20s" (jittered) [default: 20s].
    #[arg(long, value_name = "DURATION")]
    pub manifest_url_interval: Option<String>,
    /// PEM file of the CAs to trust for an https manifest URL (instead of the system's).
    #[arg(long, value_name = "FILE")]
    pub manifest_url_ca_file: Option<PathBuf>,
    /// Kubeconfig for the API server.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// State directory [default: /var/lib/outpost].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The external containerd's socket [default: /run/containerd/containerd.sock].
    #[arg(long, value_name = "PATH")]
    pub containerd_socket: Option<PathBuf>,
    /// Who runs containerd: "managed" (the agent starts and supervises its own, sockets in
    /// /run/outpost/containerd, data in <state-dir>/containerd), "external" (connect to
    /// --containerd-socket), or "auto": external if that socket exists, else managed if
    /// containerd is installed [default: auto].
    #[arg(long, value_enum, value_name = "MODE")]
    pub containerd: Option<ContainerdMode>,
    /// Address of the local API [default: 127.0.0.1:10250].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
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
    #[arg(long)]
    pub anonymous_loopback_reads: bool,
    /// Directory of image tarballs to import (air-gap).
    #[arg(long, value_name = "DIR")]
    pub images_dir: Option<PathBuf>,
    /// Kernel interface for watching the manifest directory [default: auto].
    #[arg(long, value_enum)]
    pub watcher: Option<Watcher>,
    /// containerd namespace for the agent's images and containers [default: outpost].
    #[arg(long, value_name = "NAME")]
    pub containerd_namespace: Option<String>,
    /// The node's IP address (status.hostIP) [default: the address of the default route's interface].
    #[arg(long, value_name = "IP")]
    pub node_ip: Option<std::net::IpAddr>,
    /// Runtime state that a reboot clears: pods' namespaces [default: /run/outpost].
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// Where container logs go, kubelet's layout [default: /var/log/pods].
    #[arg(long, value_name = "DIR")]
    pub pod_log_dir: Option<PathBuf>,
    /// CNI network configs; the first in lexical order is used, Outpost writes a bridge
    /// network there if there is none [default: /etc/cni/net.d].
    #[arg(long, value_name = "DIR")]
    pub cni_conf_dir: Option<PathBuf>,
    /// Where CNI plugins are looked up; repeatable [default: /opt/cni/bin and /usr/lib/cni].
    #[arg(long, value_name = "DIR")]
    pub cni_bin_dir: Vec<PathBuf>,
    /// Registry credentials for image pulls, a docker config.json (`auths`) like kubelet's
    /// /var/lib/kubelet/config.json.
    #[arg(long, value_name = "FILE")]
    pub image_credentials_file: Option<PathBuf>,
    /// Labels to register the Node with, "key=value[,key=value]"; repeatable
    /// (kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch are always set).
    #[arg(long, value_name = "LABELS")]
    pub node_labels: Vec<String>,
    /// Taints to register the Node with, "key[=value]:Effect[,…]"; repeatable.
    #[arg(long, value_name = "TAINTS")]
    pub register_with_taints: Vec<String>,
    /// On SIGTERM, stop every pod gracefully and report them (and the node) as shut down,
    /// as kubelet's graceful node shutdown does. By default the agent exits and leaves
    /// its pods running: the next agent adopts them (edge boxes restart the agent, not
    /// the workloads).
    #[arg(long)]
    pub stop_pods_on_shutdown: bool,
    /// Start even if the manifest directory (or --images-dir), or a directory above it, can
    /// be written by a user other than root. By default the agent refuses: whoever can write
    /// there can run any pod as root.
    #[arg(long)]
    pub allow_writable_manifest_dir: bool,
    /// Load the eBPF programs (kernel-seen container exits, OOM victims, exec audit, pod
    /// traffic metrics). Without BPF (not root, no BTF, lockdown) the agent says so once
    /// and runs on containerd's events alone. `false`: never try.
    #[arg(long, value_name = "BOOL")]
    pub ebpf: Option<bool>,
    /// Run the sources and the merge only: touch no runtime, print each delta as a JSON
    /// line on stdout, serve the local API.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ContainerdMode {
    Auto,
    Managed,
    External,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Watcher {
    Auto,
    Fanotify,
    Inotify,
}

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Manifest files, or directories (their manifests, as the file source reads them).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Node name used for defaulting (S2) [default: the hostname].
    #[arg(long)]
    pub node_name: Option<String>,
}

impl RunArgs {
    pub fn flags(&self) -> Flags {
        Flags {
            config: self.config.clone(),
            node_name: self.node_name.clone(),
            manifest_dir: self.manifest_dir.clone(),
            manifest_url: self.manifest_url.clone(),
            manifest_url_header: self.manifest_url_header.clone(),
            manifest_url_interval: self.manifest_url_interval.clone(),
            manifest_url_ca_file: self.manifest_url_ca_file.clone(),
            kubeconfig: self.kubeconfig.clone(),
            state_dir: self.state_dir.clone(),
            containerd_socket: self.containerd_socket.clone(),
            containerd: self.containerd.map(|mode| match mode {
                ContainerdMode::Auto => managed::Mode::Auto,
                ContainerdMode::Managed => managed::Mode::Managed,
                ContainerdMode::External => managed::Mode::External,
            }),
            listen: self.listen,
            token_file: self.token_file.clone(),
            tls_cert_file: self.tls_cert_file.clone(),
            tls_private_key_file: self.tls_private_key_file.clone(),
            client_ca_file: self.client_ca_file.clone(),
            anonymous_loopback_reads: self.anonymous_loopback_reads.then_some(true),
            images_dir: self.images_dir.clone(),
            watcher: self.watcher.map(|w| match w {
                Watcher::Auto => Preference::Auto,
                Watcher::Fanotify => Preference::Fanotify,
                Watcher::Inotify => Preference::Inotify,
            }),
            containerd_namespace: self.containerd_namespace.clone(),
            node_ip: self.node_ip,
            run_dir: self.run_dir.clone(),
            pod_log_dir: self.pod_log_dir.clone(),
            cni_conf_dir: self.cni_conf_dir.clone(),
            cni_bin_dir: self.cni_bin_dir.clone(),
            image_credentials_file: self.image_credentials_file.clone(),
            node_labels: self.node_labels.clone(),
            register_with_taints: self.register_with_taints.clone(),
            stop_pods_on_shutdown: self.stop_pods_on_shutdown.then_some(true),
            allow_writable_manifest_dir: self.allow_writable_manifest_dir.then_some(true),
            ebpf: self.ebpf,
        }
    }
}

/// The node name for `validate` when none is given: the hostname, or a placeholder.
pub fn validate_node_name(given: Option<&str>) -> String {
    given
        .map(str::to_owned)
        .or_else(|| config::hostname().ok())
        .unwrap_or_else(|| "node".into())
        .to_lowercase()
}
