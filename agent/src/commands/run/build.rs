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
use crate::checkpoint::seal::StateKey;
use crate::config::{Config, Settings};
use crate::debug_containers::DebugContainers;
use crate::logging::LogLevel;
use crate::objects::{Changes, Objects};
use crate::podconfig::{self, Batch, SnapshotHandle};
use crate::runtime::cgroups::PodCgroups;
use crate::source::local::{self, Sources};
use crate::status::{RuntimeReady, StatusStore};
use crate::task::Task;
use crate::{host, permissions, pod_side, sync};

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
    /// The host's kernel, as every component reads it: the one made here.
    host: Arc<dyn host::Host>,
    /// D1, D2: the device manager; `None` in a dry run.
    devices: Option<crate::devices::Manager>,
    /// X4: the ephemeral containers `outpost debug` adds to static pods.
    debug: DebugContainers,
}

/// Resolves `settings`, checks the directories, and builds every part of the agent.
pub(super) async fn build(
    settings: Settings,
    dry_run: bool,
    log_level: LogLevel,
    pod_runtime: pod_side::Runtime,
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
    let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").map(std::path::PathBuf::from);
    let state_key = super::state_key::load(&config, credentials)?;
    let mut shared = Shared::new(&config, dry_run, &audit, outpost, state_key);
    let mut tasks = Vec::new();
    if !dry_run {
        let (snapshot, statuses) = (shared.snapshot.clone(), shared.statuses.clone());
        let pods = |devices| -> Arc<dyn crate::devices::podresources::Source> {
            Arc::new(super::pod_resources::NodePods { snapshot, statuses, devices })
        };
        let (devices, device_tasks) =
            crate::devices::start(&config.pods.root_dir, &*shared.host, pods)?;
        shared.devices = Some(devices);
        tasks.extend(device_tasks);
    }
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
    tasks.extend([sighup, Task::infallible("merge", merge).main()]);
    let certificates = cluster.as_mut().map(|cluster| {
        let serving = config.certificates.server_tls_bootstrap;
        let serving = serving.then(|| (&config.node, cluster.client.clone()));
        crate::certificates::start(cluster.certificates.take(), serving)
    });
    let (certificate_status, serving, certificate_tasks) = certificates.unwrap_or_default();
    tasks.extend(certificate_tasks);
    let (pod_metrics, probes) = pod_side::Metrics::register(outpost);
    // The Node as the node task keeps it, and as admission sees it (K4).
    let node_config = node_config(&config, &shared, &certificate_status);
    let admission_node = node_config.as_ref().map(|c| c.admission.subscribe());
    // What runs the pods; in a dry run, the printer of the merge's deltas.
    let (placement, containerd) = if dry_run {
        tasks.push(podconfig::dry_run::printer(batches));
        (None, None)
    } else {
        let deps = shared.pod_side(&config, (batches, objects, changes), admission_node);
        let started = pod_side::start(&config, pod_runtime, deps, pod_metrics)?;
        tasks.extend(started.tasks);
        (started.placement, started.containerd)
    };
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
        host: shared.host.clone(),
        runtime: shared.runtime.clone(),
        runtime_info: placement.map(|p| api::status::RuntimeInfo::of(&p, &config.containerd)),
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
        debug: shared.debug.clone(),
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

/// The Node as the node task keeps it, and as admission sees it (K4); none in a dry run.
fn node_config(
    config: &Config,
    shared: &Shared,
    certificates: &crate::certificates::Statuses,
) -> Option<sync::node::Config> {
    let (ready, _) = shared.runtime.as_ref()?;
    let deps = sync::start::NodeDeps {
        runtime: ready.clone(),
        runtime_version: shared.runtime_version.clone(),
        shutdown: shared.stop_pods.clone(),
        pressure: shared.pressure.subscribe(),
        certificates: certificates.clone(),
        host: shared.host.clone(),
        devices: shared
            .devices
            .as_ref()
            .map_or_else(|| watch::channel(Default::default()).1, |d| d.capacity()),
    };
    let (port, reservation) = (config.api.listen.port(), config.node_resources.reservation);
    Some(sync::start::node_config(&config.node, port, reservation, deps))
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

impl Shared {
    fn new(
        config: &Config,
        dry_run: bool,
        audit: &ManifestAudit,
        registry: &mut Registry,
        state_key: Option<Arc<StateKey>>,
    ) -> Shared {
        let checkpoint_metrics = crate::checkpoint::metrics::CheckpointWrites::register(registry);
        Shared {
            events: Recorder::default(),
            checkpoints: Checkpoints::new(&config.node.state_dir)
                .with_metrics(checkpoint_metrics)
                .with_key(state_key),
            snapshot: SnapshotHandle::default(),
            statuses: StatusStore::default(),
            ebpf: kernel(config, dry_run, audit),
            stop_pods: CancellationToken::new(),
            runtime: (!dry_run).then(Default::default),
            runtime_version: Arc::default(),
            pressure: watch::Sender::new(Pressure::default()),
            cgroups: (!dry_run).then(|| Arc::new(pod_side::pod_cgroups(config))),
            host: Arc::new(host::Kernel),
            devices: None,
            debug: DebugContainers::new(config.node.state_dir.join("pods")),
        }
    }

    /// What the pod side takes of what is shared, with the merge's batches and the
    /// objects' service.
    fn pod_side(
        &self,
        config: &Config,
        (batches, objects, changes): (mpsc::Receiver<Batch>, Objects, Changes),
        admission: Option<watch::Receiver<NodeForAdmission>>,
    ) -> pod_side::Deps {
        let cgroups = self.cgroups.clone();
        let (ready, slot) = self.runtime.clone().unwrap_or_default();
        pod_side::Deps {
            batches,
            objects,
            changes,
            snapshot: self.snapshot.clone(),
            statuses: self.statuses.clone(),
            events: self.events.clone(),
            ebpf: self.ebpf.clone(),
            ready,
            runtime_version: self.runtime_version.clone(),
            connected: slot.on_connected(config.node.run_dir.clone()),
            stop_pods: self.stop_pods.clone(),
            pressure: self.pressure.clone(),
            cgroups: cgroups.unwrap_or_else(|| Arc::new(pod_side::pod_cgroups(config))),
            admission,
            host: self.host.clone(),
            devices: self.devices.clone(),
            debug: self.debug.clone(),
        }
    }
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
        check_swap(&config)?;
    }
    let images_dir = config.pods.images_dir.as_deref();
    let manifest_dir = &config.sources.manifest_dir;
    let trusted =
        (!config.allow_writable_manifest_dir).then_some((manifest_dir.as_path(), images_dir));
    permissions::secure_dirs(trusted, &config.node.state_dir)?;
    Ok(config)
}

/// D6: kubelet's swap checks at start (`LimitedSwap` needs cgroup v2; swap on needs
/// `failSwapOn: false`), before anything runs; a node whose swap is allowed says so.
fn check_swap(config: &Config) -> Result<(), Error> {
    let cgroup_v2 = crate::runtime::cgroups::Hierarchy::detect().is_v2();
    let swap = &config.swap;
    if swap.check(&host::Kernel, cgroup_v2).map_err(crate::config::Error::from)? {
        info!(
            swap_behavior = swap.behavior.as_str(),
            "swap is on and failSwapOn is false: containers swap as memorySwap.swapBehavior says"
        );
    }
    Ok(())
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
