//! The node conditions, from readings, as kubelet's status setters and eviction manager
//! compute them: `Ready` (the container runtime), `MemoryPressure`, `DiskPressure` and
//! `PIDPressure` (kubelet's default hard eviction thresholds, and a PID threshold of our
//! own since kubelet has none by default). Kubelet's reasons are kept (tools match on
//! them); the messages name Outpost.
//!
//! Times: `lastHeartbeatTime` is when the condition was last computed;
//! `lastTransitionTime` changes only when the status flips. A pressure stays on until it
//! has not been observed for [`PRESSURE_TRANSITION_PERIOD`] (kubelet's
//! `evictionPressureTransitionPeriod`), so a reading hovering at the threshold does not
//! flap the condition.

use std::time::Duration;

use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::Readings;

/// kubelet's default `evictionHard` `memory.available<100Mi`.
pub const MEMORY_AVAILABLE_MIN: u64 = 100 * 1024 * 1024;
/// kubelet's default `evictionHard` `nodefs.available<10%`, in percent.
pub const NODEFS_AVAILABLE_MIN_PERCENT: u64 = 10;
/// PIDs: pressure when fewer than 10% of the PID limit (the lower of `pid_max` and
/// `threads-max`, as kubelet computes it) are free. Kubelet has no default for
/// `pid.available`; 10% mirrors the nodefs threshold.
pub const PIDS_AVAILABLE_MIN_PERCENT: u64 = 10;
/// kubelet's default `evictionPressureTransitionPeriod`.
pub const PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(5 * 60);

/// The condition types, in the order kubelet reports them.
pub const TYPES: [&str; 4] = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];

/// Whether each pressure signal crosses its threshold now (unknown readings: no).
pub fn pressures(readings: &Readings) -> [bool; 3] {
    let memory = readings.memory.is_some_and(|m| m.available < MEMORY_AVAILABLE_MIN);
    let disk = readings.nodefs.is_some_and(|fs| {
        u128::from(fs.available) * 100
            < u128::from(fs.capacity) * u128::from(NODEFS_AVAILABLE_MIN_PERCENT)
    });
    let pids = readings.pids.is_some_and(|p| {
        let free = p.max.saturating_sub(p.running);
        u128::from(free) * 100 < u128::from(p.max) * u128::from(PIDS_AVAILABLE_MIN_PERCENT)
    });
    [memory, disk, pids]
}

/// (status, reason, message) of each condition type, in [`TYPES`] order, given which
/// pressures are on.
fn observed(
    pressure: [bool; 3],
    runtime_ready: bool,
    shutting_down: bool,
) -> [(bool, &'static str, &'static str); 4] {
    let [memory, disk, pids] = pressure;
    [
        if memory {
            (true, "KubeletHasInsufficientMemory", "outpost has insufficient memory available")
        } else {
            (false, "KubeletHasSufficientMemory", "outpost has sufficient memory available")
        },
        if disk {
            (true, "KubeletHasDiskPressure", "outpost has disk pressure")
        } else {
            (false, "KubeletHasNoDiskPressure", "outpost has no disk pressure")
        },
        if pids {
            (true, "KubeletHasInsufficientPID", "outpost has insufficient PID available")
        } else {
            (false, "KubeletHasSufficientPID", "outpost has sufficient PID available")
        },
        match (shutting_down, runtime_ready) {
            (true, _) => (false, "KubeletNotReady", "node is shutting down"),
            (false, true) => (true, "KubeletReady", "outpost is posting ready status"),
            (false, false) => (false, "KubeletNotReady", "container runtime is down"),
        },
    ]
}

/// The node's conditions over time: the last computed ones (for their transition times)
/// and when each pressure was last observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conditions {
    current: Vec<NodeCondition>,
    pressure_seen: [Option<Timestamp>; 3],
}

impl Conditions {
    /// Starts from the conditions a Node already has (an adopted Node keeps its
    /// transition times while the statuses stay the same).
    pub fn adopt(existing: &[NodeCondition]) -> Conditions {
        let current = existing.iter().filter(|c| TYPES.contains(&c.type_.as_str())).cloned();
        Conditions { current: current.collect(), pressure_seen: [None; 3] }
    }

    /// The conditions computed from `readings` at `now` (a whole second, as the API
    /// server stores times).
    pub fn observe(&mut self, readings: &Readings, now: Timestamp) -> Vec<NodeCondition> {
        let period = SignedDuration::try_from(PRESSURE_TRANSITION_PERIOD).unwrap_or_default();
        let signals = pressures(readings);
        let mut pressure = [false; 3];
        for (i, on) in signals.into_iter().enumerate() {
            if on {
                self.pressure_seen[i] = Some(now);
            }
            pressure[i] =
                self.pressure_seen[i].is_some_and(|seen| now.duration_since(seen) < period);
        }
        let conditions: Vec<NodeCondition> = TYPES
            .iter()
            .zip(observed(pressure, readings.runtime_ready, readings.shutting_down))
            .map(|(type_, (on, reason, message))| {
                let status = if on { "True" } else { "False" };
                let transition = self
                    .current
                    .iter()
                    .find(|c| c.type_ == *type_ && c.status == status)
                    .and_then(|c| c.last_transition_time.clone())
                    .unwrap_or(Time(now));
                NodeCondition {
                    type_: (*type_).to_owned(),
                    status: status.to_owned(),
                    reason: Some(reason.to_owned()),
                    message: Some(message.to_owned()),
                    last_heartbeat_time: Some(Time(now)),
                    last_transition_time: Some(transition),
                }
            })
            .collect();
        self.current = conditions.clone();
        conditions
    }
}
