//! A [`Host`] for tests, as youki's test `Syscall` is: it answers from a table the test
//! fills, keyed by the paths the kernel would be read at (`/proc/42/net/dev`,
//! `/sys/fs/cgroup/memory/kubepods/memory.stat`), and records every question and every
//! call, in order ([`Recording::calls`]). Nothing it is told to do is done: an `lchown`
//! is recorded, not made, so the logic around it runs without root.
//!
//! What is not in the table is not there (`NotFound`). The processes are the pids the
//! table has files, links or namespaces of; a pid's descriptors are its `fd/<n>` links;
//! a cgroup exists when the table has a file in it.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::Host;
use super::proc::{self, Mount, Namespace, Pid};

/// A host answering from a table; see the module's comment.
#[derive(Debug, Default)]
pub struct Recording {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, Vec<u8>>,
    links: BTreeMap<PathBuf, PathBuf>,
    namespaces: BTreeMap<PathBuf, Namespace>,
    mounts: Vec<Mount>,
    calls: Vec<Call>,
}

/// What a [`Recording`] was asked, or told to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// A file read: `/proc/...`, a cgroup's file.
    Read(PathBuf),
    /// A symbolic link read.
    ReadLink(PathBuf),
    /// A directory listed: `/proc`, `/proc/<pid>/fd`.
    List(PathBuf),
    /// A namespace's or a cgroup's directory looked at.
    Stat(PathBuf),
    /// The mount table read.
    Mountinfo,
    /// An `lchown`.
    Lchown { path: PathBuf, uid: Option<u32>, gid: Option<u32> },
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} is not in the table", path.display()))
}

