//! Command-line interface: what `outpost --help` shows.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::{self, LogFormat, Settings};

/// A flag's value the parsers below refuse (clap prints it after the flag and value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A count that must be at least 1 (`--max-files`).
    #[error("must be at least 1")]
    Zero,
    #[error(transparent)]
    Number(#[from] std::num::ParseIntError),
}

#[derive(Debug, Parser)]
#[command(
    name = "outpost",
    version,
    about = "A small, offline-first node agent: static pods from a directory, a URL, a push endpoint and the API server, run through containerd."
)]
pub struct Cli {
    /// Log format for the agent's own logs, on stderr (default: text, coloured on a terminal).
    #[arg(long, global = true, value_enum)]
    pub log_format: Option<LogFormat>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent.
    Run(Box<RunArgs>),
    /// Check manifests offline, against this host (AppArmor, allowed sysctls); prints
    /// `file:line:col: message` per problem (and warnings), exits 1 if any problem.
    Validate(ValidateArgs),
    /// Join a cluster with a bootstrap token, as `kubeadm join` does: verify the cluster's
    /// signed cluster-info and CA, then write the bootstrap kubeconfig and the agent's
    /// config for TLS bootstrapping.
    #[command(after_help = "Example:\n  outpost join --server https://10.0.0.1:6443 \\\n    \
--token abcdef.0123456789abcdef \\\n    --discovery-token-ca-cert-hash sha256:1234…cdef")]
    Join(JoinArgs),
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
    /// Run a command in a running container, through the agent's local API, as `kubectl
    /// exec` does.
    #[command(after_help = "Exit status: the command's own, or 1 if it could not be run \
(agent unreachable, credentials refused, pod or container not found or not running).\n\n\
Examples:\n  outpost exec default/web -- ls /\n  outpost exec web -c main -i -t -- sh")]
    Exec(ExecArgs),
    /// Add an ephemeral container to a static pod, through the agent's local API, as
    /// `kubectl debug` does for an API pod (X4); with -i, attach to it.
    #[command(after_help = "Exit status: the debug container's own with -i, else 0 once it \
is added; 1 if it could not be added (agent unreachable, credentials refused, pod not found \
or an API pod, container not valid).\n\nExamples:\n  outpost debug -it web-edge-1 --image \
busybox --target app\n  outpost debug kube-system/etcd-edge-1 --image busybox -- sleep 3600")]
    Debug(DebugArgs),
    /// The container logger containerd's shim runs (internal; see `runtime::logs`).
    #[command(name = crate::runtime::logs::LOGGER_SUBCOMMAND, hide = true)]
    ContainerLog(ContainerLogArgs),
    /// The node logger, run by the agent where `outpost-container-log` is not installed.
    #[command(name = crate::runtime::node_logger::AGENT_SUBCOMMAND, hide = true)]
    ContainerLogNode(ContainerLogNodeArgs),
    /// The pid 1 of a pod's shared pid namespace (internal; see `runtime::netns::pid`).
    #[command(name = crate::runtime::netns::pid::INIT_SUBCOMMAND, hide = true)]
    PodInit(PodInitArgs),
}

/// Where the agent's local API is and how to authenticate to it (`pods`, `describe`,
/// `status`, `logs`, `exec`).
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
    /// /etc/outpost/outpost.yaml, if it exists].
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
pub struct ExecArgs {
    /// The pod, NAMESPACE/NAME (NAME alone: namespace default).
    #[arg(value_name = "NAMESPACE/POD")]
    pub pod: String,
    /// The container [default: the pod's `kubectl.kubernetes.io/default-container`
    /// annotation, else its first container].
    #[arg(short, long)]
    pub container: Option<String>,
    /// Pass stdin to the command (closed at end of file).
    #[arg(short = 'i', long)]
    pub stdin: bool,
    /// Give the command a terminal (stdin must be one); with -i the local terminal is put
    /// in raw mode until the command ends, and its size follows the local window.
    #[arg(short = 't', long)]
    pub tty: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `outpost debug`'s arguments (kubectl debug's names).
