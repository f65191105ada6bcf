//! Where this machine mounts the cgroup controllers, and what a cgroup uses, read from
//! its files through the [`Host`] when asked (no sampling): CPU time, memory usage and
//! working set (usage less the inactive file cache, as cAdvisor and kubelet's eviction
//! count it), RSS, page faults, swap, the memory limit, PIDs, and the processes in it.

use std::io;
use std::path::{Path, PathBuf};

use outpost_core::stats::procfs;
use outpost_host::{Host, Kernel, Pid};

use crate::spec::SwapController;

/// Where cgroup hierarchies are mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The cgroup version the controllers are on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v1 (also "hybrid": v2 mounted too, but without the controllers): one tree
    /// per controller, `<root>/<controller>/<path>`.
    V1 { root: PathBuf },
    /// cgroup v2 unified: one tree, `<root>/<path>`.
    V2 { root: PathBuf },
}

/// A cgroup's usage; a figure its files do not give is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// CPU time used, in nanoseconds.
    pub cpu_ns: Option<u64>,
    /// Memory charged, in bytes (page cache included).
    pub memory_bytes: Option<u64>,
    /// Memory charged less the inactive file cache (what the kernel cannot reclaim
    /// easily), in bytes.
    pub working_set_bytes: Option<u64>,
    /// Processes and threads.
    pub pids: Option<u64>,
    /// Anonymous memory and swap cache (`anon` on v2, `total_rss` on v1), in bytes.
    pub rss_bytes: Option<u64>,
    /// Page faults and major page faults since the cgroup was made.
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
    /// Swap in use, in bytes (v2's `memory.swap.current`; v1 counts it with memory).
    pub swap_bytes: Option<u64>,
    /// The memory limit in bytes (`None`: unlimited, or not readable).
    pub memory_limit_bytes: Option<u64>,
}

/// cgroup v1's "no limit" is `PAGE_COUNTER_MAX` pages: anything this large is unlimited.
const UNLIMITED: u64 = 1 << 62;

impl Hierarchy {
    /// This machine's: v2 when the root is a unified mount with its controllers, else v1.
    pub fn detect() -> Hierarchy {
        Hierarchy::at(Path::new(CGROUP_ROOT))
    }

    /// The hierarchy mounted at `root`.
    pub fn at(root: &Path) -> Hierarchy {
        Hierarchy::on(&Kernel, root)
    }

    /// The hierarchy mounted at `root`, as `host` shows it.
    pub fn on(host: &dyn Host, root: &Path) -> Hierarchy {
        if host.cgroup_file(root, "cgroup.controllers").is_ok() {
            Hierarchy::V2 { root: root.to_owned() }
        } else {
            Hierarchy::V1 { root: root.to_owned() }
        }
    }

    pub fn is_v2(&self) -> bool {
        matches!(self, Hierarchy::V2 { .. })
    }

    /// The directory of cgroup `path` (absolute below the root) for `controller` (`cpu`,
    /// `cpuacct`, `memory`, `pids`; ignored under v2).
    pub fn dir(&self, controller: &str, path: &str) -> PathBuf {
        let relative = path.trim_start_matches('/');
        match self {
            Hierarchy::V1 { root } => root.join(controller).join(relative),
            Hierarchy::V2 { root } => root.join(relative),
        }
    }

