//! The composition root of `outpost run`: the config resolved and the directories
//! checked, then every component built from it and from the handles of those built
//! before it, each registering its metrics on the one registry. What comes out is one
//! list of named tasks, in the order they are stopped; nothing runs yet ([`super::run`]
//! spawns and supervises them).

use std::sync::{Arc, OnceLock};

use outpost_core::eviction::Pressure;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::Error;
use super::cluster::{self, Cluster};
use crate::api::{self, runtime::RuntimeSlot};
use crate::apiserver::Recorder;
use crate::audit::ManifestAudit;
use crate::checkpoint::Checkpoints;
use crate::config::{Config, Settings};
use crate::containerd::{self, Placement};
use crate::logging::LogLevel;
use crate::objects::{Changes, Objects};
use crate::podconfig::{self, Batch, SnapshotHandle};
use crate::runtime::cgroups::{Hierarchy, PodCgroups};
use crate::source::local::{self, Sources};
use crate::status::{RuntimeReady, StatusStore};
use crate::task::Task;
use crate::worker::images_dir;
use crate::worker::start as pods;
use crate::{host, permissions, sync};

/// The agent, built.
pub(super) struct Agent {
    pub(super) config: Config,
    pub(super) dry_run: bool,
    /// Every task, in the order they are stopped.
    pub(super) tasks: Vec<Task>,
    pub(super) snapshot: SnapshotHandle,
    /// Whether containerd is connected; `None` in a dry run.
    pub(super) runtime_ready: Option<RuntimeReady>,
    /// The sync's handle (a node shutdown's last statuses), when statuses are synced.
    pub(super) sync: Option<sync::Handle>,
    /// Cancelled on a node shutdown with `--stop-pods-on-shutdown`.
    pub(super) stop_pods: CancellationToken,
    /// logind's shutdowns, with graceful node shutdown on (J3).
    pub(super) node_shutdown: Option<crate::node_shutdown::Shutdowns>,
}

/// What several components share: made once, handed to each that needs it.
struct Shared {
    events: Recorder,
    checkpoints: Checkpoints,
    snapshot: SnapshotHandle,
    statuses: StatusStore,
    ebpf: crate::ebpf::Handle,
    stop_pods: CancellationToken,
    /// Whether containerd is connected, its version, and where the local API finds it;
    /// `None` in a dry run.
    runtime: Option<(RuntimeReady, RuntimeSlot)>,
    runtime_version: Arc<OnceLock<String>>,
    /// The node's pressure conditions, as the eviction manager holds them.
    pressure: watch::Sender<Pressure>,
    /// The pods' cgroups (made once containerd answers); their usage is a metric.
    cgroups: Option<Arc<PodCgroups>>,
}

/// The pod side's metrics.
struct PodMetrics {
    workers: crate::worker::metrics::Metrics,
    images: crate::runtime::image::metrics::ImageImports,
    gc: crate::gc::metrics::GarbageCollection,
    evictions: crate::eviction::metrics::Evictions,
}

/// What the pods run on: containerd (the agent), or a simulated runtime (a hollow node
/// of the fleet harness, B13: no eBPF, cgroups, CNI, eviction manager, garbage
/// collector or images dir, which all need a real runtime; everything else is the
/// agent's).
pub(super) enum PodRuntimeChoice {
    Containerd,
    #[cfg(feature = "hollow")]
    Hollow(Arc<crate::worker::hollow::Hollow>),
}