impl Recording {
    pub fn new() -> Recording {
        Recording::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers `path` (a file of `/proc` or of a cgroup) with `contents`.
    pub fn file(&self, path: impl AsRef<Path>, contents: impl Into<Vec<u8>>) -> &Recording {
        self.state().files.insert(path.as_ref().to_owned(), contents.into());
        self
    }

    /// Answers the symbolic link `path` (`/proc/<pid>/cwd`, `/proc/<pid>/fd/<n>`) with
    /// `target`.
    pub fn link(&self, path: impl AsRef<Path>, target: impl AsRef<Path>) -> &Recording {
        self.state().links.insert(path.as_ref().to_owned(), target.as_ref().to_owned());
        self
    }

    /// Answers `/proc/<pid>/ns/<kind>` (`path`) with `namespace`.
    pub fn namespace(&self, path: impl AsRef<Path>, namespace: Namespace) -> &Recording {
        self.state().namespaces.insert(path.as_ref().to_owned(), namespace);
        self
    }

    /// Takes `path` out of the table, and every file, link and namespace under it (a file
    /// deleted, a cgroup removed).
    pub fn remove(&self, path: impl AsRef<Path>) -> &Recording {
        let path = path.as_ref();
        let mut state = self.state();
        state.files.retain(|p, _| !p.starts_with(path));
        state.links.retain(|p, _| !p.starts_with(path));
        state.namespaces.retain(|p, _| !p.starts_with(path));
        drop(state);
        self
    }

    /// Adds a mount of `fstype` on `mount_point` to the mount table.
    pub fn mount(&self, mount_point: impl AsRef<Path>, fstype: &str) -> &Recording {
        let mount_point = mount_point.as_ref().to_owned();
        let mount = Mount { mount_point, fstype: fstype.into(), shared: false, slave: false };
        self.state().mounts.push(mount);
        self
    }

    /// Everything asked and done so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// The paths read so far, in order.
    pub fn reads(&self) -> Vec<PathBuf> {
        let calls = self.calls();
        calls
            .into_iter()
            .filter_map(|call| match call {
                Call::Read(path) => Some(path),
                _ => None,
            })
            .collect()
    }

    /// The `lchown`s so far: (path, uid, gid), in order.
    pub fn lchowns(&self) -> Vec<(PathBuf, Option<u32>, Option<u32>)> {
        let calls = self.calls();
        calls
            .into_iter()
            .filter_map(|call| match call {
                Call::Lchown { path, uid, gid } => Some((path, uid, gid)),
                _ => None,
            })
            .collect()
    }

    fn read(&self, path: PathBuf) -> io::Result<Vec<u8>> {
        let mut state = self.state();
        state.calls.push(Call::Read(path.clone()));
        state.files.get(&path).cloned().ok_or_else(|| not_found(&path))
    }

    /// Whether the table has anything of process `pid`.
    fn has_pid(state: &State, pid: Pid) -> bool {
        let dir = pid.path("");
        let under = |path: &PathBuf| path.starts_with(&dir);
        state.files.keys().any(under)
            || state.links.keys().any(under)
            || state.namespaces.keys().any(under)
    }
}

impl Host for Recording {
    fn proc(&self, file: &str) -> io::Result<String> {
        let path = proc::system_path(file);
        String::from_utf8(self.read(path)?)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn proc_pid(&self, pid: Pid, file: &str) -> io::Result<Vec<u8>> {
        self.read(pid.path(file))
    }

    fn proc_pid_link(&self, pid: Pid, link: &str) -> io::Result<PathBuf> {
        let path = pid.path(link);
        let mut state = self.state();
        state.calls.push(Call::ReadLink(path.clone()));
        state.links.get(&path).cloned().ok_or_else(|| not_found(&path))
    }

    fn proc_pid_fds(&self, pid: Pid) -> io::Result<Vec<u32>> {
        let dir = pid.path("fd");
        let mut state = self.state();
        state.calls.push(Call::List(dir.clone()));
        if !Recording::has_pid(&state, pid) {
            return Err(not_found(&dir));
        }
        let fds = state
            .links
            .keys()
            .filter_map(|path| path.strip_prefix(&dir).ok()?.to_str()?.parse::<u32>().ok());
        Ok(fds.collect())
    }

    fn proc_pid_ns(&self, pid: Pid, kind: &str) -> io::Result<Namespace> {
        let path = pid.path(&format!("ns/{kind}"));
        let mut state = self.state();
        state.calls.push(Call::Stat(path.clone()));
        state.namespaces.get(&path).copied().ok_or_else(|| not_found(&path))
    }

    fn proc_pids(&self) -> io::Result<Vec<u32>> {
        let mut state = self.state();
        state.calls.push(Call::List(PathBuf::from("/proc")));
        let paths = state.files.keys().chain(state.links.keys()).chain(state.namespaces.keys());
        let pids: BTreeSet<u32> = paths
            .filter_map(|path| {
                path.strip_prefix("/proc").ok()?.iter().next()?.to_str()?.parse().ok()
            })
            .collect();
        Ok(pids.into_iter().collect())
    }

    fn cgroup_exists(&self, dir: &Path) -> bool {
        let mut state = self.state();
        state.calls.push(Call::Stat(dir.to_owned()));
        state.files.keys().any(|path| path.starts_with(dir) && path != dir)
    }

    fn cgroup_file(&self, dir: &Path, file: &str) -> io::Result<String> {
        String::from_utf8(self.read(dir.join(file))?)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn mountinfo(&self) -> io::Result<Vec<Mount>> {
        let mut state = self.state();
        state.calls.push(Call::Mountinfo);
        Ok(state.mounts.clone())
    }

    fn lchown(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        self.state().calls.push(Call::Lchown { path: path.to_owned(), uid, gid });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_from_its_table_and_records_what_was_asked() {
        let host = Recording::new();
        host.file("/proc/meminfo", "MemTotal: 1 kB\n")
            .file("/proc/42/stat", "42 (sh) S")
            .link("/proc/42/fd/3", "socket:[7]")
            .link("/proc/42/fd/10", "/dev/null")
            .namespace("/proc/7/ns/pid", Namespace { dev: 4, ino: 99 })
            .file("/sys/fs/cgroup/kubepods/pod1/memory.current", "4096\n");
        assert_eq!(host.proc("meminfo").unwrap(), "MemTotal: 1 kB\n");
        assert_eq!(host.proc_pid_text(Pid::Id(42), "stat").unwrap(), "42 (sh) S");
        let gone = host.proc_pid(Pid::Id(43), "stat").unwrap_err();
        assert_eq!(gone.kind(), io::ErrorKind::NotFound);
        assert_eq!(host.proc_pids().unwrap(), [7, 42]);
        let mut fds = host.proc_pid_fds(Pid::Id(42)).unwrap();
        fds.sort_unstable();
        assert_eq!(fds, [3, 10]);
        assert!(host.proc_pid_fds(Pid::Id(5)).is_err(), "no such process");
        assert_eq!(host.proc_pid_link(Pid::Id(42), "fd/3").unwrap(), Path::new("socket:[7]"));
        assert_eq!(host.proc_pid_ns(Pid::Id(7), "pid").unwrap(), Namespace { dev: 4, ino: 99 });
        let pod = Path::new("/sys/fs/cgroup/kubepods/pod1");
        assert!(host.cgroup_exists(pod));
        host.remove("/proc/42");
        assert_eq!(host.proc_pids().unwrap(), [7], "gone with its files");
        assert!(host.cgroup_exists(Path::new("/sys/fs/cgroup")));
        assert!(!host.cgroup_exists(Path::new("/sys/fs/cgroup/kubepods/pod2")));
        assert_eq!(host.cgroup_file(pod, "memory.current").unwrap(), "4096\n");
        assert_eq!(
            host.reads(),
            [
                PathBuf::from("/proc/meminfo"),
                PathBuf::from("/proc/42/stat"),
                PathBuf::from("/proc/43/stat"),
                PathBuf::from("/sys/fs/cgroup/kubepods/pod1/memory.current"),
            ]
        );
    }

    #[test]
    fn records_an_lchown_without_making_it() {
        let host = Recording::new();
        let dir = tempfile::tempdir().unwrap();
        host.lchown(dir.path(), None, Some(4242)).unwrap();
        assert_eq!(host.lchowns(), [(dir.path().to_owned(), None, Some(4242))]);
        use std::os::unix::fs::MetadataExt;
        assert_ne!(std::fs::metadata(dir.path()).unwrap().gid(), 4242);
    }

    #[test]
    fn the_mount_table_is_the_tests() {
        let host = Recording::new();
        assert_eq!(host.mountinfo().unwrap(), []);
        host.mount("/run/pod/volume", "tmpfs");
        let mounts = host.mountinfo().unwrap();
        assert_eq!(mounts[0].mount_point, Path::new("/run/pod/volume"));
        assert_eq!(host.calls(), [Call::Mountinfo, Call::Mountinfo]);
    }
}
