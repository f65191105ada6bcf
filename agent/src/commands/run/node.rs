//! The node's housekeeping for `outpost run`, each a task that starts once containerd
//! answers: the images dir (its tarballs imported before pods start), the garbage
//! collector (G1), the ephemeral-storage monitor and the eviction manager (E1-E5).

use std::path::PathBuf;

use outpost_core::eviction::Pressure;
use tokio::sync::{mpsc, watch};
use tracing::{Instrument, info, info_span, warn};

use super::containerd::Connection;
use super::task::Task;
use crate::config::Config;
use crate::error_chain::describe;
use crate::eviction;
use crate::gc::metrics::GarbageCollection;
use crate::gc::{self, Collector};
use crate::podconfig::SnapshotHandle;
use crate::runtime::cgroups::Hierarchy;
use crate::runtime::image::metrics::ImageImports;
use crate::runtime::image::watch::ImagesDir;
use crate::status::StatusStore;
use crate::worker;

/// Whether the tarballs present in the images dir at start are imported: pods wait for
/// them, they may need them.
#[derive(Debug, Clone)]
pub(super) struct ImagesReady(watch::Receiver<bool>);

impl ImagesReady {
    /// Returns once they are (at once without an images dir). If the images dir's task
    /// failed, the agent is ending: this waits no longer.
    pub(super) async fn wait(mut self) {
        let _ = self.0.wait_for(|ready| *ready).await;
    }
}

/// The `images_dir` task: imports what the images dir holds, then follows it.
pub(super) fn images_dir(
    config: &Config,
    connection: Connection,
    gc: &gc::Handle,
    metrics: ImageImports,
) -> (ImagesReady, Option<Task>) {
    let Some(dir) = config.images_dir.clone() else {
        return (ImagesReady(watch::channel(true).1), None);
    };
    let (imported, ready) = watch::channel(false);
    let record = config.state_dir.join("images-imported.json");
    let notify = gc.images_notify();
    let task = Task::new("images_dir", async move {
        let Some(containerd) = connection.connected().await else { return Ok(()) };
        let mut images = ImagesDir::open(dir.clone(), containerd, record)?
            .with_metrics(metrics)
            .with_imported(notify);
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
        imported.send_replace(true);
        if let Err(e) = images.run().await {
            warn!(error = %describe(&e), "stopped watching the images dir");
        }
        Ok(())
    });
    (ImagesReady(ready), Some(task))
}

/// What the garbage collector and the storage monitor work with.
#[derive(Debug)]
pub(super) struct GcDeps {
    pub(super) handle: gc::Handle,
    /// The desired pods: their images are in use; those with storage limits are measured.
    pub(super) desired: SnapshotHandle,
    pub(super) statuses: StatusStore,
    /// Where a pod past its storage limits is evicted.
    pub(super) evictions: mpsc::UnboundedSender<worker::Eviction>,
    pub(super) eviction_metrics: eviction::metrics::Evictions,
}

/// The `garbage_collector` and `storage_monitor` tasks (G1).
pub(super) fn garbage_collector(
    config: &Config,
    connection: Connection,
    deps: GcDeps,
    metrics: GarbageCollection,
) -> [Task; 2] {
    let settings = gc::Settings {
        policy: config.gc,
        pod_log_dir: config.pod_log_dir.clone(),
        images_dir: config
            .images_dir
            .clone()
            .map(|dir| (dir, config.state_dir.join("images-imported.json"))),
        image_record: Some(config.state_dir.join("image-gc.json")),
    };
    let GcDeps { handle, desired, statuses, evictions, eviction_metrics } = deps;
    let (pods_dir, pod_log_dir) = (config.state_dir.join("pods"), config.pod_log_dir.clone());
    let storage = Task::infallible("storage_monitor", {
        let (connection, desired) = (connection.clone(), desired.clone());
        async move {
            let Some(containerd) = connection.connected().await else { return };
            let monitor = eviction::storage::Monitor {
                containerd,
                pods_dir,
                pod_log_dir,
                desired,
                evictions,
                metrics: eviction_metrics,
            };
            monitor.run().await;
        }
    });
    let collector = Task::infallible("garbage_collector", async move {
        let Some(containerd) = connection.connected().await else { return };
        Collector::new(containerd, settings, desired, statuses, metrics, handle).run().await;
    });
    [collector, storage]
}

/// What the eviction manager works with.
#[derive(Debug)]
pub(super) struct EvictionDeps {
    pub(super) snapshot: SnapshotHandle,
    pub(super) statuses: StatusStore,
    /// Where its choices go: the pod workers (E2).
    pub(super) evict: mpsc::UnboundedSender<worker::Eviction>,
    /// The node's pressure conditions, as it holds them.
    pub(super) pressure: watch::Sender<Pressure>,
    pub(super) metrics: eviction::metrics::Evictions,
    /// Asked to collect containers and images on disk pressure, before pods are evicted.
    pub(super) gc: gc::Handle,
}

/// The `eviction_manager` task: the pods' cgroups where `--cgroup-root` and
/// `--cgroup-driver` put them, the state dir as nodefs, containerd's snapshotter root as
/// imagefs.
pub(super) fn eviction_manager(
    config: &Config,
    connection: Connection,
    deps: EvictionDeps,
) -> Task {
    let hierarchy = Hierarchy::detect();
    let layout = config.node_resources.layout.clone();
    let mut options = eviction::Options {
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
        snapshot: deps.snapshot,
        statuses: deps.statuses,
        evict: deps.evict,
        pressure: deps.pressure,
        metrics: deps.metrics,
        containerd: None,
        gc: Some(deps.gc),
    };
    Task::infallible("eviction_manager", async move {
        let Some(containerd) = connection.connected().await else { return };
        options.containerd = Some(containerd);
        eviction::run(options).instrument(info_span!("eviction")).await;
    })
}
