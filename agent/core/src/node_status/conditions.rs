//! The node conditions, from readings, as kubelet's status setters compute them: `Ready`
//! (the container runtime), and `MemoryPressure`, `DiskPressure` and `PIDPressure` as the
//! eviction manager reports them ([`Readings::pressure`]: the configured thresholds, held
//! for `evictionPressureTransitionPeriod`, see [`crate::eviction::manager`]). Kubelet's
//! reasons are kept (tools match on them); the messages name Outpost. A node that keeps
//! its certificates (TLS bootstrapping) also reports `CertificateExpired`
//! ([`crate::certificates::condition`]), which kubelet does not have.
//!
//! Times: `lastHeartbeatTime` is when the condition was last computed;
//! `lastTransitionTime` changes only when the status flips.

use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::Readings;
use crate::certificates;

/// kubelet's default `evictionHard` `memory.available<100Mi` (what allocatable is
/// reduced by).
pub const MEMORY_AVAILABLE_MIN: u64 = 100 * 1024 * 1024;
/// kubelet's default `evictionHard` `nodefs.available<10%`, in percent.
pub const NODEFS_AVAILABLE_MIN_PERCENT: u64 = 10;

/// The condition types, in the order kubelet reports them.
pub const TYPES: [&str; 4] = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];

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
            (true, _) => (false, "KubeletNotReady", crate::node_shutdown::NODE_NOT_READY_MESSAGE),
            (false, true) => (true, "KubeletReady", "outpost is posting ready status"),
            (false, false) => (false, "KubeletNotReady", "container runtime is down"),
        },
    ]
}

/// The node's conditions over time: the last computed ones (for their transition times).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conditions {
    current: Vec<NodeCondition>,
}

impl Conditions {
    /// Starts from the conditions a Node already has (an adopted Node keeps its
    /// transition times while the statuses stay the same).
    pub fn adopt(existing: &[NodeCondition]) -> Conditions {
        let ours = |type_: &str| TYPES.contains(&type_) || type_ == certificates::CONDITION_TYPE;
        let current = existing.iter().filter(|c| ours(&c.type_)).cloned();
        Conditions { current: current.collect() }
    }

    /// The conditions computed from `readings` at `now` (a whole second, as the API
    /// server stores times).
    pub fn observe(&mut self, readings: &Readings, now: Timestamp) -> Vec<NodeCondition> {
        let p = readings.pressure;
        let pressure = [p.memory, p.disk, p.pid];
        let observed = observed(pressure, readings.runtime_ready, readings.shutting_down)
            .map(|(on, reason, message)| (on, reason, message.to_owned()));
        let seconds = u64::try_from(now.as_second()).unwrap_or(0);
        let now_system = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds);
        let judged_at = readings.certificates_judged_at.unwrap_or(now_system);
        let certificates = certificates::condition(&readings.certificates, judged_at)
            .map(|condition| (certificates::CONDITION_TYPE, condition));
        let conditions: Vec<NodeCondition> = TYPES
            .into_iter()
            .zip(observed)
            .chain(certificates)
            .map(|(type_, (on, reason, message))| {
                let status = if on { "True" } else { "False" };
                let transition = self
                    .current
                    .iter()
                    .find(|c| c.type_ == type_ && c.status == status)
                    .and_then(|c| c.last_transition_time.clone())
                    .unwrap_or(Time(now));
                NodeCondition {
                    type_: type_.to_owned(),
                    status: status.to_owned(),
                    reason: Some(reason.to_owned()),
                    message: Some(message),
                    last_heartbeat_time: Some(Time(now)),
                    last_transition_time: Some(transition),
                }
            })
            .collect();
        self.current = conditions.clone();
        conditions
    }
}
