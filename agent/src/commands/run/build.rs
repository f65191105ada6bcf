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
use tracing::{info, warn};

use super::containerd::{self, Placement};
use super::node::{self, EvictionDeps, GcDeps};
use super::sources::{self, Cluster, Sources};
use super::task::Task;
use super::{Error, pods, print_deltas};
use crate::api::{self, runtime::RuntimeSlot};
use crate::apiserver::{self, Recorder};
use crate::audit::ManifestAudit;
use crate::checkpoint::Checkpoints;
use crate::config::{Config, Settings};
use crate::logging::LogLevel;
use crate::objects::{Changes, Objects};
use crate::podconfig::{self, Batch, SnapshotHandle};
use crate::runtime::cgroups::{Hierarchy, PodCgroups};
use crate::source::{Refresh, push};
use crate::status::{RuntimeReady, StatusStore};
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
    if !dry_run && config.container_logger == crate::config::ContainerLogger::Container {
        // The Rust runc shim cannot start a binary:// logger: refuse before any pod hangs.
        crate::runtime::shim::refuse_binary_logging(&config.containerd_socket).await?;
    }
    let mut registry = Registry::default();
    let outpost = registry.sub_registry_with_prefix("outpost");
    let audit = ManifestAudit::default();
    audit.set_policy(config.admission_policy.clone());
    let shared = Shared::new(&config, dry_run, &audit, outpost);
    let deps = sources::Deps {
        checkpoints: shared.checkpoints.clone(),
        events: shared.events.clone(),
        audit: audit.clone(),
    };
    let (mut sources, sighup) = sources::build(&config, deps, outpost)?;
    let (mut cluster, objects, changes) =
        sources::cluster(&config, &shared.checkpoints, &mut sources).await?;
    let certificates = cluster.as_mut().and_then(|cluster| cluster.certificates.take());
    let certificate_status = certificates.as_ref().map(|manager| manager.status());
    let Sources { streams, refresh, push, watcher } = sources;
    let (batches_tx, batches) = mpsc::channel::<Batch>(64);
    let merge_metrics = podconfig::metrics::Merge::register(outpost);
    let merge = podconfig::run(streams, batches_tx, shared.snapshot.clone(), merge_metrics);
    let mut tasks = vec![sighup, Task::infallible("merge", merge).main()];
    let mut certificate_status: Vec<(&'static str, crate::certificates::Status)> =
        certificate_status.into_iter().map(|status| ("client", status)).collect();
    if let Some(manager) = certificates {
        tasks.push(Task::infallible("certificates", manager.run()));
    }
    let serving = match &cluster {
        Some(cluster) if config.certificates.server_tls_bootstrap => {
            let addresses = config.node_ip.iter().map(ToString::to_string).collect();
            let manager = crate::certificates::serving::ServingManager::new(
                &config.state_dir,
                cluster.client.clone(),
                &config.node_name,
                addresses,
            );
            certificate_status.push(("server", manager.status()));
            let resolver: Arc<dyn rustls::server::ResolvesServerCert> = manager.certificate();
            tasks.push(Task::infallible("serving_certificate", manager.run()));
            Some(resolver)
        }
        _ => None,
    };
    // Registered in a dry run too: a scrape's families do not depend on the mode.
    let pod_metrics = PodMetrics {
        workers: crate::worker::metrics::Metrics::register(outpost),
        images: crate::runtime::image::metrics::ImageImports::register(outpost),
        gc: crate::gc::metrics::GarbageCollection::register(outpost),
        evictions: crate::eviction::metrics::Evictions::register(outpost),
    };
    // `/metrics/probes`' own registry: the same probe counters, kubelet's name.
    let mut probes = Registry::default();
    pod_metrics.workers.register_probes(&mut probes);
    // The Node as the node task keeps it, and as admission sees it (K4).
    let node_config = shared
        .runtime
        .as_ref()
        .map(|(ready, _)| node_config(&config, &shared, ready.clone(), certificate_status.clone()));
    let admission_node = node_config.as_ref().map(|c| c.admission.subscribe());
    let containerd_runs = matches!(pod_runtime, PodRuntimeChoice::Containerd);
    let placement = (!dry_run && containerd_runs).then(|| Placement::choose(&config));
    let containerd = match (&placement, pod_runtime) {
        (Some(placement), PodRuntimeChoice::Containerd) => {
            let (containerd, pod_tasks) = pod_side(
                &config,
                placement.clone(),
                &shared,
                (batches, objects, changes),
                pod_metrics,
                admission_node,
            )?;
            tasks.extend(pod_tasks);
            tasks.push(Task::infallible(
                "heap_trim",
                crate::heap_trim::run(shared.statuses.clone()),
            ));
            Some(containerd)
        }
        #[cfg(feature = "hollow")]
        (_, PodRuntimeChoice::Hollow(hollow)) => {
            let pod_side = (batches, objects, changes);
            tasks.push(hollow_side(&config, hollow, &shared, pod_side, pod_metrics));
            None
        }
        // A dry run: nothing runs.
        _ => {
            tasks.push(Task::new("print_deltas", print_deltas(batches)).main());
            None
        }
    };
    let apiserver = cluster.as_ref().map(|cluster| cluster.client.clone());
    let (sync, sync_health) = match cluster {
        Some(cluster) => synced(&config, cluster, &shared, node_config, &mut tasks),
        None => (None, None),
    };
    let local = LocalApi {
        push,
        refresh,
        watcher,
        runtime: placement.map(|placement| placement.info(&config)),
        sync: sync_health,
        audit,
        log_level,
        apiserver,
        probes,
        certificates: certificate_status,
        serving,
    };
    tasks.push(local_api(&config, &shared, registry, local).await?);
    if let Some(healthz) = api::healthz_port(config.healthz).await {
        tasks.push(Task::infallible("healthz_port", healthz));
    }
    let node_shutdown = (!dry_run && !config.shutdown_groups.is_empty()).then(|| {
        let total = outpost_core::node_shutdown::total(&config.shutdown_groups);
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
            checkpoints: Checkpoints::new(&config.state_dir).with_metrics(checkpoint_metrics),
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

/// What the local API serves besides the shared handles.
struct LocalApi {
    push: Option<push::PushHandle>,
    refresh: Option<Refresh>,
    /// How the manifest directory is watched.
    watcher: String,
    /// Where containerd is; `None` in a dry run.
    runtime: Option<api::status::RuntimeInfo>,
    /// The API server's health, with a kubeconfig.
    sync: Option<apiserver::Health>,
    audit: ManifestAudit,
    log_level: LogLevel,
    /// The API server's client, for the node API's reviews (N1).
    apiserver: Option<apiserver::ApiClient>,
    /// `/metrics/probes`' registry.
    probes: Registry,
    /// J2: the managed certificates' status (`client`, `server`).
    certificates: Vec<(&'static str, crate::certificates::Status)>,
    /// J2: the serving certificate from the cluster, with `serverTLSBootstrap`.
    serving: Option<Arc<dyn rustls::server::ResolvesServerCert>>,
}

/// The `local_api` task: its address bound now (a taken port stops the agent at once),
/// serving every metric registered on `registry` and the scrape-time collectors.
async fn local_api(
    config: &Config,
    shared: &Shared,
    mut registry: Registry,
    local: LocalApi,
) -> Result<Task, Error> {
    crate::metrics::register(
        &mut registry,
        shared.snapshot.clone(),
        crate::metrics::Sources {
            sync: local.sync.clone(),
            events: shared.events.clone(),
            statuses: shared.statuses.clone(),
            ebpf: shared.ebpf.clone(),
            cgroups: shared.cgroups.clone(),
            certificates: local.certificates.clone(),
        },
    );
    let server = api::bind(api::Options {
        listen: config.listen,
        auth: config.auth.clone(),
        snapshot: shared.snapshot.clone(),
        push: local.push,
        refresh: local.refresh,
        statuses: shared.statuses.clone(),
        runtime: shared.runtime.as_ref().map(|(ready, _)| ready.clone()),
        metrics: registry,
        events: shared.events.clone(),
        ebpf: shared.ebpf.clone(),
        pod_log_dir: config.pod_log_dir.clone(),
        log_level: local.log_level,
        info: api::status::Info {
            node_name: config.node_name.clone(),
            started: k8s_openapi::jiff::Timestamp::now(),
            watcher: local.watcher,
            runtime: local.runtime,
            sync: local.sync,
            certificates: local
                .certificates
                .into_iter()
                .map(|(name, status)| (name.to_owned(), status))
                .collect(),
        },
        audit: local.audit,
        runtime_slot: shared.runtime.as_ref().map(|(_, slot)| slot.clone()),
        apiserver: local.apiserver,
        stats: api::stats::Endpoints {
            stats: crate::stats::Stats::new(crate::stats::Sources {
                node_name: config.node_name.clone(),
                snapshot: shared.snapshot.clone(),
                statuses: shared.statuses.clone(),
                cgroups: shared.cgroups.clone(),
                state_dir: config.state_dir.clone(),
                pod_log_dir: config.pod_log_dir.clone(),
            }),
            probes: Arc::new(local.probes),
            configz: Arc::new(crate::config::configz::configz(config)),
        },
        serving: local.serving,
    })
    .await?;
    Ok(Task::new("local_api", async move { Ok(server.await?) }))
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
        runtime_slot,
        stop_pods: shared.stop_pods.clone(),
    };
    let (connection, containerd) = containerd::build(config, placement, deps);
    let gc = crate::gc::Handle::default();
    // The eviction manager's and the storage monitor's choices reach the pod workers
    // through this channel (E2, G1).
    let (evict, evictions) = mpsc::unbounded_channel();
    let (images, images_dir) = node::images_dir(config, connection.clone(), &gc, metrics.images);
    let exe = std::env::current_exe().map_err(Error::Exe)?;
    let logger = pods::container_logger(&exe);
    let node_logger = crate::runtime::node_logger::NodeLogger::new(&logger, &config.run_dir);
    let supervisor = pods::node_logger(config, node_logger.clone(), connection.clone());
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
    };
    let mut tasks = vec![pods::build(config, workers, metrics.workers)?, supervisor];
    let eviction = EvictionDeps {
        snapshot: shared.snapshot.clone(),
        statuses: shared.statuses.clone(),
        evict: evict.clone(),
        pressure: shared.pressure.clone(),
        metrics: metrics.evictions.clone(),
        gc: gc.clone(),
    };
    tasks.push(node::eviction_manager(config, connection.clone(), eviction));
    let collector = GcDeps {
        handle: gc,
        desired: shared.snapshot.clone(),
        statuses: shared.statuses.clone(),
        evictions: evict,
        eviction_metrics: metrics.evictions,
    };
    tasks.extend(node::garbage_collector(config, connection, collector, metrics.gc));
    tasks.extend(images_dir);
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
    let settings = outpost_core::pod_worker::Settings {
        crash_loop: outpost_core::lifecycle::CrashLoopConfig::default(),
        host_ip: config.node_ip,
        seed: fastrand::u64(..),
        facts: Arc::new(outpost_core::admission::NodeFacts {
            apparmor_enabled: false,
            allowed_unsafe_sysctls: config.allowed_unsafe_sysctls.clone(),
            policy: config.admission_policy.clone(),
            cluster_dns: !config.dns.cluster_dns.is_empty(),
        }),
    };
    let stop_pods = shared.stop_pods.clone();
    let (statuses, events, ebpf) =
        (shared.statuses.clone(), shared.events.clone(), shared.ebpf.clone());
    // No eviction manager: nothing feeds this channel.
    let (_evict, evictions) = mpsc::unbounded_channel();
    let task = async move {
        let prober = crate::worker::probe::Prober::new()?;
        let workers = crate::worker::Shared::with_runtime(
            hollow,
            settings,
            statuses,
            events,
            metrics.workers,
            ebpf,
            prober,
        )
        .with_objects(objects);
        crate::worker::run(Arc::new(workers), batches, changes, evictions, stop_pods).await;
        Ok(())
    };
    Task::new("pod_workers", task).main()
}

/// The sync to the API server (its `sync` task joins `tasks`) when the agent runs pods,
/// and the API server's health, which `/status` and the metrics show either way.
fn synced(
    config: &Config,
    cluster: Cluster,
    shared: &Shared,
    node_config: Option<sync::node::Config>,
    tasks: &mut Vec<Task>,
) -> (Option<sync::Handle>, Option<apiserver::Health>) {
    let status_backlog = watch::Sender::<apiserver::StatusBacklog>::default();
    let health = apiserver::Health {
        connectivity: cluster.client.connectivity().clone(),
        status_backlog: status_backlog.subscribe(),
    };
    // Status goes to the API server only when the agent runs pods (not in a dry run).
    let Some(node_config) = node_config else { return (None, Some(health)) };
    let context = sync::Context {
        client: cluster.client,
        node_name: config.node_name.clone(),
        snapshot: shared.snapshot.clone(),
        statuses: shared.statuses.clone(),
        mirrors: cluster.mirrors,
        node: watch::Sender::new(None),
        events: shared.events.clone(),
        node_config,
        status_backlog,
        lease_duration_seconds: config.node_lease_duration_seconds,
    };
    let (handle, task) = sync::build(context);
    tasks.push(Task::infallible("sync", task));
    (Some(handle), Some(health))
}

/// What the Node is registered with and reports; admission's view of it (K4) starts as
/// the Node this agent would register, its allocatable read now.
fn node_config(
    config: &Config,
    shared: &Shared,
    runtime: RuntimeReady,
    certificates: Vec<(&'static str, crate::certificates::Status)>,
) -> sync::node::Config {
    let node = sync::node::Config {
        labels: config.node_labels.clone(),
        taints: config.register_with_taints.clone(),
        node_ip: config.node_ip,
        kubelet_port: Some(config.listen.port()).filter(|port| *port != 0),
        state_dir: config.state_dir.clone(),
        runtime,
        runtime_version: shared.runtime_version.clone(),
        shutdown: shared.stop_pods.clone(),
        shutdown_reported: watch::Sender::new(false),
        pressure: shared.pressure.subscribe(),
        reservation: config.node_resources.reservation,
        max_pods: config.max_pods,
        admission: watch::Sender::new(outpost_core::node_admission::Node::default()),
        certificates,
    };
    node.admission.send_replace(sync::node::initial_admission_node(&node, &config.node_name));
    node
}

/// The settings resolved into the config, the node's address looked up, the cgroup
/// driver checked against the init system, the directories checked.
fn resolve(settings: Settings, dry_run: bool) -> Result<Config, Error> {
    let mut config = Config::resolve(settings)?;
    // The node's address: given, or the default route's interface's, looked up once.
    config.node_ip = config.node_ip.or_else(host::address::default_address);
    info!(node = %config.node_name, manifests = %config.manifest_dir.display(), dry_run, "starting");
    if !dry_run {
        let pid1 = std::fs::read_to_string("/proc/1/comm").unwrap_or_default();
        config.node_resources.check_driver(&pid1).map_err(crate::config::Error::from)?;
    }
    secure_dirs(&config)?;
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

/// The security defaults (see [`permissions`]), before any source reads a manifest.
fn secure_dirs(config: &Config) -> Result<(), permissions::Error> {
    if config.allow_writable_manifest_dir {
        warn!(
            "--allow-writable-manifest-dir: not checking who may write the manifest and images directories"
        );
    } else {
        permissions::check_trusted_dir("the manifest directory", &config.manifest_dir)?;
        if let Some(dir) = &config.images_dir {
            permissions::check_trusted_dir("the images directory", dir)?;
        }
    }
    permissions::secure_state_dir(&config.state_dir)
}