/// Resolves `settings`, checks the directories, and builds every part of the agent.
pub(super) async fn build(
    settings: Settings,
    dry_run: bool,
    log_level: LogLevel,
    pod_runtime: PodRuntimeChoice,
) -> Result<Agent, Error> {
    let config = resolve(settings, dry_run)?;
    if !dry_run && config.pods.container_logger == crate::config::ContainerLogger::Container {
        // The Rust runc shim cannot start a binary:// logger: refuse before any pod hangs.
        crate::runtime::shim::refuse_binary_logging(&config.containerd.socket).await?;
    }
    let mut registry = Registry::default();
    let outpost = registry.sub_registry_with_prefix("outpost");
    let audit = ManifestAudit::default();
    audit.set_policy(config.pods.admission_policy.clone());
    let shared = Shared::new(&config, dry_run, &audit, outpost);
    let deps = local::Deps {
        checkpoints: shared.checkpoints.clone(),
        events: shared.events.clone(),
        audit: audit.clone(),
    };
    let (mut sources, sighup) = config.sources.clone().build(&config.node.name, deps, outpost)?;
    let (mut cluster, objects, changes) =
        cluster::cluster(&config, &shared.checkpoints, &mut sources).await?;
    let Sources { streams, refresh, push, watcher } = sources;
    let (batches_tx, batches) = mpsc::channel::<Batch>(64);
    let merge_metrics = podconfig::metrics::Merge::register(outpost);
    let merge = podconfig::run(streams, batches_tx, shared.snapshot.clone(), merge_metrics);
    let mut tasks = vec![sighup, Task::infallible("merge", merge).main()];
    let (certificate_status, serving) = certificates(&config, cluster.as_mut(), &mut tasks);
    let (pod_metrics, probes) = PodMetrics::register(outpost);
    // The Node as the node task keeps it, and as admission sees it (K4).
    let node_config = node_config(&config, &shared, &certificate_status);
    let admission_node = node_config.as_ref().map(|c| c.admission.subscribe());
    let pods = (batches, objects, changes);
    let (placement, containerd) = runtime_side(
        &config,
        dry_run,
        pod_runtime,
        &shared,
        pods,
        (pod_metrics, admission_node),
        &mut tasks,
    )?;
    let apiserver = cluster.as_ref().map(|cluster| cluster.client.clone());
    let (sync, sync_health) = synced(&config, cluster, &shared, node_config, &mut tasks);
    let local = api::start::Deps {
        registry,
        probes,
        snapshot: shared.snapshot.clone(),
        statuses: shared.statuses.clone(),
        events: shared.events.clone(),
        ebpf: shared.ebpf.clone(),
        cgroups: shared.cgroups.clone(),
        runtime: shared.runtime.clone(),
        runtime_info: placement.map(|placement| api::status::RuntimeInfo {
            socket: placement.socket(&config.containerd),
            namespace: config.containerd.namespace.clone(),
            managed: placement.is_managed(),
        }),
        push,
        refresh,
        watcher,
        sync: sync_health,
        audit,
        log_level,
        apiserver,
        certificates: certificate_status,
        serving,
        configz: crate::config::configz::configz(&config),
    };
    tasks.push(config.api.clone().build(&config.node, local).await?);
    if let Some(healthz) = api::healthz_port(config.api.healthz).await {
        tasks.push(Task::infallible("healthz_port", healthz));
    }
    let node_shutdown = (!dry_run && !config.shutdown.groups.is_empty()).then(|| {
        let total = outpost_core::node_shutdown::total(&config.shutdown.groups);
        let (task, shutdowns) = crate::node_shutdown::build(total);
        tasks.push(Task::infallible("node_shutdown", task));
        shutdowns
    });
    // containerd last: the managed one stops after everything that uses it.
    tasks.extend(containerd);
    Ok(Agent {
        config,
        dry_run,
        tasks,
        snapshot: shared.snapshot,
        runtime_ready: shared.runtime.map(|(ready, _)| ready),
        sync,
        stop_pods: shared.stop_pods,
        node_shutdown,
    })
}

/// J1, J2: the client certificate's manager and, with `serverTLSBootstrap`, the serving
/// certificate's (their tasks join `tasks`): their status, and the serving certificate.
fn certificates(
    config: &Config,
    cluster: Option<&mut Cluster>,
    tasks: &mut Vec<Task>,
) -> (CertificateStatus, Option<Arc<dyn rustls::server::ResolvesServerCert>>) {
    let Some(cluster) = cluster else { return (Vec::new(), None) };
    let mut status = Vec::new();
    if let Some(manager) = cluster.certificates.take() {
        status.push(("client", manager.status()));
        tasks.push(Task::infallible("certificates", manager.run()));
    }
    if !config.certificates.server_tls_bootstrap {
        return (status, None);
    }
    let addresses = config.node.ip.iter().map(ToString::to_string).collect();
    let manager = crate::certificates::serving::ServingManager::new(
        &config.node.state_dir,
        cluster.client.clone(),
        &config.node.name,
        addresses,
    );
    status.push(("server", manager.status()));
    let resolver: Arc<dyn rustls::server::ResolvesServerCert> = manager.certificate();
    tasks.push(Task::infallible("serving_certificate", manager.run()));
    (status, Some(resolver))
}

