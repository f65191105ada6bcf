//! The garbage collector (G1): dead containers and their logs by kubelet's container GC
//! policy, unused images by its image GC policy, and what an earlier run left in
//! containerd (leases, snapshots no container references). The choices are the core's
//! (`outpost_core::gc`); this task lists, measures and removes.
//!
//! When it runs (nothing on a busy poll):
//! - dead containers: when a container exits and when a pod worker keeps one (a
//!   restart), at start (what an earlier run kept counts), when one kept too young
//!   for `--minimum-container-ttl-duration` comes of age, and when a pod's status moves
//!   on from a container the last pass kept only because the status named it;
//! - images: after an image pull or import, every 5 minutes (kubelet's period), and when
//!   asked through [`Handle::collect_images_now`] (the eviction manager, on imagefs
//!   pressure); only once every source has been seen (M9), since an image a desired pod
//!   names counts as used;
//! - leases and orphaned snapshots: once at start;
//! - shims serving no task: at start, and each time the containerd event stream is
//!   subscribed again (containerd restarted: [`Handle::containerd_reconnected`]).
//!
//! "Last used": an image first seen counts as used then, an image a container (running
//! or kept dead) or a desired pod uses counts as used at every run. kubelet keeps this in
//! memory; Outpost also keeps it in `<state-dir>/image-gc.json`, so that an agent
//! restart (frequent on an edge box) does not make every image new again.

mod containers;
mod images;
mod leftovers;
pub mod metrics;
mod shims;
pub mod start;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use outpost_core::backoff::Backoff;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::config::gc::GcConfig;
use crate::gc::metrics::GarbageCollection;
use crate::podconfig::SnapshotHandle;
use crate::runtime::Containerd;
use crate::status::StatusStore;

/// kubelet's `ImageGCPeriod`.
pub const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);
/// How soon image GC looks again when the sources have not all been seen yet: 1 s,
/// doubling up to a minute (a source may stay unseen long, offline with no checkpoint).
const SOURCES_WAIT: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// Asks the collector to run now; clones reach the same collector. A default handle
/// reaches none (until [`Collector::new`] takes it).
#[derive(Debug, Clone, Default)]
pub struct Handle {
    containers: Arc<Notify>,
    images: Arc<Notify>,
    reconnected: Arc<Notify>,
}

impl Handle {
    /// A pod worker kept a dead container: the dead-container policy applies now.
    pub fn collect_containers_now(&self) {
        self.containers.notify_one();
    }

    /// Image GC runs now (after a pull, or on image filesystem pressure): it removes
    /// images only if the disk is over the high threshold, or for their age.
    pub fn collect_images_now(&self) {
        self.images.notify_one();
    }

    /// The containerd connection came back after a gap (containerd may have restarted):
    /// shims the earlier containerd left serving no task are ended.
    pub fn containerd_reconnected(&self) {
        self.reconnected.notify_one();
    }

    /// What an image import notifies (see `ImagesDir::with_imported`).
    pub fn images_notify(&self) -> Arc<Notify> {
        self.images.clone()
    }
}

/// When the dead-container policy applies again, besides its triggers.
#[derive(Debug, Clone, Copy)]
struct ContainersLater {
    /// A dead container too young to be chosen comes of age.
    revisit_at: Option<Instant>,
    /// One stays only because a pod's status names it: at the statuses' next change.
    held: bool,
}

/// What the collector needs to know.
#[derive(Debug, Clone)]
pub struct Settings {
    pub policy: GcConfig,
    /// `--pod-log-dir`: dead containers' logs go with them.
    pub pod_log_dir: PathBuf,
    /// `--images-dir` and the record of its imports: images of tarballs still there stay.
    pub images_dir: Option<(PathBuf, PathBuf)>,
    /// Where when each image was first seen and last used is kept across restarts
    /// (`<state-dir>/image-gc.json`; `None`: in memory only).
    pub image_record: Option<PathBuf>,
    /// The host whose processes are looked at for shims serving no task.
    pub host: Arc<dyn crate::host::Host>,
}

/// The collector, ready to run.
#[derive(Debug)]
pub struct Collector {
    containerd: Containerd,
    settings: Settings,
    /// The desired pods (their images are in use) and whether every source was seen.
    desired: SnapshotHandle,
    /// The pods' published statuses: the containers they name stay.
    statuses: StatusStore,
    metrics: GarbageCollection,
    handle: Handle,
    images: images::Tracker,
    /// When this run of the agent started: leases and snapshots from before are an
    /// earlier run's.
    started: Timestamp,
    /// Image GC waiting for the sources to be seen.
    sources_wait: Backoff,
}

impl Collector {
    pub fn new(
        containerd: Containerd,
        settings: Settings,
        desired: SnapshotHandle,
        statuses: StatusStore,
        metrics: GarbageCollection,
        handle: Handle,
    ) -> Collector {
        // Clock: the local wall clock: GC's records (when an image was last used) are this node's,
        // as kubelet's are.
        let started = Timestamp::now();
        let images = images::Tracker::new(started, settings.image_record.clone());
        Collector {
            containerd,
            settings,
            desired,
            statuses,
            metrics,
            handle,
            images,
            started,
            sources_wait: SOURCES_WAIT,
        }
    }

    /// Runs until the task is aborted.
    pub async fn run(mut self) {
        leftovers::remove(self.settings.host.as_ref(), &self.containerd, self.started).await;
        let mut status_changes = self.statuses.subscribe();
        let mut later = self.collect_containers(&mut status_changes).await;
        let mut images_at = Instant::now();
        loop {
            let containers_due = async {
                match later.revisit_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.handle.containers.notified() => later = self.collect_containers(&mut status_changes).await,
                () = containers_due => later = self.collect_containers(&mut status_changes).await,
                Ok(()) = status_changes.changed(), if later.held => later = self.collect_containers(&mut status_changes).await,
                () = self.handle.images.notified() => images_at = self.collect_images().await,
                () = self.handle.reconnected.notified() => shims::end_orphaned(self.settings.host.as_ref(), &self.containerd).await,
                () = tokio::time::sleep_until(images_at) => images_at = self.collect_images().await,
            }
        }
    }

    /// One pass over the dead containers; when to look again. The statuses' changes
    /// until now are taken as seen: the pass read them.
    async fn collect_containers(
        &self,
        status_changes: &mut tokio::sync::watch::Receiver<u64>,
    ) -> ContainersLater {
        status_changes.mark_unchanged();
        let later = containers::collect(
            &self.containerd,
            &self.settings.policy.containers,
            &self.statuses,
            &self.settings.pod_log_dir,
            &self.metrics,
        )
        .await;
        let revisit_at = later.revisit_at.map(|at| {
            // Clock: the local wall clock, as the revisit time was written; a step makes this wait
            // shorter or longer once, and the next pass takes the clock as it is then.
            let wait = at.duration_since(Timestamp::now());
            Instant::now() + Duration::try_from(wait).unwrap_or(Duration::ZERO)
        });
        ContainersLater { revisit_at, held: later.held }
    }

    /// One pass over the images (once the sources are seen); when to run the next.
    async fn collect_images(&mut self) -> Instant {
        let desired = self.desired.load();
        if !desired.synced() {
            return Instant::now() + self.sources_wait.next_delay(fastrand::f64());
        }
        let context = images::Context {
            containerd: &self.containerd,
            policy: &self.settings.policy.images,
            images_dir: self.settings.images_dir.as_ref(),
            desired: &desired,
            metrics: &self.metrics,
        };
        self.images.collect(context).await;
        Instant::now() + IMAGE_GC_PERIOD
    }
}
