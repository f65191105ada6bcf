//! The real [`Host`]: the kernel's files and system calls.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::Host;
use super::proc::{self, Mount, Namespace, Pid};

/// This machine's kernel.
#[derive(Debug, Clone, Copy, Default)]
pub struct Kernel;

/// The entries of `dir` whose names are numbers (pids, descriptors).
fn numbered(dir: &Path) -> io::Result<Vec<u32>> {
    Ok(fs::read_dir(dir)?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect())
}

impl Host for Kernel {
    fn proc(&self, file: &str) -> io::Result<String> {
        fs::read_to_string(proc::system_path(file))
    }

    fn proc_pid(&self, pid: Pid, file: &str) -> io::Result<Vec<u8>> {
        fs::read(pid.path(file))
    }

    fn proc_pid_link(&self, pid: Pid, link: &str) -> io::Result<PathBuf> {
        fs::read_link(pid.path(link))
    }

    fn proc_pid_fds(&self, pid: Pid) -> io::Result<Vec<u32>> {
        numbered(&pid.path("fd"))
    }

    fn proc_pid_ns(&self, pid: Pid, kind: &str) -> io::Result<Namespace> {
        Ok(Namespace::of(&fs::metadata(pid.path(&format!("ns/{kind}")))?))
    }

    fn proc_pids(&self) -> io::Result<Vec<u32>> {
        numbered(Path::new("/proc"))
    }

    fn cgroup_exists(&self, dir: &Path) -> bool {
        dir.is_dir()
    }

    fn cgroup_file(&self, dir: &Path, file: &str) -> io::Result<String> {
        fs::read_to_string(dir.join(file))
    }

    fn mountinfo(&self) -> io::Result<Vec<Mount>> {
        proc::mounts()
    }

    fn lchown(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        std::os::unix::fs::lchown(path, uid, gid)
    }
}
