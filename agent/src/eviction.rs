//! The eviction manager (E1–E2): watches the node's memory, disk and PIDs against the
//! configured thresholds, reports the pressure conditions, and when a threshold is met
//! asks the pod workers to evict one pod at a time, chosen as kubelet chooses.
//!
//! The decisions are [`outpost_core::eviction`]'s; this task reads the machine and waits
//! on the kernel between passes instead of polling every 10 s as kubelet does:
//!
//! - memory: cgroup v1 usage thresholds on the root memory cgroup (`memory.available`)
//!   and on the pods cgroup (`allocatableMemory.available`), armed again after each pass,
//!   and a PSI trigger on `/proc/pressure/memory` (and the pods cgroup's
//!   `memory.pressure` on v2);
//! - disk: a fanotify filesystem mark on nodefs and imagefs; a write wakes a check of
//!   their free space (two `statvfs`) at most once per [`DISK_CHECK_INTERVAL`] when one
//!   is within twice its threshold, once per [`DISK_CHECK_INTERVAL_FAR`] otherwise, and
//!   a full pass when one is near;
//! - a pass also runs when a soft threshold's grace period or a condition's transition
//!   period ends, when an evicted pod's status changes, and as a backstop every
//!   [`BACKSTOP`] (what PIDs and a slow working-set drift within the page cache rely on).
//!
//! On disk pressure the garbage collector is first asked to collect dead containers and
//! unused images (kubelet's node-level reclaim); pods are evicted for it only if the
//! pressure is still there [`NODE_RECLAIM_WAIT`] later.
//!
//! After an eviction the next pod is only chosen once the victim stopped (its status is
//! Failed) or after [`POD_CLEANUP_TIMEOUT`], as kubelet waits for the pod's cleanup.
//!
//! Pods past their own ephemeral-storage limits are evicted by [`storage`] (kubelet's
//! local storage eviction), through the same pod workers' eviction path.

mod candidates;
mod imagefs;
pub mod metrics;
mod notify;
mod signals;
pub mod storage;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use outpost_core::eviction::{Config, Eviction, Manager, Pressure, Signal, rank, victim};
use outpost_core::pod::FullName;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

pub use self::candidates::PodPlaces;
use self::notify::{FsWrites, Psi};
use self::signals::Reading;
pub use self::signals::Sources;
use crate::podconfig::SnapshotHandle;
use crate::runtime::Containerd;
use crate::status::StatusStore;
use crate::worker;

/// Disk signals are read at most this often when the filesystems are being written and
/// one of them is within twice its threshold...
pub const DISK_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// ...and this often when all are further (kubelet reads them every 10 s, written or not).
pub const DISK_CHECK_INTERVAL_FAR: Duration = Duration::from_secs(10);
/// The longest time between two passes.
pub const BACKSTOP: Duration = Duration::from_secs(60);
/// How long disk evictions wait for the garbage collector once it was asked to collect.
pub const NODE_RECLAIM_WAIT: Duration = Duration::from_secs(5);
/// How long to wait for an evicted pod to stop before choosing another (kubelet's
/// `podCleanupTimeout`).
pub const POD_CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);

/// What the eviction manager needs.
#[derive(Debug)]
pub struct Options {
    pub config: Config,
    pub sources: Sources,
    pub places: PodPlaces,
    pub snapshot: SnapshotHandle,
    pub statuses: StatusStore,
    /// To the pod workers.
    pub evict: mpsc::UnboundedSender<worker::Eviction>,
    /// The pressure conditions, for the Node status.
    pub pressure: watch::Sender<Pressure>,
    pub metrics: crate::eviction::metrics::Evictions,
    /// Where to find the image filesystem (containerd's snapshotter root).
    pub containerd: Option<Containerd>,
    /// The garbage collector, asked to collect dead containers and unused images on disk
    /// pressure before any pod is evicted for it (kubelet's node-level reclaim).
    pub gc: Option<crate::gc::Handle>,
}

