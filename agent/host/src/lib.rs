//! What the agent reads about its host from the kernel, below the agent and the runtime:
//! the agent's sources, BPF, audit and metrics, and `outpost-runtime`, may all import it;
//! it imports nothing of Outpost's but `outpost-core`.
//!
//! [`Host`] is the seam, as youki's `Syscall` is its runtime's: the `/proc` files, the
//! cgroupfs files and the mount table the agent's components read, and the calls whose
//! logic is tested without root, behind one trait. [`Kernel`] is the real one;
//! [`Recording`] (tests, and other crates' tests through the `test-util` feature) answers
//! from a table the test fills and records what it was asked and told to do.

pub mod address;
pub mod allocator;
pub mod capacity;
pub mod code_pages;
mod kernel;
pub mod netlink;
pub mod proc;
pub mod reactor;
#[cfg(any(test, feature = "test-util"))]
mod recording;

use std::io;
use std::path::{Path, PathBuf};

pub use self::kernel::Kernel;
pub use self::proc::{Mount, Namespace, Pid};
#[cfg(any(test, feature = "test-util"))]
pub use self::recording::{Call, Recording};

/// The host's kernel as the agent's components see it, in the kernel's own names: the
/// `proc_pid_*` readers are `/proc/<pid>/...` (proc(5)), `proc` the system-wide files
/// under `/proc`. A component holds one (`Arc<dyn Host>`) or is handed one (`&dyn Host`).
pub trait Host: std::fmt::Debug + Send + Sync {
    /// `/proc/<file>`, a system-wide file: `meminfo`, `stat`, `vmstat`, `loadavg`,
    /// `net/unix`, `sys/kernel/hostname`, ...
    fn proc(&self, file: &str) -> io::Result<String>;

    /// `/proc/<pid>/<file>`: `stat`, `status`, `cgroup`, `mounts`, `net/dev`, `cmdline`,
    /// `environ`, ...
    fn proc_pid(&self, pid: Pid, file: &str) -> io::Result<Vec<u8>>;

    /// Where `/proc/<pid>/<link>` leads: `cwd`, `exe`, `fd/<n>`.
    fn proc_pid_link(&self, pid: Pid, link: &str) -> io::Result<PathBuf>;

    /// The descriptors process `pid` has open (`/proc/<pid>/fd`).
    fn proc_pid_fds(&self, pid: Pid) -> io::Result<Vec<u32>>;

    /// The namespace of `kind` (`net`, `pid`, ...) process `pid` is in
    /// (`/proc/<pid>/ns/<kind>`).
    fn proc_pid_ns(&self, pid: Pid, kind: &str) -> io::Result<Namespace>;

    /// The processes (the numeric entries of `/proc`).
    fn proc_pids(&self) -> io::Result<Vec<u32>>;

    /// Whether `dir` is a cgroup (a directory of a mounted cgroupfs).
    fn cgroup_exists(&self, dir: &Path) -> bool;

    /// A cgroup's file, `<dir>/<file>`: `memory.stat`, `cpu.stat`, `cgroup.procs`, ...
    fn cgroup_file(&self, dir: &Path, file: &str) -> io::Result<String>;

    /// This process's mounts (`/proc/self/mountinfo`).
    fn mountinfo(&self) -> io::Result<Vec<Mount>>;