    /// What cgroup `path` uses now, read through `host`. A cgroup that does not exist
    /// is an error (`NotFound`); a file missing inside one that does is a `None` figure.
    pub fn usage(&self, host: &dyn Host, path: &str) -> io::Result<Usage> {
        let memory_dir = self.dir("memory", path);
        if !host.cgroup_exists(&memory_dir) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no cgroup {}", memory_dir.display()),
            ));
        }
        let (memory_file, inactive_key) = match self {
            Hierarchy::V1 { .. } => ("memory.usage_in_bytes", "total_inactive_file"),
            Hierarchy::V2 { .. } => ("memory.current", "inactive_file"),
        };
        let read_u64 = |dir: &Path, file: &str| read_u64(host, dir, file);
        let memory_bytes = read_u64(&memory_dir, memory_file);
        let stat = host.cgroup_file(&memory_dir, "memory.stat").unwrap_or_default();
        let inactive = stat_value(&stat, inactive_key);
        let working_set_bytes = memory_bytes.map(|m| m.saturating_sub(inactive.unwrap_or(0)));
        let cpu_ns = match self {
            Hierarchy::V1 { .. } => read_u64(&self.dir("cpuacct", path), "cpuacct.usage"),
            Hierarchy::V2 { .. } => host
                .cgroup_file(&self.dir("cpu", path), "cpu.stat")
                .ok()
                .and_then(|text| stat_value(&text, "usage_usec"))
                .map(|usec| usec.saturating_mul(1000)),
        };
        let pids = read_u64(&self.dir("pids", path), "pids.current");
        let (rss_key, fault_key, major_key, limit_file) = match self {
            Hierarchy::V1 { .. } => {
                ("total_rss", "total_pgfault", "total_pgmajfault", "memory.limit_in_bytes")
            }
            Hierarchy::V2 { .. } => ("anon", "pgfault", "pgmajfault", "memory.max"),
        };
        let swap_bytes = match self {
            Hierarchy::V1 { .. } => None,
            Hierarchy::V2 { .. } => read_u64(&memory_dir, "memory.swap.current"),
        };
        Ok(Usage {
            cpu_ns,
            memory_bytes,
            working_set_bytes,
            pids,
            rss_bytes: stat_value(&stat, rss_key),
            page_faults: stat_value(&stat, fault_key),
            major_page_faults: stat_value(&stat, major_key),
            swap_bytes,
            // v2 writes `max` for no limit, which does not parse: `None` too.
            memory_limit_bytes: read_u64(&memory_dir, limit_file).filter(|l| *l < UNLIMITED),
        })
    }

    /// D6: the cgroup file that limits swap, as kubelet's `swapControllerAvailable` finds
    /// it: v1's `memory.memsw.limit_in_bytes` in the memory controller's root; v2's
    /// `memory.swap.max` in the agent's own cgroup (the root has none). A kernel without
    /// swap accounting has neither.
    pub fn swap_controller(&self, host: &dyn Host) -> SwapController {
        match self {
            Hierarchy::V1 { root } => {
                let memory = root.join("memory");
                match host.cgroup_file(&memory, "memory.memsw.limit_in_bytes") {
                    Ok(_) => SwapController::MemorySwap,
                    Err(_) => SwapController::None,
                }
            }
            Hierarchy::V2 { root } => {
                let own = host.proc_pid_text(Pid::Own, "cgroup").ok();
                let Some(own) = own.as_deref().and_then(procfs::own_cgroup) else {
                    return SwapController::None;
                };
                let dir = root.join(own.trim_start_matches('/'));
                match host.cgroup_file(&dir, "memory.swap.max") {
                    Ok(_) => SwapController::SwapMax,
                    Err(_) => SwapController::None,
                }
            }
        }
    }

    /// The processes in cgroup `path` (its `cgroup.procs`; empty if it has none or is
    /// gone), read through `host`.
    pub fn processes(&self, host: &dyn Host, path: &str) -> Vec<u32> {
        let text = host.cgroup_file(&self.dir("memory", path), "cgroup.procs").unwrap_or_default();
        text.lines().filter_map(|line| line.trim().parse().ok()).collect()
    }
}

/// A cgroup's file holding one number.
fn read_u64(host: &dyn Host, dir: &Path, file: &str) -> Option<u64> {
    host.cgroup_file(dir, file).ok()?.trim().parse().ok()
}

