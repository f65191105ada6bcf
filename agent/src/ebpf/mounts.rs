//! The filesystems the BPF side needs: tracefs (tracepoint attach), bpffs (the pinned
//! traffic map) and a cgroup2 hierarchy (the `cgroup_skb` programs attach to the pods
//! cgroup `<cgroup-root>/kubepods` in it; runc, cgroupfs driver, puts containers at
//! `<cgroup2><cgroup-root>/kubepods[/burstable|/besteffort]/pod<uid>/<container id>`).
//! Mounted if absent. Finding them is a pure reading of `/proc/self/mountinfo`
//! ([`proc::mounts`]).

use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};

use crate::host::proc::{self, Mount};

pub const TRACEFS: &str = "/sys/kernel/tracing";
pub const BPFFS: &str = "/sys/fs/bpf";
/// Where a cgroup2 hierarchy is mounted when there is none (on a hybrid host's tmpfs).
pub const UNIFIED: &str = "/sys/fs/cgroup/unified";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read /proc/self/mountinfo")]
    MountInfo(#[source] io::Error),
    #[error("cannot mount {fstype} at {path}; mount it by hand (mount -t {fstype} none {path})")]
    Mount {
        fstype: &'static str,
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error(
        "no cgroup2 hierarchy is mounted and /sys/fs/cgroup is not a tmpfs to mount one under; mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup/unified)"
    )]
    NoCgroup2,
    #[error("cannot create {}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Where the cgroup2 hierarchy is: the unified one of a hybrid host
/// (`/sys/fs/cgroup/unified`), or `/sys/fs/cgroup` itself on a pure v2 host.
pub fn cgroup2(mounts: &[Mount]) -> Option<&Path> {
    let v2: Vec<&Path> =
        mounts.iter().filter(|m| m.fstype == "cgroup2").map(|m| m.mount_point.as_path()).collect();
    v2.iter()
        .find(|p| **p == Path::new("/sys/fs/cgroup"))
        .or_else(|| v2.iter().find(|p| **p == Path::new(UNIFIED)))
        .or_else(|| v2.first())
        .copied()
}

fn mounted(mounts: &[Mount], path: &str, fstype: &str) -> bool {
    mounts.iter().any(|m| m.mount_point == Path::new(path) && m.fstype == fstype)
}

/// What the BPF side found or mounted.
#[derive(Debug, Clone)]
pub struct Mounts {
    /// The cgroup2 hierarchy's root.
    pub cgroup2: PathBuf,
    /// The pods cgroup (`<cgroup2><cgroup-root>/kubepods`), created if missing.
    pub pod_root: PathBuf,
    /// Its Burstable and BestEffort cgroups, created if missing.
    pub qos: [PathBuf; 2],
}

/// Mounts tracefs, bpffs and cgroup2 where absent, and creates the pods cgroup and its
/// QoS classes' (`pods`, `qos`: their paths below the cgroup2 root).
pub fn ensure(pods: &str, qos: [&str; 2]) -> Result<Mounts, Error> {
    let mounts = read()?;
    if !mounted(&mounts, TRACEFS, "tracefs") {
        mount_fs("tracefs", Path::new(TRACEFS))?;
        tracing::info!(path = TRACEFS, "mounted tracefs");
    }
    if !mounted(&mounts, BPFFS, "bpf") {
        mount_fs("bpf", Path::new(BPFFS))?;
        tracing::info!(path = BPFFS, "mounted the BPF filesystem");
    }
    let cgroup2 = match cgroup2(&mounts) {
        Some(path) => path.to_owned(),
        None if mounted(&mounts, "/sys/fs/cgroup", "tmpfs") => {
            std::fs::create_dir_all(UNIFIED)
                .map_err(|source| Error::Create { path: UNIFIED.into(), source })?;
            mount_fs("cgroup2", Path::new(UNIFIED))?;
            tracing::info!(path = UNIFIED, "mounted a cgroup2 hierarchy");
            PathBuf::from(UNIFIED)
        }
        None => return Err(Error::NoCgroup2),
    };
    let below = |path: &str| cgroup2.join(path.trim_start_matches('/'));
    let pod_root = below(pods);
    let qos = qos.map(below);
    for dir in std::iter::once(&pod_root).chain(&qos) {
        std::fs::create_dir_all(dir)
            .map_err(|source| Error::Create { path: dir.clone(), source })?;
    }
    Ok(Mounts { cgroup2, pod_root, qos })
}

fn read() -> Result<Vec<Mount>, Error> {
    proc::mounts().map_err(Error::MountInfo)
}

fn mount_fs(fstype: &'static str, path: &Path) -> Result<(), Error> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("none"), path, Some(fstype), flags, None::<&str>).map_err(|source| Error::Mount {
        fstype,
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
25 22 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:25 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,memory
30 22 0:28 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:12 - bpf none rw,mode=700
31 22 0:12 / /sys/kernel/tracing rw,nosuid,nodev,noexec,relatime shared:13 - tracefs tracefs rw
40 28 0:40 / /mnt/with\\040space rw - ext4 /dev/sda1 rw
garbage
";

    use crate::host::proc::parse_mountinfo;

    #[test]
    fn finds_the_unified_hierarchy_of_a_hybrid_host() {
        let mounts = parse_mountinfo(HYBRID);
        assert_eq!(mounts.len(), 7);
        assert_eq!(cgroup2(&mounts), Some(Path::new(UNIFIED)));
        assert!(mounted(&mounts, BPFFS, "bpf"));
        assert!(mounted(&mounts, TRACEFS, "tracefs"));
        assert!(mounted(&mounts, "/sys/fs/cgroup", "tmpfs"));
        assert_eq!(mounts[6].mount_point, Path::new("/mnt/with space"));
    }

    #[test]
    fn finds_a_pure_v2_host_and_none() {
        let v2 = "26 25 0:24 / /sys/fs/cgroup rw shared:10 - cgroup2 cgroup2 rw\n";
        assert_eq!(cgroup2(&parse_mountinfo(v2)), Some(Path::new("/sys/fs/cgroup")));
        let v1 = "27 25 0:25 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert_eq!(cgroup2(&parse_mountinfo(v1)), None);
    }
}
