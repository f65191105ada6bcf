//! The eviction manager's decisions over time, as a pure state machine:
//! [`Controller::step`] takes one [`Input`] (a reading of the signals, the candidates of a
//! pass, a kernel notification, the victim's status, a timer) and the time, and returns the
//! [`Action`]s to perform and when to wake it next. The agent's task reads the machine,
//! waits on the kernel and performs the actions, feeding their results back as inputs;
//! nothing here reads, waits or sends.
//!
//! Its rules (kubelet's `synchronize`, waiting on the kernel instead of a 10 s poll):
//! - a pass starts with a reading of every signal ([`Action::Read`]): at start, when a
//!   memory usage threshold armed in the kernel is crossed, on a memory stall (PSI), when
//!   a filesystem is written while a disk signal is near its threshold, when the victim
//!   stopped, and when the wake-up time comes: a soft threshold's grace period or a
//!   condition's transition period ends, the victim's [`POD_CLEANUP_TIMEOUT`] or the
//!   node-level reclaim's [`NODE_RECLAIM_WAIT`] is over, and [`BACKSTOP`] after the pass
//!   at the latest (what PIDs and a slow working-set drift within the page cache rely on);
//! - each pass publishes the pressure conditions when they change ([`Manager`]'s);
//! - on disk pressure the garbage collector is first asked to collect dead containers and
//!   unused images (kubelet's node-level reclaim), once each time the signal to reclaim
//!   changes; pods are evicted for it only if the pressure is still there
//!   [`NODE_RECLAIM_WAIT`] later;
//! - one victim at a time: once a pod is evicted, the next is only chosen after it stopped
//!   (its status Failed and no container running, or its status gone) or after
//!   [`POD_CLEANUP_TIMEOUT`], as kubelet waits for the pod's cleanup;
//! - after each pass the memory usage thresholds are armed again at this reading's
//!   inactive file cache, and writes wake a disk check at most once per
//!   [`DISK_CHECK_INTERVAL`] when a disk signal is within twice its threshold, once per
//!   [`DISK_CHECK_INTERVAL_FAR`] otherwise.

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PodStatus;
use tracing::{debug, info, warn};

use super::manager::{Manager, Outcome, Pressure, Reclaim};
use super::rank::{Candidate, Eviction, rank, victim};
use super::signal::{Observations, Reading, Resource, Signal};
use super::threshold::Config;

/// Disk signals are checked at most this often when the filesystems are being written and
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

/// What happens to the eviction manager.
#[derive(Debug, Clone)]
pub enum Input {
    /// A wake-up time came due (the task starts with one: the first pass).
    Tick,
    /// Every signal, read for a pass (the answer to [`Action::Read`]).
    Read(Reading),
    /// The pods that run, with their usage of the resource the pass reclaims (the answer
    /// to [`Action::Candidates`]), in any order.
    Candidates(Vec<Candidate>),
    /// The memory usage threshold armed for this signal was crossed.
    Crossed(Signal),
    /// Tasks stalled on memory (a PSI trigger).
    Stalled,
    /// nodefs or imagefs was written; their signals now.
    Written(Observations),
    /// The victim's status changed (`None`: it has none any more).
    VictimStatus(Option<Arc<PodStatus>>),
}

/// A memory usage threshold to arm in the kernel: on the root memory cgroup for
/// `memory.available`, on the pods cgroup for `allocatableMemory.available`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arm {
    pub signal: Signal,
    /// The usage, bytes, at which the cgroup's working set reaches the threshold
    /// (kubelet's `capacity - threshold + inactive`).
    pub usage: u64,
}

/// What the agent's task does for the manager, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Read every signal → [`Input::Read`].
    Read,
    /// The node's pressure conditions changed: publish them (the Node status).
    Publish(Pressure),
    /// Ask the garbage collector to collect dead containers and unused images now.
    CollectGarbage,
    /// Read what the running pods use of this resource → [`Input::Candidates`].
    Candidates(Resource),
    /// Hand the eviction to the pod workers (and count it).
    Evict(Eviction),
    /// Arm these usage thresholds, in place of those armed before.
    Arm(Vec<Arm>),
    /// Check the disk signals at most this often while the filesystems are written.
    DiskChecks(Duration),
}

/// The result of a step.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Step {
    pub actions: Vec<Action>,
    /// When to tick next (`None`: not before something happens).
    pub wake: Option<Instant>,
}

