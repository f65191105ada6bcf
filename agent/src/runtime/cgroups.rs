//! Pods' cgroups, as kubelet lays them out (Q2): one cgroup for all pods (`kubepods`
//! under `--cgroup-root`), a cgroup per QoS class under it (Guaranteed pods sit right
//! under the pods cgroup), then `pod<uid>`, then each container (runc makes the last
//! level from the container's `cgroupsPath`). [`Layout`] names them for the cgroupfs and
//! systemd drivers; [`Hierarchy`] is where this machine mounts them (cgroup v1, one tree
//! per controller, or the v2 unified tree) and reads a cgroup's usage.
//!
//! runc removes a container's own cgroup when the container is deleted, but not the
//! parents it created for it; a pod's cgroup is removed here ([`remove`]) once its
//! containers are gone, in every hierarchy: each cgroup v1 controller and the v2 one.

mod layout;
mod usage;

use std::io;
use std::path::{Path, PathBuf};

pub use self::layout::{CgroupName, Driver, Layout};
pub use self::usage::{Hierarchy, Usage};

/// Where cgroup hierarchies are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Removes the (empty) cgroup `parent` from every hierarchy under `/sys/fs/cgroup`.
/// Missing ones are fine; the first other failure is returned after trying them all.
pub fn remove(parent: &str) -> io::Result<()> {
    remove_under(Path::new(CGROUP_ROOT), parent)
}

fn remove_under(root: &Path, parent: &str) -> io::Result<()> {
    let relative = parent.trim_start_matches('/');
    let mut hierarchies: Vec<PathBuf> = vec![root.to_owned()];
    if let Ok(entries) = std::fs::read_dir(root) {
        hierarchies.extend(
            entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()),
        );
    }
    let mut first_error = None;
    for hierarchy in hierarchies {
        match std::fs::remove_dir(hierarchy.join(relative)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            // A plain directory under the cgroup root that is not a hierarchy.
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {}
            Err(e) => {
                first_error.get_or_insert(io::Error::new(
                    e.kind(),
                    format!("removing cgroup {}: {e}", hierarchy.join(relative).display()),
                ));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_the_parent_in_every_hierarchy_and_ignores_missing_ones() {
        let root = tempfile::tempdir().unwrap();
        for h in ["memory", "cpu,cpuacct", "unified"] {
            std::fs::create_dir_all(root.path().join(h).join("outpost/podabc")).unwrap();
        }
        std::fs::create_dir_all(root.path().join("pids")).unwrap();
        remove_under(root.path(), "/outpost/podabc").unwrap();
        for h in ["memory", "cpu,cpuacct", "unified"] {
            assert!(!root.path().join(h).join("outpost/podabc").exists());
            assert!(root.path().join(h).join("outpost").exists(), "the shared parent stays");
        }
        remove_under(root.path(), "/outpost/podabc").unwrap();
    }

    #[test]
    fn a_cgroup_still_in_use_is_reported() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("memory/outpost/podabc/container")).unwrap();
        let e = remove_under(root.path(), "/outpost/podabc").unwrap_err();
        assert!(e.to_string().contains("memory/outpost/podabc"), "{e}");
    }
}
