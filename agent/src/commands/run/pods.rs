//! The pod runtime side of `outpost run`: containerd (connected, or started by the agent),
//! the images dir, CNI, and the pod workers.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use outpost_core::admission::NodeFacts;
use outpost_core::backoff::Backoff;
use outpost_core::eviction::Pressure;
use outpost_core::lifecycle::CrashLoopConfig;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use super::Error;
use crate::api::runtime::{self as api_runtime, RuntimeSlot};
use crate::apiserver::Recorder;
use crate::config::Config;
use crate::error_chain::describe;
use crate::eviction;
use crate::gc::metrics::GarbageCollection;
use crate::gc::{self, Collector};
use crate::objects::{Changes, Objects};
use crate::podconfig::Batch;
use crate::podconfig::SnapshotHandle;
use crate::runtime::image::metrics::ImageImports;
use crate::worker::metrics::Metrics;

use crate::runtime::cgroups::{Hierarchy, PodCgroups};
use crate::runtime::cni::{Cni, CniConfig};
use crate::runtime::exec::Execs;
use crate::runtime::image::credentials::Keyring;
use crate::runtime::image::pull::PullOptions;
use crate::runtime::image::watch::ImagesDir;
use crate::runtime::managed::{self, Choice, ManagedContainerd};
use crate::runtime::{Containerd, spec};
use crate::status::{RuntimeReady, StatusStore};
use crate::worker::{self, Runtime, Settings};

/// The eviction manager's options: the pods' cgroups where `--cgroup-root` and
/// `--cgroup-driver` put them, the state dir as nodefs, containerd's snapshotter root as
/// imagefs.
fn eviction_options(
    config: &Config,
    handles: EvictionHandles,
    statuses: StatusStore,
    containerd: Containerd,
) -> eviction::Options {
    let hierarchy = Hierarchy::detect();
    let layout = config.node_resources.layout.clone();
    eviction::Options {
        config: config.eviction.clone(),
        sources: eviction::Sources {
            hierarchy: hierarchy.clone(),
            pods_cgroup: layout.pods().path(layout.driver),
            nodefs: config.state_dir.clone(),
            imagefs: None,
            proc: PathBuf::from("/proc"),
        },
        places: eviction::PodPlaces {
            hierarchy,
            layout,
            state_dir: config.state_dir.clone(),
            pod_log_dir: config.pod_log_dir.clone(),
        },
        snapshot: handles.snapshot,
        statuses,
        evict: handles.evict,
        pressure: handles.pressure,
        metrics: handles.metrics,
        containerd: Some(containerd),
        gc: Some(handles.gc),
    }
}

/// `--containerd`: connect to a socket, or run containerd ourselves (with its binary).
pub(super) fn containerd_choice(config: &Config) -> (Choice, PathBuf) {
    let binary = managed::find_binary();
    let choice = managed::choose(
        config.containerd.choice(),
        config.containerd_socket.exists(),
        binary.is_some(),
    );
    // Without a binary, starting it fails with the error that says so.
    (choice, binary.unwrap_or_else(|| PathBuf::from("containerd")))
}

/// The managed containerd's options: its data under the state dir, sockets under the run dir.
pub(super) fn managed_options(config: &Config, binary: PathBuf) -> managed::Options {
    let mut options = managed::Options::new(binary, &config.state_dir);
    options.run_dir = config.run_dir.join("containerd");
    options
}

/// What the pod runtime shares with the rest of the agent.
#[derive(Debug)]
pub(super) struct RuntimeHandles {
    pub(super) statuses: StatusStore,
    pub(super) ready: RuntimeReady,
    /// containerd's version, once connected (the Node's nodeInfo).
    pub(super) version: Arc<OnceLock<String>>,
    pub(super) events: Recorder,
    /// The pod workers' metrics.
    pub(super) metrics: Metrics,
    /// The images dir's metrics.
    pub(super) images: ImageImports,
    /// Cancelled on a node shutdown with `--stop-pods-on-shutdown`.
    pub(super) stop_pods: CancellationToken,
    /// The BPF programs, if loaded.
    pub(super) ebpf: crate::ebpf::Handle,
    /// Where the local API finds the container runtime (`/exec`, `/run`, `/containerLogs`).
    pub(super) runtime_slot: RuntimeSlot,
    /// The API objects API pods refer to, and their changes.
    pub(super) objects: Objects,
    pub(super) changes: Changes,
    /// The eviction manager's choices (E2).
    pub(super) evictions: worker::Evictions,
    /// What the eviction manager works with.
    pub(super) eviction: EvictionHandles,
    /// The garbage collector's side (G1).
    pub(super) gc: GcHandles,
    /// The pods' cgroups: the pods and QoS cgroups are made before any pod runs.
    pub(super) cgroups: Arc<PodCgroups>,
}