/// The evicted pod the manager waits for.
#[derive(Debug, Clone)]
struct Victim {
    uid: String,
    /// When to choose another all the same.
    until: Instant,
}

/// A pass waiting for its candidates.
#[derive(Debug, Clone)]
struct Pass {
    at: Instant,
    reading: Reading,
    outcome: Outcome,
    reclaim: Reclaim,
    /// The signal to reclaim is not the last pass's (its messages are said once).
    newly: bool,
}

/// The eviction manager's memory.
#[derive(Debug, Clone)]
pub struct Controller {
    /// The thresholds as configured (the allocatable ones are added to them once the pods
    /// cgroup is seen limited).
    config: Config,
    manager: Manager,
    allocatable: bool,
    /// Whether there is a garbage collector to ask before evicting for disk.
    collector: bool,
    published: Pressure,
    victim: Option<Victim>,
    /// The signal last reclaimed for, so that a pressure that lasts is logged once.
    reclaiming: Option<Signal>,
    /// Until when disk evictions wait for the garbage collector's node-level reclaim.
    node_reclaim: Option<Instant>,
    /// A disk signal was near its threshold at the last pass.
    near: bool,
    pending: Option<Pass>,
    wake: Option<Instant>,
}

impl Controller {
    /// A manager for `config`; `collector`: a garbage collector is asked first on disk
    /// pressure.
    pub fn new(config: Config, collector: bool) -> Controller {
        Controller {
            manager: Manager::new(config.clone()),
            config,
            allocatable: false,
            collector,
            published: Pressure::default(),
            victim: None,
            reclaiming: None,
            node_reclaim: None,
            near: false,
            pending: None,
            wake: None,
        }
    }

    /// The UID of the evicted pod waited for, if any (its status changes are inputs).
    pub fn victim(&self) -> Option<&str> {
        self.victim.as_ref().map(|v| v.uid.as_str())
    }

    /// One input at `now`.
    pub fn step(&mut self, input: Input, now: Instant) -> Step {
        let mut actions = Vec::new();
        match input {
            Input::Tick => actions.push(Action::Read),
            Input::Stalled => {
                debug!("memory stall (PSI)");
                actions.push(Action::Read);
            }
            Input::Crossed(signal) => {
                debug!(%signal, "memory threshold crossed");
                actions.push(Action::Read);
            }
            Input::Written(disk) => {
                if self.near || near_disk(&disk, self.manager.config()) {
                    debug!("filesystem written near a disk threshold");
                    actions.push(Action::Read);
                }
            }
            Input::VictimStatus(status) => {
                if self.victim.is_some() && status.as_deref().is_none_or(has_stopped) {
                    self.victim = None;
                    actions.push(Action::Read);
                }
            }
            Input::Read(reading) => self.pass(reading, now, &mut actions),
            Input::Candidates(candidates) => {
                if let Some(pass) = self.pending.take() {
                    self.choose(pass, candidates, now, &mut actions);
                }
            }
        }
        Step { actions, wake: self.wake }
    }

    /// A pass over `reading`: the conditions, the node-level reclaim, and the candidates
    /// asked for when a pod is to be evicted (else the pass ends here).
    fn pass(&mut self, reading: Reading, now: Instant, actions: &mut Vec<Action>) {
        self.pending = None;
        if reading.pods.is_some() && !self.allocatable {
            // Node allocatable is enforced on the pods cgroup: kubelet's
            // allocatableMemory.available thresholds apply.
            self.allocatable = true;
            self.manager = Manager::new(self.config.clone().with_allocatable());
        }
        let outcome = self.manager.observe(&reading.observations, now);
        if outcome.pressure != self.published {
            let pressure = outcome.pressure;
            info!(
                memory = pressure.memory,
                disk = pressure.disk,
                pid = pressure.pid,
                "node pressure changed"
            );
            self.published = pressure;
            actions.push(Action::Publish(pressure));
        }
        if self.victim.as_ref().is_some_and(|v| now >= v.until) {
            self.victim = None;
        }
        let signal = outcome.reclaim.map(|r| r.signal());
        let newly = signal != self.reclaiming;
        self.reclaiming = signal;
        if !signal.is_some_and(Signal::is_disk) {
            self.node_reclaim = None;
        } else if newly && self.collector {
            info!("disk pressure: collecting dead containers and unused images first");
            actions.push(Action::CollectGarbage);
            self.node_reclaim = Some(now + NODE_RECLAIM_WAIT);
        }
        let reclaiming_nodes = self.node_reclaim.is_some_and(|until| now < until);
        match outcome.reclaim {
            Some(reclaim) if self.victim.is_none() && !reclaiming_nodes => {
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
                actions.push(Action::Candidates(reclaim.resource));
                self.pending = Some(Pass { at: now, reading, outcome, reclaim, newly });
            }
            _ => self.finish(now, &reading, &outcome, actions),
        }
    }