/// The value of `key` in a flat-keyed file's text.
fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use outpost_host::Recording;

    use super::*;

    #[test]
    fn v1_usage_reads_each_controller() {
        let host = Recording::new();
        let h = Hierarchy::on(&host, Path::new(CGROUP_ROOT));
        assert!(!h.is_v2());
        let cg = "/kubepods/besteffort/podu";
        let (memory, cpuacct, pids) =
            (h.dir("memory", cg), h.dir("cpuacct", cg), h.dir("pids", cg));
        host.file(memory.join("memory.usage_in_bytes"), "1000\n")
            .file(
                memory.join("memory.stat"),
                "cache 5\ntotal_inactive_file 300\ntotal_rss 600\ntotal_pgfault 9\ntotal_pgmajfault 1\n",
            )
            .file(memory.join("memory.limit_in_bytes"), "9223372036854771712\n")
            .file(memory.join("cgroup.procs"), "12\n34\n")
            .file(cpuacct.join("cpuacct.usage"), "123456789\n")
            .file(pids.join("pids.current"), "3\n");
        let usage = h.usage(&host, cg).unwrap();
        assert_eq!(
            usage,
            Usage {
                cpu_ns: Some(123_456_789),
                memory_bytes: Some(1000),
                working_set_bytes: Some(700),
                pids: Some(3),
                rss_bytes: Some(600),
                page_faults: Some(9),
                major_page_faults: Some(1),
                swap_bytes: None,
                memory_limit_bytes: None,
            }
        );
        assert!(host.reads().contains(&PathBuf::from(
            "/sys/fs/cgroup/memory/kubepods/besteffort/podu/memory.usage_in_bytes"
        )));
        assert_eq!(h.processes(&host, cg), vec![12, 34]);
        let gone = h.usage(&host, "/kubepods/none").unwrap_err();
        assert_eq!(gone.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn v2_usage_reads_the_unified_tree() {
        let host = Recording::new();
        host.file("/sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
        let h = Hierarchy::on(&host, Path::new(CGROUP_ROOT));
        assert!(h.is_v2());
        let cg = "/kubepods/podu";
        let dir = h.dir("memory", cg);
        assert_eq!(dir, h.dir("cpu", cg), "one tree");
        host.file(dir.join("memory.current"), "4096\n")
            .file(dir.join("memory.stat"), "anon 1\ninactive_file 5000\n")
            .file(dir.join("cpu.stat"), "usage_usec 7\nuser_usec 5\n")
            .file(dir.join("memory.max"), "8192\n")
            .file(dir.join("memory.swap.current"), "0\n");
        let usage = h.usage(&host, cg).unwrap();
        assert_eq!(usage.rss_bytes, Some(1));
        assert_eq!(usage.memory_limit_bytes, Some(8192));
        assert_eq!(usage.swap_bytes, Some(0));
        assert_eq!(usage.cpu_ns, Some(7000));
        assert_eq!(usage.working_set_bytes, Some(0), "never below zero");
        assert_eq!(usage.pids, None);
        // v2's root has no memory.current: the figures it lacks are `None`.
        let root = h.usage(&host, "/").unwrap();
        assert_eq!((root.memory_bytes, root.cpu_ns), (None, None));
    }

    #[test]
    fn d6_the_swap_controller_is_where_kubelet_looks_for_it() {
        let host = Recording::new();
        let v1 = Hierarchy::on(&host, Path::new(CGROUP_ROOT));
        assert_eq!(v1.swap_controller(&host), SwapController::None, "no swap accounting");
        host.file("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes", "9223372036854771712\n");
        assert_eq!(v1.swap_controller(&host), SwapController::MemorySwap);

        let host = Recording::new();
        host.file("/sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
        let v2 = Hierarchy::on(&host, Path::new(CGROUP_ROOT));
        assert_eq!(v2.swap_controller(&host), SwapController::None, "no /proc/self/cgroup");
        host.file("/proc/self/cgroup", "0::/system.slice/outpost.service\n");
        assert_eq!(v2.swap_controller(&host), SwapController::None, "no memory.swap.max");
        host.file("/sys/fs/cgroup/system.slice/outpost.service/memory.swap.max", "max\n");
        assert_eq!(v2.swap_controller(&host), SwapController::SwapMax);
    }

    #[test]
    fn the_kernel_reads_a_tree_where_it_is_mounted() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "memory\n").unwrap();
        let h = Hierarchy::at(root.path());
        assert!(h.is_v2());
        std::fs::create_dir(root.path().join("pod")).unwrap();
        std::fs::write(root.path().join("pod/memory.current"), "4096\n").unwrap();
        assert_eq!(h.usage(&Kernel, "/pod").unwrap().memory_bytes, Some(4096));
    }
}
