//! Reads the eviction signals (blocking: a few small files and two `statvfs`), as kubelet
//! computes them:
//!
//! - `memory.available`: `MemTotal` less the root memory cgroup's working set (usage
//!   less inactive file cache); on cgroup v2, whose root has no usage file, `MemTotal`
//!   less `MemAvailable`.
//! - `allocatableMemory.available`: the pods cgroup's memory limit less its working set,
//!   when the pods cgroup exists and is limited (node allocatable enforced on pods).
//! - `nodefs.*`: the filesystem of the state dir (emptyDir volumes, pod files); the pod
//!   logs are there too unless `--pod-log-dir` is elsewhere.
//! - `imagefs.*`: the filesystem of containerd's snapshotter root (images, writable
//!   layers).
//! - `pid.available`: the lower of `pid_max` and `threads-max`, less the tasks running.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use outpost_core::eviction::{Memcg, Observation, Observations, Reading, Signal};
use outpost_core::node_status::machine;

use crate::host::Host;
use crate::runtime::cgroups::Hierarchy;

/// Where the signals are read.
#[derive(Debug, Clone)]
pub struct Sources {
    pub hierarchy: Hierarchy,
    /// The pods cgroup (`Layout::pods()`), as a path below the hierarchy's root.
    pub pods_cgroup: String,
    /// The state dir (nodefs).
    pub nodefs: PathBuf,
    /// containerd's snapshotter root (imagefs), once known.
    pub imagefs: Option<PathBuf>,
    /// What `/proc` and the cgroups are read through.
    pub host: Arc<dyn Host>,
}

/// cgroup v1's "no limit" (`PAGE_COUNTER_MAX` pages, rounded): anything this large is
/// unlimited.
const UNLIMITED: u64 = 1 << 62;

/// Reads every signal it can; one that cannot be read is left out.
pub fn read(sources: &Sources) -> Reading {
    let mut reading = Reading::default();
    let meminfo = sources.host.proc("meminfo").ok().and_then(|text| machine::meminfo(&text));
    if let Some(mem) = meminfo {
        let root = sources.hierarchy.usage(sources.host.as_ref(), "/").ok();
        let root_usage = root.and_then(|u| Some((u.memory_bytes?, u.working_set_bytes?)));
        let working_set = match root_usage {
            Some((usage, working_set)) => {
                reading.root = Some(Memcg {
                    usage,
                    inactive: usage.saturating_sub(working_set),
                    capacity: mem.total,
                });
                working_set
            }
            None => mem.total.saturating_sub(mem.available),
        };
        let available = signed(mem.total) - signed(working_set);
        reading
            .observations
            .set(Signal::MemoryAvailable, Observation { available, capacity: signed(mem.total) });
    }
    if let Some(pods) = pods_cgroup(sources) {
        let available = signed(pods.capacity) - signed(pods.usage - pods.inactive);
        reading.observations.set(
            Signal::AllocatableMemoryAvailable,
            Observation { available, capacity: signed(pods.capacity) },
        );
        reading.pods = Some(pods);
    }
    for (signal, observation) in disk(sources).iter() {
        reading.observations.set(signal, observation);
    }
    if let Some(pids) = pids(sources.host.as_ref()) {
        reading.observations.set(Signal::PidAvailable, pids);
    }
    reading
}

/// The nodefs and imagefs signals alone.
pub fn disk(sources: &Sources) -> Observations {
    let mut observations = Observations::new();
    if let Some((bytes, inodes)) = filesystem(&sources.nodefs) {
        observations.set(Signal::NodeFsAvailable, bytes);
        observations.set(Signal::NodeFsInodesFree, inodes);
    }
    if let Some((bytes, inodes)) = sources.imagefs.as_deref().and_then(filesystem) {
        observations.set(Signal::ImageFsAvailable, bytes);
        observations.set(Signal::ImageFsInodesFree, inodes);
    }
    observations
}

fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The pods cgroup's usage and limit (`None`: no such cgroup, or not limited).
fn pods_cgroup(sources: &Sources) -> Option<Memcg> {
    let dir = sources.hierarchy.dir("memory", &sources.pods_cgroup);
    let limit_file = if sources.hierarchy.is_v2() { "memory.max" } else { "memory.limit_in_bytes" };
    let limit: u64 = sources.host.cgroup_file(&dir, limit_file).ok()?.trim().parse().ok()?;
    if limit >= UNLIMITED {
        return None;
    }
    let usage = sources.hierarchy.usage(sources.host.as_ref(), &sources.pods_cgroup).ok()?;
    let (used, working_set) = (usage.memory_bytes?, usage.working_set_bytes?);
    Some(Memcg { usage: used, inactive: used.saturating_sub(working_set), capacity: limit })
}

/// The filesystem holding `path`: free bytes for unprivileged users of the size, and
/// free inodes of the total.
pub fn filesystem(path: &Path) -> Option<(Observation, Observation)> {
    let fs = crate::host::capacity::filesystem(path)?;
    let bytes = Observation { available: signed(fs.available), capacity: signed(fs.capacity) };
    let inodes = Observation { available: signed(fs.inodes_free), capacity: signed(fs.inodes) };
    Some((bytes, inodes))
}

/// PIDs as kubelet counts them: the limit (the lower of `pid_max` and `threads-max`) less
/// the tasks `/proc/loadavg` counts.
fn pids(host: &dyn Host) -> Option<Observation> {
    let max = crate::host::capacity::pid_max(host)?;
    let running = machine::loadavg_tasks(&host.proc("loadavg").ok()?)?;
    Some(Observation { available: signed(max) - signed(running), capacity: signed(max) })
}