/// The eviction manager's ends of its channels.
#[derive(Debug)]
pub(super) struct EvictionHandles {
    pub(super) evict: mpsc::UnboundedSender<worker::Eviction>,
    pub(super) pressure: tokio::sync::watch::Sender<Pressure>,
    pub(super) metrics: crate::eviction::metrics::Evictions,
    pub(super) snapshot: SnapshotHandle,
    /// Asked to collect containers and images on disk pressure, before pods are evicted.
    pub(super) gc: gc::Handle,
}

/// What the garbage collector and the ephemeral-storage monitor share with the agent.
#[derive(Debug)]
pub(super) struct GcHandles {
    pub(super) handle: gc::Handle,
    pub(super) metrics: GarbageCollection,
    /// The desired pods: their images are in use; those with storage limits are measured.
    pub(super) desired: SnapshotHandle,
    /// Where a pod past its storage limits is evicted.
    pub(super) evictions: tokio::sync::mpsc::UnboundedSender<worker::Eviction>,
}

/// The pod runtime, built: who runs containerd, and what the pod workers need.
#[derive(Debug)]
pub(super) struct PodRuntime {
    pub(super) config: Config,
    pub(super) choice: Choice,
    /// The `containerd` binary, for [`Choice::Managed`].
    pub(super) binary: PathBuf,
    /// This executable: pod-init, and the container logger where the small one is not
    /// installed.
    pub(super) exe: PathBuf,
    pub(super) batches: mpsc::Receiver<Batch>,
    pub(super) handles: RuntimeHandles,
}

impl PodRuntime {
    /// Starts the managed containerd if it is the choice (returned: the caller stops it),
    /// then spawns the pod runtime.
    pub(super) async fn start(
        self,
    ) -> Result<(JoinHandle<Result<(), Error>>, Option<ManagedContainerd>), Error> {
        let PodRuntime { config, choice, binary, exe, batches, handles } = self;
        let (socket, managed) = match choice {
            Choice::External => (config.containerd_socket.clone(), None),
            Choice::Managed => {
                let started = ManagedContainerd::start(managed_options(&config, binary)).await?;
                (started.socket().to_owned(), Some(started))
            }
        };
        Ok((tokio::spawn(run_pods(config, socket, exe, batches, handles)), managed))
    }
}

