//! The node's capacity as the kernel tells it: online CPUs, memory, the PID limit (what
//! the node status reports and node allocatable is enforced from).

use outpost_core::node_status::Capacity;
use outpost_core::node_status::machine;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Online CPUs (`/sys/devices/system/cpu/online`, else what the process may use).
pub fn cpus() -> u32 {
    read("/sys/devices/system/cpu/online")
        .and_then(|text| machine::cpu_list_count(&text))
        .or_else(|| {
            std::thread::available_parallelism().ok().and_then(|n| u32::try_from(n.get()).ok())
        })
        .unwrap_or(1)
}

/// The PID limit as kubelet counts it: the lower of `pid_max` and `threads-max`.
pub fn pid_max() -> Option<u64> {
    let number = |path: &str| read(path)?.trim().parse::<u64>().ok();
    match (number("/proc/sys/kernel/pid_max"), number("/proc/sys/kernel/threads-max")) {
        (Some(pid_max), Some(threads_max)) => Some(pid_max.min(threads_max)),
        (Some(one), None) | (None, Some(one)) => Some(one),
        (None, None) => None,
    }
}

/// CPUs, memory and PIDs (not the filesystem: the caller knows which one is nodefs).
pub fn capacity() -> Capacity {
    Capacity {
        cpu_milli: u64::from(cpus()) * 1000,
        memory: read("/proc/meminfo").and_then(|text| machine::meminfo(&text)).map(|m| m.total),
        ephemeral_storage: None,
        pids: pid_max(),
    }
}
