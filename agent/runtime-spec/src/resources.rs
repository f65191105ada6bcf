//! The container's cgroup limits from `resources`, as kubelet computes them: memory limit
//! in bytes, CPU limit as a CFS quota over a 100 ms period, CPU request as shares; and
//! its swap (D6), as kubelet's CRI request makes containerd set it.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Container;
use oci_spec::runtime::{LinuxCpu, LinuxMemory, LinuxResources};
use outpost_core::quantity::{self, Quantity};
use outpost_core::swap;

use super::context::{PodContext, SwapController};
use super::error::{Error, Result};
use super::security::Security;
use super::subject::Subject;
use super::{defaults, selector};

/// cgroup v2's swap limit, set through the spec's `unified` map as kubelet sets it.
const SWAP_MAX: &str = "memory.swap.max";

/// The CFS period, in microseconds (kubelet's default 100 ms).
pub(super) const CPU_PERIOD: u64 = 100_000;
/// The smallest CFS quota, in microseconds.
const MIN_QUOTA: i64 = 1_000;

pub(super) fn resources(
    ctx: &PodContext<'_>,
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
        let limit = convert("limits", "memory", limit.value())?;
        let mut memory = LinuxMemory::default();
        memory.set_limit(Some(limit));
        // D6, cgroup v1: memory and swap limited together to the memory limit.
        if ctx.swap.controller == SwapController::MemorySwap {
            memory.set_swap(Some(limit));
        }
        resources.set_memory(Some(memory));
    }
    if ctx.swap.controller == SwapController::SwapMax {
        resources.set_unified(Some(swap_max(ctx, container)));
    }
    Ok(resources)
}

/// D6: the container's swap, as kubelet's `configureContainerSwapResources` asks
/// containerd for it. With no swap controller the spec says nothing of swap. On cgroup
/// v1, where only `NoSwap` is allowed, memory and swap together are limited to the
/// memory limit (OCI's `memory.swap` is `memory.memsw.limit_in_bytes`), so nothing swaps
/// beyond it (and without a memory limit, nothing is set). On cgroup v2 it is this:
/// `memory.swap.max` set to the container's [`swap::limit`] (0 with `NoSwap`, and for
/// every container not entitled to swap).
fn swap_max(ctx: &PodContext<'_>, container: &Container) -> HashMap<String, String> {
    let swap = &ctx.swap;
    let bytes = swap::limit(swap.behavior, true, swap.capacity, ctx.pod, container);
    HashMap::from([(SWAP_MAX.to_owned(), bytes.to_string())])
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
