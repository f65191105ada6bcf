//! The limits of the pods' cgroups (Q2), as kubelet's `ResourceConfig` computes them:
//! a pod's from its requests and limits (`ResourceConfigForPod`), the QoS classes' from
//! the pods in them (the QoS container manager's `UpdateCgroups`), and the pods cgroup's
//! from the node's allocatable resources (`enforceNodeAllocatable: [pods]`). The agent
//! writes them to cgroup v1 files (`cpu.shares`, `cpu.cfs_quota_us`, …) or v2 ones
//! (`cpu.weight` from [`shares_to_weight`], `cpu.max`, …).

#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::Pod;

use crate::qos::{QosClass, pod_limit, pod_overhead, pod_request, qos_class};

/// The CFS period, in microseconds (kubelet's default `cpuCFSQuotaPeriod`, 100 ms).
pub const CPU_PERIOD: u64 = 100_000;
/// kubelet's bounds on CPU shares, and the shares of one CPU.
pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 262_144;
const SHARES_PER_CPU: i64 = 1024;
/// The smallest CFS quota, in microseconds (kubelet's `MinQuotaPeriod`).
const MIN_QUOTA: i64 = 1_000;

/// What a cgroup is limited to. Every field is written, so applying a config again (an
/// adopted pod, a QoS class whose pods changed) sets the cgroup to exactly it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceConfig {
    /// `cpu.shares` (v1); v2's `cpu.weight` is [`shares_to_weight`] of it.
    pub cpu_shares: u64,
    /// The CFS quota per [`ResourceConfig::cpu_period`], in microseconds; `None`:
    /// unlimited.
    pub cpu_quota: Option<i64>,
    pub cpu_period: u64,
    /// Memory limit in bytes; `None`: unlimited.
    pub memory_limit: Option<i64>,
    /// `pids.max`; `None`: unlimited.
    pub pids_limit: Option<i64>,
}

impl ResourceConfig {
    /// No limit, the shares given.
    pub fn unlimited(cpu_shares: u64) -> ResourceConfig {
        ResourceConfig {
            cpu_shares,
            cpu_quota: None,
            cpu_period: CPU_PERIOD,
            memory_limit: None,
            pids_limit: None,
        }
    }
}

/// kubelet's `MilliCPUToShares`: 1024 shares per CPU, between 2 and 262144 (2 for none).
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    let shares = milli_cpu.saturating_mul(SHARES_PER_CPU) / 1000;
    shares.clamp(MIN_SHARES as i64, MAX_SHARES as i64).unsigned_abs()
}

/// kubelet's `MilliCPUToQuota` over [`CPU_PERIOD`]: at least 1 ms; 0 for no cpu.
pub fn milli_cpu_to_quota(milli_cpu: i64) -> i64 {
    if milli_cpu <= 0 {
        return 0;
    }
    let period = CPU_PERIOD as i64;
    (milli_cpu.saturating_mul(period) / 1000).max(MIN_QUOTA)
}

/// kubelet's `CpuSharesToCpuWeight` (cgroup v2): shares 2..262144 mapped onto weights
/// 1..10000.
pub fn shares_to_weight(shares: u64) -> u64 {
    let shares = shares.clamp(MIN_SHARES, MAX_SHARES);
    1 + ((shares - MIN_SHARES) * 9999) / (MAX_SHARES - MIN_SHARES)
}

/// kubelet's `ResourceConfigForPod` (with CFS quota enforced, its default): cpu shares
/// from the pod's cpu request; a CFS quota when the pod's cpu is limited (every container
/// has a limit, or the pod sets one); a memory limit likewise; a BestEffort pod gets the
/// minimum shares and nothing else. The pod's `spec.overhead` (D5) is added to its
/// requests, and to each limit that is set, as kubelet's `PodRequests` and `PodLimits`
/// add it. `pod_pids_limit` is `podPidsLimit` (`None` or not positive: unlimited).
pub fn for_pod(pod: &Pod, pod_pids_limit: Option<i64>) -> ResourceConfig {
    let pids_limit = pod_pids_limit.filter(|l| *l > 0);
    let class = qos_class(pod);
    if class == QosClass::BestEffort {
        return ResourceConfig { pids_limit, ..ResourceConfig::unlimited(MIN_SHARES) };
    }
    let cpu_shares = milli_cpu_to_shares(request_with_overhead(pod, "cpu"));
    let cpu_quota = limit_with_overhead(pod, "cpu").map(milli_cpu_to_quota).filter(|q| *q > 0);
    let memory_limit = limit_with_overhead(pod, "memory");
    ResourceConfig { cpu_shares, cpu_quota, cpu_period: CPU_PERIOD, memory_limit, pids_limit }
}

/// The pod's request of `resource` with its overhead (kubelet's `PodRequests`).
fn request_with_overhead(pod: &Pod, resource: &str) -> i64 {
    pod_request(pod, resource).saturating_add(pod_overhead(pod, resource))
}

/// The pod's limit of `resource` with its overhead, when the pod is limited (kubelet's
/// `PodLimits`: the overhead goes only onto a limit that is set and not zero).
fn limit_with_overhead(pod: &Pod, resource: &str) -> Option<i64> {
    let limit = pod_limit(pod, resource).filter(|l| *l > 0)?;
    Some(limit.saturating_add(pod_overhead(pod, resource)))
}

/// The QoS class cgroup's config (`UpdateCgroups`): BestEffort gets the minimum shares,
/// Burstable the shares of its pods' cpu requests (with their overhead, D5) added up
/// (`burstable_pods`: the pods of that class on the node). Guaranteed has no cgroup of
/// its own: `None`.
pub fn for_qos<'p>(
    class: QosClass,
    burstable_pods: impl IntoIterator<Item = &'p Pod>,
) -> Option<ResourceConfig> {
    match class {
        QosClass::Guaranteed => None,
        QosClass::BestEffort => Some(ResourceConfig::unlimited(MIN_SHARES)),
        QosClass::Burstable => {
            let milli: i64 = burstable_pods
                .into_iter()
                .map(|pod| request_with_overhead(pod, "cpu"))
                .fold(0, i64::saturating_add);
            Some(ResourceConfig::unlimited(milli_cpu_to_shares(milli)))
        }
    }
}
