//! Swap as kubelet treats it (D6): whether the node has swap on (`/proc/swaps`), the
//! `memorySwap.swapBehavior` setting, and how much swap each container may use.
//!
//! With `NoSwap` (the default) no container may swap. With `LimitedSwap` (cgroup v2
//! only) a container of a Burstable pod that is not critical, and whose memory request
//! is set and differs from its limit, may swap its share of the node's swap: its memory
//! request over the node's memory, times the swap there is. Every other container gets
//! none. How the runtime spec says so depends on the cgroup version
//! (`outpost-runtime-spec`'s resources).

#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::pod::{self, CONFIG_MIRROR, CONFIG_SOURCE};
use crate::qos::{self, QosClass};

/// kubelet's `SystemCriticalPriority`: a pod at or above it is critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// kubelet's configuration validation, word for word.
    #[error(
        "invalid configuration: memorySwap.swapBehavior {0:?} must be one of: \"\", \"LimitedSwap\" or \"NoSwap\""
    )]
    Behavior(String),
}

/// `memorySwap.swapBehavior`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Behavior {
    /// No container swaps (kubelet's default, also for `""`).
    #[default]
    NoSwap,
    /// Burstable containers swap their share of the node's swap (cgroup v2 only).
    LimitedSwap,
}

impl Behavior {
    /// The setting's value: `""` and `NoSwap` are [`Behavior::NoSwap`].
    pub fn parse(value: &str) -> Result<Behavior, Error> {
        match value {
            "" | "NoSwap" => Ok(Behavior::NoSwap),
            "LimitedSwap" => Ok(Behavior::LimitedSwap),
            other => Err(Error::Behavior(other.to_owned())),
        }
    }

    /// The name in KubeletConfiguration.
    pub fn as_str(self) -> &'static str {
        match self {
            Behavior::NoSwap => "NoSwap",
            Behavior::LimitedSwap => "LimitedSwap",
        }
    }
}

/// What the node has: its memory and its swap (`MemTotal` and `SwapTotal` of
/// `/proc/meminfo`, bytes), as kubelet's machine info holds them from its start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capacity {
    pub memory: u64,
    pub swap: u64,
}

/// Whether `/proc/swaps` (its text) lists a swap area: kubelet's test, more than its
/// header line.
pub fn is_on(proc_swaps: &str) -> bool {
    proc_swaps.trim().lines().count() > 1
}

/// kubelet's `IsCriticalPod`: a static pod (its `config.source` is there and is not
/// `api`), a mirror pod, or a priority of at least [`SYSTEM_CRITICAL_PRIORITY`].
pub fn is_critical(pod: &Pod) -> bool {
    let static_pod = pod::annotation(pod, CONFIG_SOURCE).is_some_and(|source| source != "api");
    static_pod
        || pod::annotation(pod, CONFIG_MIRROR).is_some()
        || crate::admission::priority(pod) >= SYSTEM_CRITICAL_PRIORITY
}

/// The swap `container` of `pod` may use, in bytes (0: none), as kubelet's
/// `GetContainerSwapBehavior` and `calcSwapForBurstablePods` decide it: `behavior` on a
/// node of `capacity` whose cgroups are v2 (`cgroup_v2`) with the swap controller. Only
/// `LimitedSwap` on cgroup v2 gives any, to a container of a Burstable pod that is not
/// critical, whose memory request (its limit when not set) is not 0 and not its limit:
/// `request / memory × swap`, computed in floating point and truncated as kubelet's is
/// (and never more than the swap). A request above the node's memory gets none (kubelet:
/// "cannot calculate swap allocation amount; disallowing swap").
pub fn limit(
    behavior: Behavior,
    cgroup_v2: bool,
    capacity: Capacity,
    pod: &Pod,
    container: &Container,
) -> u64 {
    if behavior != Behavior::LimitedSwap || !cgroup_v2 || is_critical(pod) {
        return 0;
    }
    if qos::qos_class(pod) != QosClass::Burstable {
        return 0;
    }
    let request = u64::try_from(qos::container_request(container, "memory")).unwrap_or(0);
    let limit = qos::container_limit(container, "memory").and_then(|l| u64::try_from(l).ok());
    if request == 0 || Some(request) == limit {
        return 0;
    }
    if capacity.memory == 0 || request > capacity.memory {
        return 0;
    }
    // kubelet's float64 arithmetic, truncated as Go's int64(); a swap above 2^53 may
    // round up in floating point, hence the bound.
    let share = request as f64 / capacity.memory as f64 * capacity.swap as f64;
    (share as u64).min(capacity.swap)
}