    /// `lchown(2)`: gives `path` (a symbolic link itself, not where it leads) to `uid`
    /// and `gid` (`None`: unchanged).
    fn lchown(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> io::Result<()>;

    /// `/proc/<pid>/<file>` as text (an error if it is not UTF-8).
    fn proc_pid_text(&self, pid: Pid, file: &str) -> io::Result<String> {
        String::from_utf8(self.proc_pid(pid, file)?)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

/// Where the kernel says whether AppArmor is enabled (`Y`).
const APPARMOR_ENABLED: &str = "/sys/module/apparmor/parameters/enabled";

/// Whether the host's kernel has AppArmor enabled, as runc and kubelet check it.
pub fn apparmor_enabled() -> bool {
    apparmor_enabled_in(std::path::Path::new(APPARMOR_ENABLED))
}

fn apparmor_enabled_in(parameter: &std::path::Path) -> bool {
    std::fs::read_to_string(parameter).is_ok_and(|value| value.trim_start().starts_with('Y'))
}

/// selinuxfs's mode file: present (enforcing `1` or permissive `0`) only where the kernel
/// has SELinux enabled and its filesystem is mounted.
const SELINUX_ENFORCE: &str = "/sys/fs/selinux/enforce";

/// Whether the host has SELinux enabled (enforcing or permissive), as go-selinux decides
/// for containerd's CRI: labels are applied only then.
pub fn selinux_enabled() -> bool {
    selinux_enabled_in(std::path::Path::new(SELINUX_ENFORCE))
}

fn selinux_enabled_in(enforce: &std::path::Path) -> bool {
    std::fs::read_to_string(enforce).is_ok_and(|mode| matches!(mode.trim(), "0" | "1"))
}

/// The executable `name` on `PATH`, as a shell would find it.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    in_search_path(name, &std::env::var_os("PATH")?)
}

/// The first executable file `name` in the directories of `path` (a `PATH` value, such as
/// another process's), as a shell would find it.
pub fn in_search_path(name: &str, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path).map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_executable_of_its_name_in_a_search_path_is_found() {
        use std::os::unix::fs::PermissionsExt;
        let name = "containerd-shim-runc-v2";
        let dirs = tempfile::tempdir().unwrap();
        let (first, second) = (dirs.path().join("a"), dirs.path().join("b"));
        for dir in [&first, &second] {
            std::fs::create_dir(dir).unwrap();
        }
        // Not executable: skipped, as a shell's lookup would.
        std::fs::write(first.join(name), "").unwrap();
        std::fs::write(second.join(name), "").unwrap();
        std::fs::set_permissions(second.join(name), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let path = std::env::join_paths([&first, &second]).unwrap();
        assert_eq!(super::in_search_path(name, &path), Some(second.join(name)));
    }

    #[test]
    fn the_kernel_answers_for_this_process() {
        use super::{Host, Kernel, Pid};
        let own = Pid::Id(std::process::id());
        let status = Kernel.proc_pid_text(Pid::Own, "status").unwrap();
        assert!(status.contains("Threads:"), "{status}");
        assert!(Kernel.proc_pids().unwrap().contains(&std::process::id()));
        assert!(!Kernel.proc_pid_fds(own).unwrap().is_empty());
        assert_eq!(
            Kernel.proc_pid_ns(Pid::Own, "net").unwrap(),
            Kernel.proc_pid_ns(own, "net").unwrap()
        );
        assert!(Kernel.proc_pid_link(own, "cwd").unwrap().is_absolute());
        assert!(Kernel.proc("meminfo").unwrap().contains("MemTotal:"));
        assert!(
            Kernel.mountinfo().unwrap().iter().any(|m| m.mount_point == std::path::Path::new("/"))
        );
        assert!(!Kernel.cgroup_exists(std::path::Path::new("/proc/not-a-cgroup")));
    }

    #[test]
    fn apparmor_enabled_reads_the_kernel_parameter() {
        let dir = tempfile::tempdir().unwrap();
        let parameter = dir.path().join("enabled");
        assert!(!super::apparmor_enabled_in(&parameter), "absent: not enabled");
        std::fs::write(&parameter, "Y\n").unwrap();
        assert!(super::apparmor_enabled_in(&parameter));
        std::fs::write(&parameter, "N\n").unwrap();
        assert!(!super::apparmor_enabled_in(&parameter));
    }

    #[test]
    fn selinux_enabled_reads_selinuxfs_mode() {
        let dir = tempfile::tempdir().unwrap();
        let enforce = dir.path().join("enforce");
        assert!(!super::selinux_enabled_in(&enforce), "no selinuxfs: disabled");
        std::fs::write(&enforce, "1").unwrap();
        assert!(super::selinux_enabled_in(&enforce), "enforcing");
        std::fs::write(&enforce, "0").unwrap();
        assert!(super::selinux_enabled_in(&enforce), "permissive is enabled too");
    }
}
