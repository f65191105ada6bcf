//! The eviction manager (E1–E2): watches the node's memory, disk and PIDs against the
//! configured thresholds, reports the pressure conditions, and when a threshold is met
//! asks the pod workers to evict one pod at a time, chosen as kubelet chooses.
//!
//! Every decision is [`outpost_core::eviction::control`]'s pure step (when to pass, the
//! node-level reclaim first on disk pressure, one victim at a time, the wake-ups); this
//! task does its IO, waiting on the kernel between passes instead of polling every 10 s
//! as kubelet does:
//!
//! - it reads the signals ([`signals`]) and the candidates' usage ([`candidates`]);
//! - memory: cgroup v1 usage thresholds on the root memory cgroup (`memory.available`)
//!   and on the pods cgroup (`allocatableMemory.available`), armed where the step says
//!   after each pass, and a PSI trigger on `/proc/pressure/memory` (and the pods
//!   cgroup's `memory.pressure` on v2);
//! - disk: a fanotify filesystem mark on nodefs and imagefs; a write wakes a check of
//!   their free space (two `statvfs`) at the pace the step sets;
//! - the victim's status changes, from the status store; the timer;
//! - it hands evictions to the pod workers, asks the garbage collector to collect, and
//!   publishes the pressure conditions.
//!
//! Pods past their own ephemeral-storage limits are evicted by [`storage`] (kubelet's
//! local storage eviction), through the same pod workers' eviction path.

mod candidates;
mod imagefs;
pub mod metrics;
mod notify;
mod signals;
pub mod start;
pub mod storage;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use outpost_core::eviction::control::{BACKSTOP, DISK_CHECK_INTERVAL_FAR};
use outpost_core::eviction::{
    Action, Arm, Config, Controller, Eviction, Input, Pressure, Reading, Signal,
};
use outpost_core::pod::FullName;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

pub use self::candidates::{PodPlaces, walk};
use self::notify::{FsWrites, Psi};
pub use self::signals::Sources;
use crate::podconfig::SnapshotHandle;
use crate::runtime::Containerd;
use crate::status::StatusStore;
use crate::worker;

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
pub async fn run(mut options: Options) {
    if let Some(containerd) = &options.containerd {
        options.sources.imagefs = imagefs::root(containerd).await;
    }
    info!(
        thresholds = %describe_thresholds(&options.config),
        imagefs = ?options.sources.imagefs,
        "eviction manager started"
    );
    let mut controller = Controller::new(options.config.clone(), options.gc.is_some());
    let mut task = Task {
        kernel: Kernel::open(&options.sources),
        armed: Vec::new(),
        status_changes: options.statuses.subscribe(),
        options,
    };
    let mut wake = None;
    let mut inputs = VecDeque::from([Input::Tick]);
    loop {
        while let Some(input) = inputs.pop_front() {
            let step = controller.step(input, Instant::now().into_std());
            for action in step.actions {
                inputs.extend(task.perform(action).await);
            }
            wake = step.wake;
        }
        inputs.push_back(task.next(controller.victim(), wake).await);
    }
}

/// The task's IO: what it reads, waits on and acts through.
struct Task {
    options: Options,
    kernel: Kernel,
    armed: Vec<Armed>,
    status_changes: watch::Receiver<u64>,
}

impl Task {
    /// Performs `action`; what it read, as the step's next input.
    async fn perform(&mut self, action: Action) -> Option<Input> {
        let options = &self.options;
        match action {
            Action::Read => {
                let sources = options.sources.clone();
                let read = tokio::task::spawn_blocking(move || signals::read(&sources)).await;
                let reading = read.unwrap_or_else(|e| {
                    warn!(error = %e, "reading the eviction signals failed");
                    Reading::default()
                });
                return Some(Input::Read(reading));
            }
            Action::Candidates(resource) => {
                let pods = options.snapshot.load().pods.clone();
                let all = options.statuses.all();
                let places = options.places.clone();
                let found = tokio::task::spawn_blocking(move || {
                    candidates::candidates(&pods, &all, &places, resource)
                })
                .await;
                return Some(Input::Candidates(found.unwrap_or_default()));
            }
            Action::Publish(pressure) => {
                options.pressure.send_if_modified(|current| {
                    let changed = *current != pressure;
                    *current = pressure;
                    changed
                });
            }
            Action::CollectGarbage => {
                if let Some(gc) = &options.gc {
                    gc.collect_containers_now();
                    gc.collect_images_now();
                }
            }
            Action::Evict(eviction) => send(&options.evict, &options.metrics, eviction),
            Action::Arm(arms) => {
                self.armed.clear();
                self.armed = self.kernel.arm(&arms);
            }
            Action::DiskChecks(interval) => self.kernel.disk_interval(interval),
        }
        None
    }

    /// Waits for the next thing to happen: a kernel notification, the victim's status
    /// changing, the wake-up time.
    async fn next(&mut self, victim: Option<&str>, wake: Option<std::time::Instant>) -> Input {
        tokio::select! {
            signal = crossed(&self.armed) => Input::Crossed(signal),
            () = self.kernel.stalled() => Input::Stalled,
            () = self.kernel.written() => Input::Written(signals::disk(&self.options.sources)),
            Ok(()) = self.status_changes.changed(), if victim.is_some() => {
                Input::VictimStatus(victim.and_then(|uid| self.options.statuses.get(uid)))
            }
            () = sleep_until(wake) => Input::Tick,
        }
    }
}

async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
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
        let mut psi_files = vec![crate::host::proc::system_path("pressure/memory")];
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

    /// Arms `arms` where this machine has cgroup v1 memory thresholds.
    fn arm(&self, arms: &[Arm]) -> Vec<Armed> {
        let mut armed = Vec::new();
        for arm in arms {
            let dir = match arm.signal {
                Signal::MemoryAvailable => &self.v1_root,
                Signal::AllocatableMemoryAvailable => &self.v1_pods,
                _ => continue,
            };
            let Some(dir) = dir else { continue };
            match notify::Threshold::arm(dir, arm.usage) {
                Ok(t) => {
                    debug!(signal = %arm.signal, usage = arm.usage, "memory threshold armed");
                    armed.push(Armed { threshold: t, signal: arm.signal });
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

    fn disk_interval(&self, interval: Duration) {
        if let Some(writes) = &self.writes {
            writes.set_interval(interval);
        }
    }
}

/// An armed usage threshold and the signal it stands for.
struct Armed {
    threshold: notify::Threshold,
    signal: Signal,
}