    /// The victim among `candidates`, evicted; then the pass ends.
    fn choose(
        &mut self,
        pass: Pass,
        mut candidates: Vec<Candidate>,
        now: Instant,
        actions: &mut Vec<Action>,
    ) {
        let Pass { at, reading, outcome, reclaim, newly } = pass;
        rank(&mut candidates, reclaim.resource);
        let max_grace = self.manager.config().max_pod_grace_period;
        match victim(&candidates, &reclaim, &outcome.met, &reading.observations, max_grace) {
            Some(eviction) => {
                self.victim =
                    Some(Victim { uid: eviction.uid.clone(), until: now + POD_CLEANUP_TIMEOUT });
                actions.push(Action::Evict(eviction));
            }
            None if newly => warn!(
                resource = %reclaim.resource,
                pods = candidates.len(),
                "eviction thresholds are met, but no pod may be evicted (static and critical pods never are)"
            ),
            None => debug!(resource = %reclaim.resource, "still no pod may be evicted"),
        }
        self.finish(at, &reading, &outcome, actions);
    }

    /// The end of the pass made `at`: the kernel's thresholds armed again, the disk
    /// checks' pace, the next wake-up.
    fn finish(
        &mut self,
        at: Instant,
        reading: &Reading,
        outcome: &Outcome,
        actions: &mut Vec<Action>,
    ) {
        let config = self.manager.config();
        actions.push(Action::Arm(arms(reading, config)));
        let near = outcome.pressure.disk || near_disk(&reading.observations, config);
        if near != self.near {
            self.near = near;
            let interval = if near { DISK_CHECK_INTERVAL } else { DISK_CHECK_INTERVAL_FAR };
            actions.push(Action::DiskChecks(interval));
        }
        let deadlines = [
            outcome.next_pass,
            self.victim.as_ref().map(|v| v.until),
            self.node_reclaim.filter(|until| at < *until),
        ];
        self.wake = deadlines.into_iter().flatten().chain([at + BACKSTOP]).min();
    }
}

/// The usage thresholds for `reading`: for each memory threshold whose cgroup was read,
/// the usage at which its working set reaches it.
fn arms(reading: &Reading, config: &Config) -> Vec<Arm> {
    config
        .thresholds
        .iter()
        .filter_map(|threshold| {
            let memcg = match threshold.signal {
                Signal::MemoryAvailable => reading.root,
                Signal::AllocatableMemoryAvailable => reading.pods,
                _ => None,
            }?;
            let capacity = i64::try_from(memcg.capacity).unwrap_or(i64::MAX);
            let quantity = u64::try_from(threshold.value.quantity(capacity)).unwrap_or(0);
            let usage = memcg.capacity.saturating_sub(quantity).saturating_add(memcg.inactive);
            Some(Arm { signal: threshold.signal, usage })
        })
        .collect()
}

/// Whether a disk signal is within twice its threshold (plus its minimum reclaim).
fn near_disk(observations: &Observations, config: &Config) -> bool {
    config.thresholds.iter().filter(|t| t.signal.is_disk()).any(|t| {
        observations.get(t.signal).is_some_and(|o| {
            let quantity = t.value.quantity(o.capacity);
            let min = t.min_reclaim.map_or(0, |m| m.quantity(o.capacity));
            o.available < quantity.saturating_add(min).saturating_mul(2)
        })
    })
}

/// Whether an evicted pod's status shows it stopped: Failed (set as soon as the worker
/// takes the eviction) and none of its containers running any more (its emptyDirs are
/// given back by then, so the next pass sees what the eviction reclaimed).
fn has_stopped(status: &PodStatus) -> bool {
    let containers = status.container_statuses.iter().chain(&status.init_container_statuses);
    status.phase.as_deref() == Some("Failed")
        && containers.flatten().all(|c| c.state.as_ref().is_none_or(|s| s.running.is_none()))
}