/// Makes the pods cgroup and its QoS classes' (Q2): the pods cgroup limited to node
/// allocatable with `enforceNodeAllocatable: [pods]`.
fn ensure_node_cgroups(config: &Config, cgroups: &PodCgroups) -> Result<(), Error> {
    let resources = &config.node_resources;
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

/// The container logger the shims will run ([`logs::logger_binary`]), said once.
fn container_logger(exe: &std::path::Path) -> PathBuf {
    let logger = crate::runtime::logs::logger_binary(exe);
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

/// Connects to containerd (retrying until it answers), then runs the pod workers.
async fn run_pods(
    config: Config,
    socket: PathBuf,
    exe: PathBuf,
    batches: mpsc::Receiver<Batch>,
    handles: RuntimeHandles,
) -> Result<(), Error> {
    let connect = Containerd::connect_with_backoff(&socket, Backoff::WATCH);
    let containerd = tokio::select! {
        containerd = connect => containerd.with_namespace(&config.containerd_namespace)?,
        // A node shutdown before containerd answered: there are no pods to stop.
        () = handles.stop_pods.cancelled() => return Ok(()),
    };
    handles.ready.store(true, std::sync::atomic::Ordering::Relaxed);
    handles.runtime_slot.set(api_runtime::Runtime {
        execs: Execs::new(containerd.clone(), config.run_dir.join("exec")),
        containerd: containerd.clone(),
    });
    let containerd_for_eviction = containerd.clone();
    let statuses = handles.statuses.clone();
    match containerd.version().await {
        Ok(v) => {
            info!(socket = %socket.display(), version = v.version, "connected to containerd");
            let _ = handles.version.set(v.version);
        }
        Err(e) => warn!(error = %describe(&e), "containerd did not report its version"),
    }
    // Pods wait for the tarballs already in the images dir: they may need them.
    let images = match &config.images_dir {
        Some(dir) => {
            let record = config.state_dir.join("images-imported.json");
            let mut images = ImagesDir::open(dir.clone(), containerd.clone(), record)?
                .with_metrics(handles.images)
                .with_imported(handles.gc.handle.images_notify());
            match images.import_present().await {
                Ok(summary) => info!(
                    imported = summary.imported.len(),
                    unchanged = summary.unchanged.len(),
                    failed = summary.failed.len(),
                    dir = %dir.display(),
                    "images dir imported"
                ),
                Err(e) => warn!(error = %describe(&e), "cannot import the images dir"),
            }
            Some(tokio::spawn(async move {
                if let Err(e) = images.run().await {
                    warn!(error = %describe(&e), "stopped watching the images dir");
                }
            }))
        }
        None => None,
    };
    let cni = Cni::new(CniConfig {
        conf_dir: config.cni_conf_dir.clone(),
        bin_dirs: config.cni_bin_dirs.clone(),
        cache_dir: config.state_dir.join("cni"),
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
    let keyring = match &config.image_credentials_file {
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|source| Error::CredentialsFile { path: path.clone(), source })?;
            Keyring::from_docker_config(&bytes)
                .map_err(|source| Error::Credentials { path: path.clone(), source })?
        }
        None => Keyring::default(),
    };
    let cgroups = handles.cgroups;
    ensure_node_cgroups(&config, &cgroups)?;
    let settings = Settings {
        node_name: config.node_name.clone(),
        host_ip: config.node_ip,
        state_dir: config.state_dir.clone(),
        run_dir: config.run_dir.clone(),
        pod_log_dir: config.pod_log_dir.clone(),
        logger: container_logger(&exe),
        exe,
        host_resolv_conf: PathBuf::from("/etc/resolv.conf"),
        crash_loop: CrashLoopConfig::default(),
        keyring,
        pull: PullOptions::default(),
        host_capabilities: spec::host_capabilities(
            &std::fs::read_to_string("/proc/self/status").unwrap_or_default(),
        ),
        seccomp_profile_root: config.seccomp_profile_root.clone(),
        facts: Arc::new(NodeFacts {
            apparmor_enabled: crate::host::apparmor_enabled(),
            allowed_unsafe_sysctls: config.allowed_unsafe_sysctls.clone(),
            policy: config.admission_policy.clone(),
        }),
        objects: handles.objects,
        gc: handles.gc.handle.clone(),
        cgroups,
        shim_grouping: config.shim_grouping,
    };
    let collector = Collector::new(
        containerd.clone(),
        gc::Settings {
            policy: config.gc,
            pod_log_dir: config.pod_log_dir.clone(),
            images_dir: config
                .images_dir
                .clone()
                .map(|dir| (dir, config.state_dir.join("images-imported.json"))),
            image_record: Some(config.state_dir.join("image-gc.json")),
        },
        handles.gc.desired.clone(),
        handles.statuses.clone(),
        handles.gc.metrics,
        handles.gc.handle,
    );
    let collector = tokio::spawn(collector.run());
    let storage = eviction::storage::Monitor {
        containerd: containerd.clone(),
        pods_dir: config.state_dir.join("pods"),
        pod_log_dir: config.pod_log_dir.clone(),
        desired: handles.gc.desired,
        evictions: handles.gc.evictions,
        metrics: handles.eviction.metrics.clone(),
    };
    let storage = tokio::spawn(storage.run());
    let runtime = Arc::new(Runtime::new(
        containerd,
        cni,
        settings,
        handles.statuses,
        handles.events,
        handles.metrics,
        handles.ebpf,
    )?);
    let eviction = tokio::spawn(
        eviction::run(eviction_options(
            &config,
            handles.eviction,
            statuses,
            containerd_for_eviction,
        ))
        .instrument(info_span!("eviction")),
    );
    worker::run(runtime, batches, handles.changes, handles.evictions, handles.stop_pods).await;
    eviction.abort();
    if let Some(images) = images {
        images.abort();
    }
    collector.abort();
    storage.abort();
    Ok(())
}
