//! The container's cgroup limits from `resources`, as kubelet computes them: memory limit
//! in bytes, CPU limit as a CFS quota over a 100 ms period, CPU request as shares.

use k8s_openapi::api::core::v1::Container;
use oci_spec::runtime::{LinuxCpu, LinuxMemory, LinuxResources};
use outpost_core::quantity::{self, Quantity};

use super::error::{Error, Result};
use super::security::Security;
use super::subject::Subject;
use super::{defaults, selector};

/// The CFS period, in microseconds (kubelet's default 100 ms).
pub(super) const CPU_PERIOD: u64 = 100_000;
/// The smallest CFS quota, in microseconds.
const MIN_QUOTA: i64 = 1_000;

pub(super) fn resources(
    container: &Container,
    security: &Security,
    at: &Subject,
) -> Result<LinuxResources> {
    let parse = |kind: &str, resource: &str| -> Result<Option<Quantity>> {
        let Some(text) = selector::quantity_of(container, kind, resource) else { return Ok(None) };
        Quantity::parse(&text.0).map(Some).map_err(|source| Error::Quantity {
            at: at.clone(),
            field: format!("resources.{kind}.{resource}"),
            value: text.0.clone(),
            source,
        })
    };
    let convert = |kind: &str, resource: &str, result: Result<i64, quantity::Error>| {
        result.map_err(|source| Error::Quantity {
            at: at.clone(),
            field: format!("resources.{kind}.{resource}"),
            value: selector::quantity_of(container, kind, resource)
                .map(|q| q.0.clone())
                .unwrap_or_default(),
            source,
        })
    };

    let mut cpu = LinuxCpu::default();
    let request = match parse("requests", "cpu")? {
        Some(q) => convert("requests", "cpu", q.milli_value())?,
        None => 0,
    };
    cpu.set_shares(Some(milli_cpu_to_shares(request)));
    if let Some(limit) = parse("limits", "cpu")?.filter(|q| !q.is_zero()) {
        let milli = convert("limits", "cpu", limit.milli_value())?;
        cpu.set_quota(Some(milli_cpu_to_quota(milli))).set_period(Some(CPU_PERIOD));
    }

    let mut resources = LinuxResources::default();
    resources.set_devices(Some(defaults::device_rules(security.privileged))).set_cpu(Some(cpu));
    if let Some(limit) = parse("limits", "memory")?.filter(|q| !q.is_zero()) {
        let mut memory = LinuxMemory::default();
        memory.set_limit(Some(convert("limits", "memory", limit.value())?));
        resources.set_memory(Some(memory));
    }
    Ok(resources)
}

/// kubelet's `MilliCPUToShares`: 1024 shares per CPU, between 2 and 262144.
pub(super) fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    outpost_core::resource_config::milli_cpu_to_shares(milli_cpu)
}

/// kubelet's `milliCPUToQuota` over [`CPU_PERIOD`]: at least 1 ms.
pub(super) fn milli_cpu_to_quota(milli_cpu: i64) -> i64 {
    let period = i64::try_from(CPU_PERIOD).unwrap_or(i64::MAX);
    (milli_cpu.saturating_mul(period) / 1000).max(MIN_QUOTA)
}

#[cfg(test)]
mod tests;