/// The manager's task: runs until the agent ends.
pub async fn run(options: Options) {
    let Options {
        config,
        mut sources,
        places,
        snapshot,
        statuses,
        evict,
        pressure,
        metrics,
        containerd,
        gc,
    } = options;
    if let Some(containerd) = &containerd {
        sources.imagefs = imagefs::root(containerd).await;
    }
    info!(
        thresholds = %describe_thresholds(&config),
        imagefs = ?sources.imagefs,
        "eviction manager started"
    );
    let kernel = Kernel::open(&sources);
    let mut manager = Manager::new(config.clone());
    let mut allocatable = false;
    let mut status_changes = statuses.subscribe();
    let mut victim_pending: Option<(String, Instant)> = None;
    let mut armed: Vec<Armed> = Vec::new();
    // The signal last reclaimed for, so that a pressure that lasts is logged once.
    let mut reclaiming: Option<Signal> = None;
    // Until when disk evictions wait for the garbage collector's node-level reclaim.
    let mut node_reclaim: Option<Instant> = None;
    loop {
        let pass_at = Instant::now();
        let reading = {
            let sources = sources.clone();
            match tokio::task::spawn_blocking(move || signals::read(&sources)).await {
                Ok(reading) => reading,
                Err(e) => {
                    warn!(error = %e, "reading the eviction signals failed");
                    Reading::default()
                }
            }
        };
        if reading.pods.is_some() && !allocatable {
            // Node allocatable is enforced on the pods cgroup: kubelet's
            // allocatableMemory.available thresholds apply.
            allocatable = true;
            manager = Manager::new(config.clone().with_allocatable());
        }
        let outcome = manager.observe(&reading.observations, pass_at.into_std());
        pressure.send_if_modified(|current| {
            let changed = *current != outcome.pressure;
            if changed {
                info!(
                    memory = outcome.pressure.memory,
                    disk = outcome.pressure.disk,
                    pid = outcome.pressure.pid,
                    "node pressure changed"
                );
                *current = outcome.pressure;
            }
            changed
        });
        if let Some((uid, deadline)) = &victim_pending {
            let stopped = statuses.get(uid).is_none_or(|s| has_stopped(&s));
            if stopped || Instant::now() >= *deadline {
                victim_pending = None;
            }
        }
        let newly = outcome.reclaim.map(|r| r.signal()) != reclaiming;
        reclaiming = outcome.reclaim.map(|r| r.signal());
        let disk = outcome
            .reclaim
            .is_some_and(|r| !r.signal().is_memory() && r.signal() != Signal::PidAvailable);
        if !disk {
            node_reclaim = None;
        } else if newly && let Some(gc) = &gc {
            info!("disk pressure: collecting dead containers and unused images first");
            gc.collect_containers_now();
            gc.collect_images_now();
            node_reclaim = Some(Instant::now() + NODE_RECLAIM_WAIT);
        }
        let reclaiming_nodes = node_reclaim.is_some_and(|until| Instant::now() < until);
        if let (Some(reclaim), None, false) = (&outcome.reclaim, &victim_pending, reclaiming_nodes)
        {
            if newly {
                info!(
                    signal = %reclaim.signal(),
                    available = reclaim.available,
                    threshold = reclaim.threshold_quantity,
                    to_reclaim = reclaim.to_reclaim,
                    "eviction threshold met; attempting to reclaim {}",
                    reclaim.resource
                );
            }
            let pods = snapshot.load().pods.clone();
            let all = statuses.all();
            let places = places.clone();
            let resource = reclaim.resource;
            let ranked = tokio::task::spawn_blocking(move || {
                let mut candidates = candidates::candidates(&pods, &all, &places, resource);
                rank(&mut candidates, resource);
                candidates
            })
            .await
            .unwrap_or_default();
            let max_grace = manager.config().max_pod_grace_period;
            match victim(&ranked, reclaim, &outcome.met, &reading.observations, max_grace) {
                Some(eviction) => {
                    victim_pending =
                        Some((eviction.uid.clone(), Instant::now() + POD_CLEANUP_TIMEOUT));
                    send(&evict, &metrics, eviction);
                }
                None if newly => warn!(
                    resource = %reclaim.resource,
                    pods = ranked.len(),
                    "eviction thresholds are met, but no pod may be evicted (static and critical pods never are)"
                ),
                None => debug!(resource = %reclaim.resource, "still no pod may be evicted"),
            }
        }
        armed = kernel.arm(&reading, manager.config(), armed);
        let mut deadline = pass_at + BACKSTOP;
        if let Some(next) = outcome.next_pass {
            deadline = deadline.min(Instant::from_std(next));
        }
        if let Some((_, cleanup)) = &victim_pending {
            deadline = deadline.min(*cleanup);
        }
        if let Some(until) = node_reclaim.filter(|_| reclaiming_nodes) {
            deadline = deadline.min(until);
        }
        // Disk: a write wakes a cheap check (two statvfs, inline); a full pass follows
        // only when a disk signal is near its threshold.
        let near = outcome.pressure.disk || near_disk(&reading.observations, manager.config());
        kernel.disk_interval(near);
        loop {
            tokio::select! {
                signal = crossed(&armed) => {
                    debug!(%signal, "memory threshold crossed");
                    break;
                }
                () = kernel.stalled() => {
                    debug!("memory stall (PSI)");
                    break;
                }
                () = kernel.written() => {
                    let disk = signals::disk(&sources);
                    let now_near = near_disk(&disk, manager.config());
                    if near || now_near {
                        debug!("filesystem written near a disk threshold");
                        break;
                    }
                }
                Ok(()) = status_changes.changed(), if victim_pending.is_some() => break,
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
    }
}

/// Whether a disk signal is within twice its threshold (plus its minimum reclaim).
fn near_disk(observations: &outpost_core::eviction::Observations, config: &Config) -> bool {
    config
        .thresholds
        .iter()
        .filter(|t| !t.signal.is_memory() && t.signal != Signal::PidAvailable)
        .any(|t| {
            observations.get(t.signal).is_some_and(|o| {
                let quantity = t.value.quantity(o.capacity);
                let min = t.min_reclaim.map_or(0, |m| m.quantity(o.capacity));
                o.available < quantity.saturating_add(min).saturating_mul(2)
            })
        })
}

/// Hands `eviction` to the pod workers.
fn send(
    evict: &mpsc::UnboundedSender<worker::Eviction>,
    metrics: &crate::eviction::metrics::Evictions,
    eviction: Eviction,
) {
    info!(
        pod.namespace = %eviction.namespace,
        pod.name = %eviction.name,
        pod.uid = %eviction.uid,
        signal = %eviction.signal,
        grace = ?eviction.grace_period,
        message = %eviction.message,
        "evicting pod"
    );
    metrics.evicted(eviction.signal);
    let sent = evict.send(worker::Eviction {
        pod: FullName { namespace: eviction.namespace, name: eviction.name },
        uid: eviction.uid,
        message: eviction.message,
        grace: eviction.grace_period,
    });
    if sent.is_err() {
        warn!("the pod workers are gone; cannot evict");
    }
}

fn describe_thresholds(config: &Config) -> String {
    let items: Vec<String> = config
        .thresholds
        .iter()
        .map(|t| {
            let value = match t.value {
                outpost_core::eviction::ThresholdValue::Quantity(q) => q.to_string(),
                outpost_core::eviction::ThresholdValue::Percentage(p) => {
                    format!("{}%", (f64::from(p) * 10_000.0).round() / 100.0)
                }
            };
            let kind =
                if t.is_hard() { String::new() } else { format!(" (soft, {:?})", t.grace_period) };
            format!("{}<{value}{kind}", t.signal)
        })
        .collect();
    items.join(",")
}

/// The first of the armed thresholds to be crossed (never, if none is armed).
async fn crossed(armed: &[Armed]) -> Signal {
    if armed.is_empty() {
        return std::future::pending().await;
    }
    let waits = armed.iter().map(|t| {
        Box::pin(async move {
            if let Err(e) = t.threshold.crossed().await {
                warn!(error = %e, "cannot read a memory threshold's eventfd");
                std::future::pending::<()>().await;
            }
            t.signal
        })
    });
    futures::future::select_all(waits).await.0
}

/// The kernel's notifications this task waits on; those that could not be set up are
/// `None` (said once in the log).
struct Kernel {
    v1_root: Option<PathBuf>,
    v1_pods: Option<PathBuf>,
    psi: Vec<Psi>,
    writes: Option<FsWrites>,
}

impl Kernel {
    fn open(sources: &Sources) -> Kernel {
        let v1 = !sources.hierarchy.is_v2();
        let mut psi = Vec::new();
        let mut psi_files = vec![sources.proc.join("pressure/memory")];
        if !v1 {
            psi_files.push(
                sources.hierarchy.dir("memory", &sources.pods_cgroup).join("memory.pressure"),
            );
        }
        for path in psi_files {
            match Psi::open(&path) {
                Ok(trigger) => {
                    info!(path = %path.display(), trigger = trigger.trigger, "memory stalls watched (PSI)");
                    psi.push(trigger);
                }
                Err(e) => info!(path = %path.display(), error = %e, "no PSI trigger"),
            }
        }
        let mut filesystems = vec![sources.nodefs.as_path()];
        filesystems.extend(sources.imagefs.as_deref());
        let writes = match FsWrites::open(&filesystems, DISK_CHECK_INTERVAL_FAR) {
            Ok(writes) => Some(writes),
            Err(e) => {
                warn!(error = %e, "cannot watch nodefs and imagefs for writes (fanotify); disk is checked every {BACKSTOP:?}");
                None
            }
        };
        Kernel {
            v1_root: v1.then(|| sources.hierarchy.dir("memory", "/")),
            v1_pods: v1.then(|| sources.hierarchy.dir("memory", &sources.pods_cgroup)),
            psi,
            writes,
        }
    }

    /// The usage thresholds for this reading: for each memory threshold, the usage at
    /// which the working set reaches it (kubelet's `capacity - threshold + inactive`).
    fn arm(&self, reading: &Reading, config: &Config, old: Vec<Armed>) -> Vec<Armed> {
        drop(old);
        let mut armed = Vec::new();
        for threshold in &config.thresholds {
            let (dir, memcg) = match threshold.signal {
                Signal::MemoryAvailable => (&self.v1_root, reading.root),
                Signal::AllocatableMemoryAvailable => (&self.v1_pods, reading.pods),
                _ => continue,
            };
            let (Some(dir), Some(memcg)) = (dir, memcg) else { continue };
            let capacity = i64::try_from(memcg.capacity).unwrap_or(i64::MAX);
            let quantity = u64::try_from(threshold.value.quantity(capacity)).unwrap_or(0);
            let bytes = memcg.capacity.saturating_sub(quantity).saturating_add(memcg.inactive);
            match notify::Threshold::arm(dir, bytes) {
                Ok(t) => {
                    debug!(signal = %threshold.signal, usage = bytes, "memory threshold armed");
                    armed.push(Armed { threshold: t, signal: threshold.signal });
                }
                Err(e) => warn!(dir = %dir.display(), error = %e, "cannot arm a memory threshold"),
            }
        }
        armed
    }

    async fn stalled(&self) {
        if self.psi.is_empty() {
            return std::future::pending().await;
        }
        let waits = self.psi.iter().map(|p| Box::pin(p.stalled()));
        if let (Err(e), _, _) = futures::future::select_all(waits).await {
            warn!(error = %e, "PSI trigger failed");
            std::future::pending::<()>().await;
        }
    }

    async fn written(&self) {
        match &self.writes {
            Some(writes) => writes.written().await,
            None => std::future::pending().await,
        }
    }

    fn disk_interval(&self, near: bool) {
        if let Some(writes) = &self.writes {
            writes.set_interval(if near { DISK_CHECK_INTERVAL } else { DISK_CHECK_INTERVAL_FAR });
        }
    }
}

/// An armed usage threshold and the signal it stands for.
struct Armed {
    threshold: notify::Threshold,
    signal: Signal,
}

/// Whether an evicted pod's status shows it stopped: Failed (set as soon as the worker
/// takes the eviction) and none of its containers running any more (its emptyDirs are
/// given back by then, so the next pass sees what the eviction reclaimed).
fn has_stopped(status: &k8s_openapi::api::core::v1::PodStatus) -> bool {
    let containers = status.container_statuses.iter().chain(&status.init_container_statuses);
    status.phase.as_deref() == Some("Failed")
        && containers.flatten().all(|c| c.state.as_ref().is_none_or(|s| s.running.is_none()))
}
