//! The node's capacity as the kernel tells it: online CPUs, memory, the PID limit (what
//! the node status reports and node allocatable is enforced from), and a filesystem's
//! size and free space (nodefs, imagefs).

use std::path::Path;

use outpost_core::node_status::Capacity;
use outpost_core::node_status::machine;

use super::{Host, Kernel};

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
pub fn pid_max(host: &dyn Host) -> Option<u64> {
    let number = |file: &str| host.proc(file).ok()?.trim().parse::<u64>().ok();
    match (number("sys/kernel/pid_max"), number("sys/kernel/threads-max")) {
        (Some(pid_max), Some(threads_max)) => Some(pid_max.min(threads_max)),
        (Some(one), None) | (None, Some(one)) => Some(one),
        (None, None) => None,
    }
}

/// CPUs, memory and PIDs (not the filesystem: the caller knows which one is nodefs).
pub fn capacity() -> Capacity {
    Capacity {
        cpu_milli: u64::from(cpus()) * 1000,
        memory: Kernel
            .proc("meminfo")
            .ok()
            .and_then(|text| machine::meminfo(&text))
            .map(|m| m.total),
        ephemeral_storage: None,
        pids: pid_max(&Kernel),
    }
}

/// A filesystem's size and what is free of it: bytes (free for unprivileged users) and
/// inodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filesystem {
    pub capacity: u64,
    pub available: u64,
    pub inodes: u64,
    pub inodes_free: u64,
}

/// The filesystem holding `path` (or its nearest existing parent, before it is made).
#[allow(
    clippy::useless_conversion,
    reason = "c_ulong, fsblkcnt_t and fsfilcnt_t are 32 bits wide on some targets (armv7)"
)]
pub fn filesystem(path: &Path) -> Option<Filesystem> {
    let dir = path.ancestors().find(|dir| dir.exists())?;
    let stats = nix::sys::statvfs::statvfs(dir).ok()?;
    let fragment = u64::from(stats.fragment_size());
    Some(Filesystem {
        capacity: u64::from(stats.blocks()).saturating_mul(fragment),
        available: u64::from(stats.blocks_available()).saturating_mul(fragment),
        inodes: u64::from(stats.files()),
        inodes_free: u64::from(stats.files_free()),
    })
}
