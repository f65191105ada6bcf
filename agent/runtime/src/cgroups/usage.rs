//! Where this machine mounts the cgroup controllers, and what a cgroup uses, read from
//! its files when asked (no sampling): CPU time, memory usage and working set (usage
//! less the inactive file cache, as cAdvisor and kubelet's eviction count it), PIDs.

use std::io;
use std::path::{Path, PathBuf};

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
}

impl Hierarchy {
    /// This machine's: v2 when the root is a unified mount with its controllers, else v1.
    pub fn detect() -> Hierarchy {
        Hierarchy::at(Path::new(CGROUP_ROOT))
    }

    /// The hierarchy mounted at `root`.
    pub fn at(root: &Path) -> Hierarchy {
        if root.join("cgroup.controllers").exists() {
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

    /// What cgroup `path` uses now. A cgroup that does not exist is an error
    /// (`NotFound`); a file missing inside one that does is a `None` figure.
    pub fn usage(&self, path: &str) -> io::Result<Usage> {
        let memory_dir = self.dir("memory", path);
        if !memory_dir.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no cgroup {}", memory_dir.display()),
            ));
        }
        let (memory_file, inactive_key) = match self {
            Hierarchy::V1 { .. } => ("memory.usage_in_bytes", "total_inactive_file"),
            Hierarchy::V2 { .. } => ("memory.current", "inactive_file"),
        };
        let memory_bytes = read_u64(&memory_dir.join(memory_file));
        let inactive = read_stat(&memory_dir.join("memory.stat"), inactive_key);
        let working_set_bytes = memory_bytes.map(|m| m.saturating_sub(inactive.unwrap_or(0)));
        let cpu_ns = match self {
            Hierarchy::V1 { .. } => read_u64(&self.dir("cpuacct", path).join("cpuacct.usage")),
            Hierarchy::V2 { .. } => {
                read_stat(&self.dir("cpu", path).join("cpu.stat"), "usage_usec")
                    .map(|usec| usec.saturating_mul(1000))
            }
        };
        let pids = read_u64(&self.dir("pids", path).join("pids.current"));
        Ok(Usage { cpu_ns, memory_bytes, working_set_bytes, pids })
    }
}

fn read_u64(file: &Path) -> Option<u64> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// The value of `key` in a flat-keyed file (`memory.stat`, `cpu.stat`).
fn read_stat(file: &Path, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: PathBuf, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn v1_usage_reads_each_controller() {
        let root = tempfile::tempdir().unwrap();
        let h = Hierarchy::at(root.path());
        assert!(!h.is_v2());
        let cg = "/kubepods/besteffort/podu";
        write(h.dir("memory", cg).join("memory.usage_in_bytes"), "1000\n");
        write(h.dir("memory", cg).join("memory.stat"), "cache 5\ntotal_inactive_file 300\n");
        write(h.dir("cpuacct", cg).join("cpuacct.usage"), "123456789\n");
        write(h.dir("pids", cg).join("pids.current"), "3\n");
        let usage = h.usage(cg).unwrap();
        assert_eq!(
            usage,
            Usage {
                cpu_ns: Some(123_456_789),
                memory_bytes: Some(1000),
                working_set_bytes: Some(700),
                pids: Some(3),
            }
        );
        assert_eq!(h.usage("/kubepods/none").unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn v2_usage_reads_the_unified_tree() {
        let root = tempfile::tempdir().unwrap();
        write(root.path().join("cgroup.controllers"), "cpu memory pids\n");
        let h = Hierarchy::at(root.path());
        assert!(h.is_v2());
        let cg = "/kubepods/podu";
        write(h.dir("memory", cg).join("memory.current"), "4096\n");
        write(h.dir("memory", cg).join("memory.stat"), "anon 1\ninactive_file 5000\n");
        write(h.dir("cpu", cg).join("cpu.stat"), "usage_usec 7\nuser_usec 5\n");
        let usage = h.usage(cg).unwrap();
        assert_eq!(usage.cpu_ns, Some(7000));
        assert_eq!(usage.working_set_bytes, Some(0), "never below zero");
        assert_eq!(usage.pids, None);
    }
}