#[derive(Debug, clap::Args)]
pub struct DebugArgs {
    /// The static pod, NAMESPACE/NAME (NAME alone: namespace default).
    #[arg(value_name = "NAMESPACE/POD")]
    pub pod: String,
    /// The debug container's image.
    #[arg(long, required = true)]
    pub image: String,
    /// The container whose processes the debug container sees (its PID namespace).
    #[arg(long, value_name = "CONTAINER")]
    pub target: Option<String>,
    /// The debug container's name [default: debugger-<5 random characters>].
    #[arg(short, long)]
    pub container: Option<String>,
    /// The image's pull policy [default: the image's: Always for :latest or no tag].
    #[arg(long, value_name = "POLICY")]
    pub image_pull_policy: Option<String>,
    /// Keep stdin open and attach to it.
    #[arg(short = 'i', long)]
    pub stdin: bool,
    /// Give it a terminal (with -i, the local one is put in raw mode while attached).
    #[arg(short = 't', long)]
    pub tty: bool,
    /// The command and its arguments, after `--` [default: the image's].
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `outpost pod-init`'s arguments.
#[derive(Debug, clap::Args)]
pub struct PodInitArgs {
    /// The pod's namespace directory (only names the pod, e.g. in `ps`).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// `outpost container-log`'s arguments.
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

/// `outpost container-log-node`'s arguments (the node logger, where
/// `outpost-container-log` is not installed).
#[derive(Debug, clap::Args)]
pub struct ContainerLogNodeArgs {
    /// The node logger's state directory.
    #[arg(long, value_name = "DIR")]
    pub state_dir: PathBuf,
    /// The Unix socket the agent registers containers on.
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
}

fn at_least_one(value: &str) -> Result<usize, Error> {
    match value.parse()? {
        0 => Err(Error::Zero),
        n => Ok(n),
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

/// `outpost run`: the [`Settings`] (flags, or the config file), and what only the
/// command line says.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub settings: Settings,
    /// Run the sources and the merge only: touch no runtime, print each delta as a JSON
    /// line on stdout, serve the local API.
    #[arg(long)]
    pub dry_run: bool,
}

/// The agent's config as the packages install it and the unit runs with it: what `outpost
/// join` writes, and what the commands that talk to the agent read, by default.
pub const AGENT_CONFIG: &str = "/etc/outpost/outpost.yaml";

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("bootstrap_token").required(true).args(["token", "token_file"]))]
pub struct JoinArgs {
    /// The API server, `https://HOST:PORT` (or `HOST:PORT`).
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// The bootstrap token, `ID.SECRET` (`kubeadm token create` makes one). Seen by
    /// anyone who can list processes: prefer --token-file.
    #[arg(long, value_name = "ID.SECRET")]
    pub token: Option<outpost_core::bootstrap_token::Token>,
    /// A file holding the bootstrap token (`ID.SECRET`, surrounding whitespace ignored),
    /// e.g. written by cloud-init; readable by its owner only.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The hash of the cluster CA's public key, `sha256:<hex>` (`kubeadm token create
    /// --print-join-command` prints it); repeatable, one must match.
    #[arg(
        long = "discovery-token-ca-cert-hash",
        visible_alias = "ca-cert-hash",
        value_name = "sha256:HEX",
        required = true
    )]
    pub ca_cert_hashes: Vec<outpost_core::bootstrap_token::Pin>,
    /// The node's name, written to the config [default: the agent's, the hostname].
    #[arg(long)]
    pub node_name: Option<String>,
    /// The agent config to write (created, or edited in place).
    #[arg(long, value_name = "FILE", default_value = AGENT_CONFIG)]
    pub config: PathBuf,
    /// Where the kubeconfigs go [default: the config's directory].
    #[arg(long, value_name = "DIR")]
    pub kubeconfig_dir: Option<PathBuf>,
    /// How long to keep trying to read a signed cluster-info (server unreachable, no
    /// signature for the token yet).
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub discovery_timeout: String,
}

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Manifest files, or directories (their manifests, as the file source reads them).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Node name used for defaulting (S2) [default: the hostname].
    #[arg(long)]
    pub node_name: Option<String>,
    /// The agent's YAML config, read for allowedUnsafeSysctls [default:
    /// /etc/outpost/outpost.yaml, if it exists].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// As `outpost run --allowed-unsafe-sysctls` (over the config file's).
    #[arg(long, value_name = "SYSCTLS", value_delimiter = ',')]
    pub allowed_unsafe_sysctls: Vec<String>,
    /// Review the pods against this source's admission policy (the config file's
    /// admissionPolicy): the source they are meant for.
    #[arg(long, default_value = "file", value_parser = ["file", "url", "push", "api"])]
    pub source: String,
}

/// The node name for `validate` when none is given: the hostname, or a placeholder.
pub fn validate_node_name(given: Option<&str>) -> String {
    given
        .map(str::to_owned)
        .or_else(|| config::hostname(&crate::host::Kernel).ok())
        .unwrap_or_else(|| "node".into())
        .to_lowercase()
}