/// The managed certificates' status, by name (`client`, `server`).
type CertificateStatus = Vec<(&'static str, crate::certificates::Status)>;

/// The Node as the node task keeps it, and as admission sees it (K4); none in a dry run.
fn node_config(
    config: &Config,
    shared: &Shared,
    certificates: &CertificateStatus,
) -> Option<sync::node::Config> {
    let (ready, _) = shared.runtime.as_ref()?;
    let deps = sync::start::NodeDeps {
        runtime: ready.clone(),
        runtime_version: shared.runtime_version.clone(),
        shutdown: shared.stop_pods.clone(),
        pressure: shared.pressure.subscribe(),
        certificates: certificates.clone(),
    };
    let (port, reservation) = (config.api.listen.port(), config.node_resources.reservation);
    Some(sync::start::node_config(&config.node, port, reservation, deps))
}

/// What runs the pods, by `pod_runtime`: containerd and the pod side (its tasks join
/// `tasks`; containerd's returned apart, to be stopped last), a hollow node's simulated
/// runtime, or, in a dry run, the printer of the merge's deltas.
fn runtime_side(
    config: &Config,
    dry_run: bool,
    pod_runtime: PodRuntimeChoice,
    shared: &Shared,
    pods: (mpsc::Receiver<Batch>, Objects, Changes),
    (metrics, admission_node): (PodMetrics, Option<watch::Receiver<NodeForAdmission>>),
    tasks: &mut Vec<Task>,
) -> Result<(Option<Placement>, Option<Task>), Error> {
    let containerd_runs = matches!(pod_runtime, PodRuntimeChoice::Containerd);
    let placement =
        (!dry_run && containerd_runs).then(|| Placement::choose(&config.containerd, &config.node));
    let containerd = match (&placement, pod_runtime) {
        (Some(placement), PodRuntimeChoice::Containerd) => {
            let (containerd, pod_tasks) =
                pod_side(config, placement.clone(), shared, pods, metrics, admission_node)?;
            tasks.extend(pod_tasks);
            tasks.push(Task::infallible(
                "heap_trim",
                crate::heap_trim::run(shared.statuses.clone()),
            ));
            Some(containerd)
        }
        #[cfg(feature = "hollow")]
        (_, PodRuntimeChoice::Hollow(hollow)) => {
            tasks.push(hollow_side(config, hollow, shared, pods, metrics));
            None
        }
        // A dry run: nothing runs.
        _ => {
            tasks.push(podconfig::dry_run::printer(pods.0));
            None
        }
    };
    Ok((placement, containerd))
}

/// The node as admission sees it (K4).
type NodeForAdmission = outpost_core::node_admission::Node;

/// The sync to the API server (its task joins `tasks`) when the agent runs pods, and the
/// API server's health, with a kubeconfig.
fn synced(
    config: &Config,
    cluster: Option<Cluster>,
    shared: &Shared,
    node_config: Option<sync::node::Config>,
    tasks: &mut Vec<Task>,
) -> (Option<sync::Handle>, Option<crate::apiserver::Health>) {
    let Some(Cluster { client, mirrors, .. }) = cluster else { return (None, None) };
    let deps = sync::start::Deps {
        client,
        mirrors,
        snapshot: shared.snapshot.clone(),
        statuses: shared.statuses.clone(),
        events: shared.events.clone(),
    };
    let (sync, health) = sync::start::build(&config.node, node_config, deps);
    let sync = sync.map(|(handle, task)| {
        tasks.push(task);
        handle
    });
    (sync, Some(health))
}

impl PodMetrics {
    /// The pod side's families, registered in a dry run too (a scrape's families do not
    /// depend on the mode), and `/metrics/probes`' own registry: the same probe counters,
    /// kubelet's name.
    fn register(outpost: &mut Registry) -> (PodMetrics, Registry) {
        let metrics = PodMetrics {
            workers: crate::worker::metrics::Metrics::register(outpost),
            images: crate::runtime::image::metrics::ImageImports::register(outpost),
            gc: crate::gc::metrics::GarbageCollection::register(outpost),
            evictions: crate::eviction::metrics::Evictions::register(outpost),
        };
        let mut probes = Registry::default();
        metrics.workers.register_probes(&mut probes);
        (metrics, probes)
    }
}

impl Shared {
    fn new(
        config: &Config,
        dry_run: bool,
        audit: &ManifestAudit,
        registry: &mut Registry,
    ) -> Shared {
        let checkpoint_metrics = crate::checkpoint::metrics::CheckpointWrites::register(registry);
        Shared {
            events: Recorder::default(),
            checkpoints: Checkpoints::new(&config.node.state_dir).with_metrics(checkpoint_metrics),
            snapshot: SnapshotHandle::default(),
            statuses: StatusStore::default(),
            ebpf: kernel(config, dry_run, audit),
            stop_pods: CancellationToken::new(),
            runtime: (!dry_run).then(Default::default),
            runtime_version: Arc::default(),
            pressure: watch::Sender::new(Pressure::default()),
            cgroups: (!dry_run).then(|| Arc::new(pod_cgroups(config))),
        }
    }
}

/// The runtime's side: containerd (its task returned apart, to be stopped last), the pod
/// workers, the eviction manager, the garbage collector, the storage monitor and the
/// images dir.
fn pod_side(
    config: &Config,
    placement: Placement,
    shared: &Shared,
    (batches, objects, changes): (mpsc::Receiver<Batch>, Objects, Changes),
    metrics: PodMetrics,
    admission_node: Option<watch::Receiver<outpost_core::node_admission::Node>>,
) -> Result<(Task, Vec<Task>), Error> {
    let (ready, runtime_slot) = shared.runtime.clone().unwrap_or_default();
    let deps = containerd::Deps {
        ready,
        version: shared.runtime_version.clone(),
        connected: runtime_slot.on_connected(config.node.run_dir.clone()),
        stop_pods: shared.stop_pods.clone(),
    };
    let (connection, containerd) = config.containerd.clone().build(&placement, deps);
    let gc = crate::gc::Handle::default();
    // The eviction manager's and the storage monitor's choices reach the pod workers
    // through this channel (E2, G1).
    let (evict, evictions) = mpsc::unbounded_channel();
    let images_dir = config.pods.images_dir.clone();
    let (images, images_task) = images_dir::images_dir(
        images_dir.clone(),
        &config.node,
        connection.clone(),
        &gc,
        metrics.images,
    );
    let exe = std::env::current_exe().map_err(Error::Exe)?;
    let (node_logger, supervisor) =
        pods::node_logger(&config.pods, &exe, &config.node.run_dir, connection.clone());
    let workers = pods::Deps {
        exe,
        node_logger,
        batches,
        connection: connection.clone(),
        images,
        statuses: shared.statuses.clone(),
        events: shared.events.clone(),
        ebpf: shared.ebpf.clone(),
        objects,
        changes,
        evictions,
        gc: gc.clone(),
        cgroups: shared.cgroups.clone().unwrap_or_else(|| Arc::new(pod_cgroups(config))),
        stop_pods: shared.stop_pods.clone(),
        node: admission_node,
        resources: config.node_resources.clone(),
        shim_grouping: config.containerd.shim_grouping,
        shutdown_groups: config.shutdown.groups.clone(),
    };
    let mut tasks =
        vec![config.pods.clone().build(&config.node, workers, metrics.workers)?, supervisor];
    let eviction = crate::eviction::start::Deps {
        snapshot: shared.snapshot.clone(),
        statuses: shared.statuses.clone(),
        evict: evict.clone(),
        pressure: shared.pressure.clone(),
        metrics: metrics.evictions.clone(),
        gc: gc.clone(),
    };
    let layout = config.node_resources.layout.clone();
    let eviction_config = config.eviction.clone();
    tasks.push(crate::eviction::start::build(
        eviction_config,
        &config.node,
        layout,
        connection.clone(),
        eviction,
    ));
    let collector = crate::gc::start::Deps {
        handle: gc,
        desired: shared.snapshot.clone(),
        statuses: shared.statuses.clone(),
        metrics: metrics.gc,
    };
    let gc_config = config.gc;
    let images = images_dir;
    let node = &config.node;
    tasks.push(crate::gc::start::build(gc_config, node, images, connection.clone(), collector));
    let storage = crate::eviction::start::StorageDeps {
        desired: shared.snapshot.clone(),
        evictions: evict,
        metrics: metrics.evictions,
    };
    tasks.push(crate::eviction::start::storage_monitor(node, connection, storage));
    tasks.extend(images_task);
    Ok((containerd, tasks))
}

/// A hollow node's pod side (B13): the pod workers over the simulated runtime, the
/// runtime "connected" at once.
#[cfg(feature = "hollow")]
fn hollow_side(
    config: &Config,
    hollow: Arc<crate::worker::hollow::Hollow>,
    shared: &Shared,
    (batches, objects, changes): (mpsc::Receiver<Batch>, Objects, Changes),
    metrics: PodMetrics,
) -> Task {
    if let Some((ready, _)) = &shared.runtime {
        ready.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let _ = shared.runtime_version.set(crate::worker::hollow::VERSION.to_owned());
    let deps = crate::worker::hollow::Deps {
        batches,
        objects,
        changes,
        statuses: shared.statuses.clone(),
        events: shared.events.clone(),
        ebpf: shared.ebpf.clone(),
        stop_pods: shared.stop_pods.clone(),
    };
    crate::worker::hollow::pod_workers(
        hollow,
        config.node.ip,
        config.pods.facts(false),
        deps,
        metrics.workers,
    )
}

/// The settings resolved into the config, the node's address looked up, the cgroup
/// driver checked against the init system, the directories checked.
fn resolve(settings: Settings, dry_run: bool) -> Result<Config, Error> {
    let mut config = Config::resolve(settings)?;
    // The node's address: given, or the default route's interface's, looked up once.
    config.node.ip = config.node.ip.or_else(host::address::default_address);
    let manifests = config.sources.manifest_dir.display();
    info!(node = %config.node.name, %manifests, dry_run, "starting");
    if !dry_run {
        let pid1 =
            host::Host::proc_pid_text(&host::Kernel, host::Pid::INIT, "comm").unwrap_or_default();
        config.node_resources.check_driver(&pid1).map_err(crate::config::Error::from)?;
    }
    let images_dir = config.pods.images_dir.as_deref();
    let manifest_dir = &config.sources.manifest_dir;
    let trusted =
        (!config.allow_writable_manifest_dir).then_some((manifest_dir.as_path(), images_dir));
    permissions::secure_dirs(trusted, &config.node.state_dir)?;
    Ok(config)
}

/// The kernel's side (eBPF): loaded before anything reads it; a dry run runs no pods.
/// The manifest audit records execs from its history once loaded.
fn kernel(config: &Config, dry_run: bool, audit: &ManifestAudit) -> crate::ebpf::Handle {
    if dry_run {
        return crate::ebpf::Handle::default();
    }
    let ebpf = crate::ebpf::Handle::start(config.ebpf, &config.node_resources.layout);
    if ebpf.is_loaded() {
        audit.set_exec_history(Some(Arc::new(ebpf.clone())));
    }
    ebpf
}

/// The pods' cgroups under the configured layout, in this host's hierarchy.
fn pod_cgroups(config: &Config) -> PodCgroups {
    let resources = &config.node_resources;
    PodCgroups::new(resources.layout.clone(), Hierarchy::detect(), resources.pod_pids_limit)
}
