//! The pod side of `outpost run`, built as one component: containerd (its connection and,
//! when the agent manages it, its task), the pod workers with their node logger, and what
//! reclaims for the pods on the same connection: the eviction manager and the storage
//! monitor (E2), the garbage collector (G1), the images directory's imports. A hollow
//! node of the fleet harness (B13) has the pod workers alone, over a simulated runtime.
//! The composition root hands it the merge's batches, the objects' service and the
//! handles shared with the rest of the agent ([`Deps`]).

use std::sync::Arc;

use outpost_core::eviction::Pressure;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::apiserver::Recorder;
use crate::config::Config;
use crate::containerd::{self, Placement};
use crate::objects::{Changes, Objects};
use crate::podconfig::{Batch, SnapshotHandle};
use crate::runtime::cgroups::{Hierarchy, PodCgroups};
use crate::status::{RuntimeReady, StatusStore};
use crate::task::Task;
use crate::worker::images_dir;
use crate::worker::start as pods;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot find this executable (pod-init runs it, and the container logger where outpost-container-log is not installed)"
    )]
    Exe(#[source] std::io::Error),
    #[error(transparent)]
    Workers(#[from] pods::Error),
    #[error(transparent)]
    SharedStateDir(Box<crate::runtime::volumes::Error>),
}

/// The pod side's metrics, registered in a dry run too (a scrape's families do not
/// depend on the mode).
pub struct Metrics {
    workers: crate::worker::metrics::Metrics,
    images: crate::runtime::image::metrics::ImageImports,
    gc: crate::gc::metrics::GarbageCollection,
    evictions: crate::eviction::metrics::Evictions,
}

impl Metrics {
    /// The families under `outpost`, and `/metrics/probes`' own registry: the same probe
    /// counters, kubelet's name.
    pub fn register(outpost: &mut Registry) -> (Metrics, Registry) {
        let metrics = Metrics {
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

/// What the pod side takes from the rest of the agent.
pub struct Deps {
    /// The merge's batches of pod changes.
    pub batches: mpsc::Receiver<Batch>,
    /// The API objects API pods refer to, and their changes.
    pub objects: Objects,
    pub changes: Changes,
    pub snapshot: SnapshotHandle,
    pub statuses: StatusStore,
    pub events: Recorder,
    pub ebpf: crate::ebpf::Handle,
    /// Whether containerd is connected; its version once it is.
    pub ready: RuntimeReady,
    pub runtime_version: Arc<std::sync::OnceLock<String>>,
    /// Told once containerd answers (the local API finds it so).
    pub connected: Box<dyn FnOnce(&crate::runtime::Containerd) + Send>,
    /// Cancelled on a node shutdown with `--stop-pods-on-shutdown`.
    pub stop_pods: CancellationToken,
    /// The node's pressure conditions, as the eviction manager sets them.
    pub pressure: watch::Sender<Pressure>,
    pub cgroups: Arc<PodCgroups>,
    /// The node as admission sees it (K4).
    pub admission: Option<watch::Receiver<outpost_core::node_admission::Node>>,
    /// The host's kernel, as the agent reads it.
    pub host: Arc<dyn crate::host::Host>,
    /// D1, D2: the device manager.
    pub devices: Option<crate::devices::Manager>,
    /// X4: the ephemeral containers `outpost debug` adds to static pods.
    pub debug: crate::debug_containers::DebugContainers,
}

/// What the pods run on: containerd (the agent), or a simulated runtime (a hollow node
/// of the fleet harness, B13: no eBPF, cgroups, CNI, eviction manager, garbage
/// collector or images dir, which all need a real runtime; everything else is the
/// agent's).
pub enum Runtime {
    Containerd,
    #[cfg(feature = "hollow")]
    Hollow(Arc<crate::worker::hollow::Hollow>),
}

/// The pod side, built.
pub struct Started {
    /// Where containerd is (`None` on a hollow node).
    pub placement: Option<Placement>,
    /// containerd's task, to be stopped after everything that uses it.
    pub containerd: Option<Task>,
    pub tasks: Vec<Task>,
}

/// Builds what runs the pods on `runtime`.
pub fn start(
    config: &Config,
    runtime: Runtime,
    deps: Deps,
    metrics: Metrics,
) -> Result<Started, Error> {
    match runtime {
        Runtime::Containerd => {
            // D6: kubelet makes its root directory shared at start, before any pod runs;
            // the pods' directories are under the state directory here.
            crate::runtime::volumes::make_rshared(&*deps.host, &config.node.state_dir)
                .map_err(|e| Error::SharedStateDir(Box::new(e)))?;
            let placement = Placement::choose(&config.containerd, &config.node);
            let (containerd, tasks) = build(config, &placement, deps, metrics)?;
            Ok(Started { placement: Some(placement), containerd: Some(containerd), tasks })
        }
        #[cfg(feature = "hollow")]
        Runtime::Hollow(hollow) => {
            let tasks = vec![self::hollow(config, hollow, deps, metrics)];
            Ok(Started { placement: None, containerd: None, tasks })
        }
    }
}

/// Builds the pod side on containerd at `placement`: containerd's task (returned apart,
/// to be stopped after everything that uses it) and the others'.
fn build(
    config: &Config,
    placement: &Placement,
    deps: Deps,
    metrics: Metrics,
) -> Result<(Task, Vec<Task>), Error> {
    let containerd_deps = containerd::Deps {
        ready: deps.ready,
        version: deps.runtime_version,
        connected: deps.connected,
        stop_pods: deps.stop_pods.clone(),
    };
    let (connection, containerd) = config.containerd.clone().build(placement, containerd_deps);
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
        batches: deps.batches,
        connection: connection.clone(),
        images,
        statuses: deps.statuses.clone(),
        events: deps.events,
        ebpf: deps.ebpf,
        objects: deps.objects,
        changes: deps.changes,
        evictions,
        gc: gc.clone(),
        cgroups: deps.cgroups,
        stop_pods: deps.stop_pods,
        node: deps.admission,
        resources: config.node_resources.clone(),
        host: deps.host.clone(),
        shim_grouping: config.containerd.shim_grouping,
        shutdown_groups: config.shutdown.groups.clone(),
        devices: deps.devices,
        debug: deps.debug.clone(),
    };
    let node = &config.node;
    let mut tasks = vec![config.pods.clone().build(node, workers, metrics.workers)?, supervisor];
    let eviction = crate::eviction::start::Deps {
        snapshot: deps.snapshot.clone(),
        statuses: deps.statuses.clone(),
        evict: evict.clone(),
        pressure: deps.pressure,
        metrics: metrics.evictions.clone(),
        gc: gc.clone(),
        host: deps.host.clone(),
    };
    let (eviction_config, layout) = (config.eviction.clone(), config.node_resources.layout.clone());
    let manager =
        crate::eviction::start::build(eviction_config, node, layout, connection.clone(), eviction);
    let collector = crate::gc::start::Deps {
        handle: gc,
        desired: deps.snapshot.clone(),
        statuses: deps.statuses.clone(),
        metrics: metrics.gc,
        host: deps.host,
    };
    let collector =
        crate::gc::start::build(config.gc, node, images_dir, connection.clone(), collector);
    let storage = crate::eviction::start::StorageDeps {
        desired: deps.snapshot,
        evictions: evict,
        metrics: metrics.evictions,
    };
    let monitor = crate::eviction::start::storage_monitor(node, connection, storage);
    tasks.extend([manager, collector, monitor]);
    tasks.extend(images_task);
    tasks.push(Task::infallible("memory_release", crate::memory_release::run(deps.statuses)));
    Ok((containerd, tasks))
}

/// A hollow node's pod side (B13): the pod workers over the simulated runtime, the
/// runtime "connected" at once.
#[cfg(feature = "hollow")]
fn hollow(
    config: &Config,
    hollow: Arc<crate::worker::hollow::Hollow>,
    deps: Deps,
    metrics: Metrics,
) -> Task {
    deps.ready.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = deps.runtime_version.set(crate::worker::hollow::VERSION.to_owned());
    let hollow_deps = crate::worker::hollow::Deps {
        batches: deps.batches,
        objects: deps.objects,
        changes: deps.changes,
        statuses: deps.statuses,
        events: deps.events,
        ebpf: deps.ebpf,
        stop_pods: deps.stop_pods,
    };
    let facts = config.pods.facts(false);
    crate::worker::hollow::pod_workers(hollow, config.node.ip, facts, hollow_deps, metrics.workers)
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps").field("ebpf", &self.ebpf).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Runtime::Containerd => "containerd",
            #[cfg(feature = "hollow")]
            Runtime::Hollow(_) => "hollow",
        })
    }
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started").field("tasks", &self.tasks.len()).finish_non_exhaustive()
    }
}

/// The pods' cgroups under the configured layout, in this host's hierarchy.
pub fn pod_cgroups(config: &Config) -> PodCgroups {
    let resources = &config.node_resources;
    PodCgroups::new(resources.layout.clone(), Hierarchy::detect(), resources.pod_pids_limit)
}
