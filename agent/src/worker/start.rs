//! The pod workers as the agent starts them: once containerd answers and the images
//! dir's tarballs are in, the node's cgroups and CNI are set up and the workers take the
//! merge's batches. The node logger's task lives here too: the containers' output goes
//! through it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use outpost_core::admission::NodeFacts;
use outpost_core::backoff::Backoff;
use outpost_core::lifecycle::CrashLoopConfig;
use outpost_core::node_status;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::apiserver::Recorder;
use crate::config::node::Node;
use crate::config::node_resources::NodeResources;
use crate::config::values::{ContainerLogger, ShimGrouping};
use crate::containerd::Connection;
use crate::error_chain::describe;
use crate::gc;
use crate::objects::{Changes, Objects};
use crate::podconfig::Batch;
use crate::runtime::cgroups::PodCgroups;
use crate::runtime::cni::{Cni, CniConfig};
use crate::runtime::handler::Handlers;
use crate::runtime::image::credentials::{self, Keyring};
use crate::runtime::image::pull::PullOptions;
use crate::runtime::logs;
use crate::runtime::node_logger::NodeLogger;
use crate::runtime::spec;
use crate::status::StatusStore;
use crate::task::{Stop, Task};
use crate::worker::images_dir::ImagesReady;
use crate::worker::metrics::Metrics;
use crate::worker::{self, Runtime, Settings};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the image credentials file {}", path.display())]
    CredentialsFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("image credentials file {}", path.display())]
    Credentials {
        path: PathBuf,
        #[source]
        source: credentials::Error,
    },
    #[error(transparent)]
    Handlers(#[from] crate::worker::handlers::Error),
    #[error(
        "cannot set up the pods' cgroups (the pods cgroup and its QoS classes); the agent needs \
         root and the cgroup hierarchies mounted under /sys/fs/cgroup"
    )]
    Cgroups(#[source] crate::runtime::cgroups::Error),
    #[error(transparent)]
    Prober(#[from] crate::worker::probe::Error),
}

pub use crate::config::pods::Config;

/// When the agent exits and leaves the pods running, how long the pod workers may take
/// to finish what they were doing: a container's start or removal under way, a task's
/// reaping. With nothing under way they end at once; before containerd ever answered
/// they have nothing to finish, and end when told the agent leaves (O5).
const LEAVE_WAIT: Duration = Duration::from_secs(10);

/// What the pod workers work with.
#[derive(Debug)]
pub struct Deps {
    /// This executable: pod-init, and the container logger where the small one is not
    /// installed.
    pub exe: PathBuf,
    /// The node logger, run from the container logger the shims run too
    /// ([`container_logger`]); shared with the `node_logger` task.
    pub node_logger: NodeLogger,
    pub batches: mpsc::Receiver<Batch>,
    pub connection: Connection,
    pub images: ImagesReady,
    pub statuses: StatusStore,
    pub events: Recorder,
    /// The BPF programs, if loaded.
    pub ebpf: crate::ebpf::Handle,
    /// The API objects API pods refer to, and their changes.
    pub objects: Objects,
    pub changes: Changes,
    /// The eviction manager's choices (E2).
    pub evictions: worker::Evictions,
    pub gc: gc::Handle,
    /// The pods' cgroups: the pods and QoS cgroups are made before any pod runs.
    pub cgroups: Arc<PodCgroups>,
    /// Cancelled on a node shutdown with `--stop-pods-on-shutdown`: every pod stops.
    pub stop_pods: CancellationToken,
    /// The node as admission sees it (K4).
    pub node: Option<tokio::sync::watch::Receiver<outpost_core::node_admission::Node>>,
    /// The pods cgroup's limits (node allocatable) and the cgroup layout.
    pub resources: NodeResources,
    /// One shim per pod or one for the node (containerd's config).
    pub shim_grouping: ShimGrouping,
    /// The host's kernel, as the agent reads it.
    pub host: Arc<dyn crate::host::Host>,
    /// Graceful node shutdown's priority groups (J3): the pods' stop order.
    pub shutdown_groups: Vec<outpost_core::node_shutdown::PriorityGroup>,
    /// D1, D2: the device manager.
    pub devices: Option<crate::devices::Manager>,
    /// X4: the ephemeral containers `outpost debug` adds to static pods.
    pub debug: crate::debug_containers::DebugContainers,
}

impl Config {
    /// The admission facts of this node that the pods' specs are held against.
    pub fn facts(&self, apparmor_enabled: bool) -> NodeFacts {
        NodeFacts {
            apparmor_enabled,
            selinux_enabled: crate::host::selinux_enabled(),
            allowed_unsafe_sysctls: self.allowed_unsafe_sysctls.clone(),
            policy: self.admission_policy.clone(),
            cluster_dns: !self.dns.cluster_dns.is_empty(),
        }
    }

    /// The `pod_workers` task. Its end is the agent's: with the merge gone the workers
    /// finish what is under way (a replaced container's removal, a task's reaping) and
    /// end, pods still running.
    pub fn build(mut self, node: &Node, deps: Deps, metrics: Metrics) -> Result<Task, Error> {
        let keyring = keyring(self.image_credentials_file.as_deref())?;
        let named = std::mem::take(&mut self.runtime_handlers);
        let handlers = crate::worker::handlers::handlers(self.runtime, named)?;
        let leave = CancellationToken::new();
        let task = run(self, node.clone(), keyring, handlers, deps, metrics, leave.clone());
        Ok(Task::new("pod_workers", task).main().stop(Stop::Cancel(leave, LEAVE_WAIT)))
    }
}

/// The pod workers, from containerd's answer to the merge's end. Until containerd has
/// answered and the images dir is imported no pod was touched: `leave` (the agent
/// exits) ends them then at once, whereas afterwards they end with the merge, once what
/// is under way is done.
async fn run(
    config: Config,
    node: Node,
    keyring: Keyring,
    handlers: Handlers,
    deps: Deps,
    metrics: Metrics,
    leave: CancellationToken,
) -> Result<(), Error> {
    let ready = async {
        let containerd = deps.connection.connected().await?;
        deps.images.wait().await;
        Some(containerd)
    };
    let containerd = tokio::select! {
        containerd = ready => containerd,
        () = leave.cancelled() => None,
    };
    let Some(containerd) = containerd else { return Ok(()) };
    let cni = Cni::new(CniConfig {
        conf_dir: config.cni_conf_dir.clone(),
        bin_dirs: config.cni_bin_dirs.clone(),
        cache_dir: node.state_dir.join("cni"),
    });
    match cni.ensure_default_config() {
        Ok(Some(path)) => {
            info!(path = %path.display(), "no CNI network config found; wrote Outpost's default")
        }
        Ok(None) => {}
        Err(e) => {
            warn!(error = %describe(&e), "cannot write the default CNI config; pods wait for one")
        }
    }
    ensure_node_cgroups(&deps.resources, &deps.cgroups)?;
    if let Some(warning) = config.dns.stub_warning() {
        warn!("{warning}");
    }
    let swap = node_swap(config.swap_behavior, &*deps.host, deps.cgroups.hierarchy());
    let mut node_labels = node.labels.clone();
    let architecture = node_status::machine::go_arch(std::env::consts::ARCH);
    node_labels.extend(node_status::well_known_labels(&node.name, architecture));
    let settings = Settings {
        node_name: node.name.clone(),
        node_labels,
        host_ip: node.ip,
        state_dir: node.state_dir.clone(),
        run_dir: node.run_dir.clone(),
        pod_log_dir: node.pod_log_dir.clone(),
        logger: deps.node_logger.binary().to_path_buf(),
        container_logger: config.container_logger,
        node_logger: deps.node_logger,
        exe: deps.exe,
        dns: config.dns.node(node.ip),
        crash_loop: CrashLoopConfig::default(),
        keyring,
        pull: PullOptions::default(),
        host_capabilities: spec::host_capabilities(
            &deps.host.proc_pid_text(crate::host::Pid::Own, "status").unwrap_or_default(),
        ),
        seccomp_profile_root: config.seccomp_profile_root.clone(),
        cdi_spec_dirs: config.cdi_spec_dirs.clone(),
        facts: Arc::new(config.facts(crate::host::apparmor_enabled())),
        objects: deps.objects,
        host: deps.host,
        gc: deps.gc,
        cgroups: deps.cgroups,
        shim_grouping: deps.shim_grouping,
        handlers: Arc::new(handlers),
        devices: deps.devices.clone(),
        swap,
    };
    let runtime =
        Runtime::new(containerd, cni, settings, deps.statuses, deps.events, metrics, deps.ebpf)?;
    let runtime = match deps.node {
        Some(node) => runtime.with_node(node),
        None => runtime,
    };
    let runtime =
        runtime.with_shutdown_groups(deps.shutdown_groups).with_debug_containers(deps.debug);
    let runtime = match deps.devices {
        Some(devices) => runtime.with_devices(devices),
        None => runtime,
    };
    worker::run(Arc::new(runtime), deps.batches, deps.changes, deps.evictions, deps.stop_pods)
        .await;
    Ok(())
}

/// `--image-credentials-file`, read at start: a file that cannot be read or parsed stops
/// the agent before any pull goes out without its credentials.
fn keyring(path: Option<&Path>) -> Result<Keyring, Error> {
    let Some(path) = path else { return Ok(Keyring::default()) };
    let bytes = std::fs::read(path)
        .map_err(|source| Error::CredentialsFile { path: path.to_owned(), source })?;
    Keyring::from_docker_config(&bytes)
        .map_err(|source| Error::Credentials { path: path.to_owned(), source })
}

/// D6: what the containers' swap limits are decided from: the setting, the node's memory
/// and swap (`/proc/meminfo`), and the cgroup file that limits swap.
fn node_swap(
    behavior: outpost_core::swap::Behavior,
    host: &dyn crate::host::Host,
    hierarchy: &crate::runtime::cgroups::Hierarchy,
) -> spec::NodeSwap {
    let meminfo = host.proc("meminfo").unwrap_or_default();
    let field = |name| node_status::machine::meminfo_field(&meminfo, name).unwrap_or(0);
    let capacity =
        outpost_core::swap::Capacity { memory: field("MemTotal"), swap: field("SwapTotal") };
    let swap = spec::NodeSwap { behavior, capacity, controller: hierarchy.swap_controller(host) };
    info!(
        swap_behavior = behavior.as_str(),
        swap_bytes = capacity.swap,
        controller = ?swap.controller,
        "containers' swap"
    );
    swap
}

/// Makes the pods cgroup and its QoS classes' (Q2): the pods cgroup limited to node
/// allocatable with `enforceNodeAllocatable: [pods]`.
fn ensure_node_cgroups(resources: &NodeResources, cgroups: &PodCgroups) -> Result<(), Error> {
    let capacity = crate::host::capacity::capacity();
    let pods = resources.reservation.pods_cgroup(&capacity, resources.enforce_pods);
    cgroups.ensure_node(&pods).map_err(Error::Cgroups)?;
    info!(
        cgroup = cgroups.path(&resources.layout.pods()),
        enforce_node_allocatable = resources.enforce_pods,
        memory_limit = ?pods.memory_limit,
        cpu_shares = pods.cpu_shares,
        pids_limit = ?pods.pids_limit,
        "pods cgroup ready"
    );
    Ok(())
}

/// The node logger run from the container logger the shims run too (see
/// [`container_logger`]), and its `node_logger` task: keeps it running once one runs,
/// and leaves it running when the agent exits (it outlives the agent). With
/// `containerLogger: node` it starts the logger once containerd answers (no container
/// runs before), or adopts the one that runs; with `container`, the first container with
/// stdin starts it ([`NodeLogger::running`]).
pub fn node_logger(
    config: &Config,
    exe: &Path,
    run_dir: &Path,
    connection: Connection,
) -> (NodeLogger, Task) {
    let logger = NodeLogger::new(&container_logger(exe), run_dir);
    let on_demand = config.container_logger != ContainerLogger::Node;
    let supervised = logger.clone();
    let task = Task::infallible("node_logger", async move {
        if connection.connected().await.is_none() {
            return;
        }
        if on_demand {
            supervised.running().await;
        }
        supervise(supervised).await;
    });
    (logger, task)
}

/// Keeps the node logger running (see [`node_logger`]).
async fn supervise(logger: NodeLogger) {
    const RETRY: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
    let mut backoff = RETRY;
    loop {
        match logger.ensure_running().await {
            Ok((pid, true)) => {
                info!(pid, socket = %logger.socket().display(), "started the node logger");
                backoff.reset();
            }
            Ok((pid, false)) => {
                info!(pid, socket = %logger.socket().display(), "adopted the running node logger");
                backoff.reset();
            }
            Err(e) => {
                // One logger per node: no herd to spread, so the nominal delay, unjittered.
                let retry = backoff.next_delay(1.0);
                warn!(error = %describe(&e), retry = ?retry, "cannot start the node logger");
                tokio::time::sleep(retry).await;
                continue;
            }
        }
        logger.watch().await;
        warn!("the node logger ended; starting it again (it re-opens every container's output)");
        tokio::time::sleep(RETRY.nominal()).await;
    }
}

/// The container logger the shims will run ([`logs::logger_binary`]),
/// said once.
fn container_logger(exe: &Path) -> PathBuf {
    let logger = logs::logger_binary(exe);
    if logger == exe {
        warn!(
            exe = %exe.display(),
            "outpost-container-log is not installed beside outpost: containers log through `outpost container-log`, which costs about 1.4 MiB more memory per container"
        );
    } else {
        info!(logger = %logger.display(), "container logger");
    }
    logger
}
