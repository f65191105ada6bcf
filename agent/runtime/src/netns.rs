//! A pod's shared namespaces (network, IPC, UTS), made by the agent since Outpost has no
//! pause container to hold them.
//!
//! As CNI's `ns` package and `ip netns` do, each namespace is created by `unshare` in a
//! short-lived thread of its own and kept alive by bind-mounting
//! `/proc/thread-self/ns/<kind>` onto an empty file; the thread then exits and the mount
//! alone holds the namespace. The containers join it by path (OCI `namespaces[].path`).
//!
//! The directory holding the files is bind-mounted onto itself and made a shared mount
//! (as `ip netns` does with `/run/netns`): the mount namespaces that runc clones for the
//! containers then receive the unmounts of [`PodNamespaces::remove`] instead of keeping
//! copies that would hold the namespaces alive.
//!
//! The pid namespace of a pod with `shareProcessNamespace` needs a live pid 1 besides the
//! bind mount: see [`pid`].
//!
//! Everything here blocks (system calls, a thread join): call it from `spawn_blocking`;
//! except [`dial`], which connects from inside a pod's network namespace without blocking.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::statfs::{NSFS_MAGIC, statfs};
use outpost_host::{Host, Pid};

pub mod dial;
pub mod pid;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating the pod namespace directory {}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "making {} a shared mount (bind-mounting it onto itself): the agent needs \
         CAP_SYS_ADMIN in the host's mount namespace",
        dir.display()
    )]
    ShareDir {
        dir: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("creating the mount point {} for a pod namespace", file.display())]
    CreateFile {
        file: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("checking whether {} holds a namespace", file.display())]
    Inspect {
        file: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("starting the thread that creates the namespaces in {}", dir.display())]
    Thread {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the thread creating the namespaces in {} panicked", dir.display())]
    ThreadPanicked { dir: PathBuf },
    #[error("creating new {kinds} namespaces (unshare): the agent needs CAP_SYS_ADMIN")]
    Unshare {
        kinds: String,
        #[source]
        source: Errno,
    },
    #[error("bringing lo up in the pod's new network namespace")]
    Loopback {
        #[source]
        source: Errno,
    },
    #[error("bind-mounting the new {} namespace onto {}", kind.name(), file.display())]
    Mount {
        kind: Kind,
        file: PathBuf,
        #[source]
        source: Errno,
    },
    #[error(
        "starting {} {} as the pod's pid 1 (shareProcessNamespace)",
        exe.display(),
        pid::INIT_SUBCOMMAND
    )]
    SpawnInit {
        exe: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("bind-mounting the pod's new pid namespace onto {}", file.display())]
    MountPid {
        file: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("recording the pod's init in {}", file.display())]
    WritePid {
        file: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("reading the pod's init from {}", file.display())]
    ReadPid {
        file: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("unmounting {}", path.display())]
    Unmount {
        path: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("deleting {}", path.display())]
    Delete {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A kind of namespace a pod's containers share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Network,
    Ipc,
    Uts,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Network, Kind::Ipc, Kind::Uts];

    /// The name in `/proc/<pid>/ns/`, also the file name in the pod's directory.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Network => "net",
            Kind::Ipc => "ipc",
            Kind::Uts => "uts",
        }
    }

    fn clone_flag(self) -> CloneFlags {
        match self {
            Kind::Network => CloneFlags::CLONE_NEWNET,
            Kind::Ipc => CloneFlags::CLONE_NEWIPC,
            Kind::Uts => CloneFlags::CLONE_NEWUTS,
        }
    }
}

/// Which of the host's namespaces a pod uses instead of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sharing {
    /// `hostNetwork`; like the kubelet, this also means the host's UTS namespace.
    pub host_network: bool,
    /// `hostIPC`.
    pub host_ipc: bool,
}

impl Sharing {
    /// The kinds the pod gets a namespace of its own for.
    pub fn own_kinds(self) -> Vec<Kind> {
        Kind::ALL
            .into_iter()
            .filter(|kind| match kind {
                Kind::Network | Kind::Uts => !self.host_network,
                Kind::Ipc => !self.host_ipc,
            })
            .collect()
    }
}

/// The file holding the network namespace of a pod whose namespaces are under `dir`
/// (what [`PodNamespaces::create`] makes there).
pub fn network_file(dir: &Path) -> PathBuf {
    dir.join(Kind::Network.name())
}

/// The files holding a pod's namespaces; `None` means the host's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodNamespaces {
    pub network: Option<PathBuf>,
    pub ipc: Option<PathBuf>,
    pub uts: Option<PathBuf>,
}

impl PodNamespaces {
    /// Creates the pod's own namespaces under `dir` (e.g. `/run/outpost/pods/<uid>/ns`).
    /// Idempotent: a namespace already mounted there (before an agent restart) is kept.
    pub fn create(dir: &Path, sharing: Sharing) -> Result<PodNamespaces> {
        let kinds = sharing.own_kinds();
        let mut namespaces = PodNamespaces::default();
        if kinds.is_empty() {
            return Ok(namespaces);
        }
        fs::create_dir_all(dir)
            .map_err(|source| Error::CreateDir { dir: dir.to_path_buf(), source })?;
        share_dir(dir)?;
        let mut missing = Vec::new();
        for &kind in &kinds {
            let file = dir.join(kind.name());
            if !holds_namespace(&file)? {
                missing.push((kind, file.clone()));
            }
            match kind {
                Kind::Network => namespaces.network = Some(file),
                Kind::Ipc => namespaces.ipc = Some(file),
                Kind::Uts => namespaces.uts = Some(file),
            }
        }
        if !missing.is_empty() {
            make_namespaces(dir, missing)?;
        }
        Ok(namespaces)
    }

    /// Unmounts (lazily) and deletes the namespace files under `dir` (and stops the pid
    /// namespace's init, [`pid::remove`], found through `host`), then `dir` itself.
    /// Idempotent; a missing `dir` is fine. The namespaces end when nothing else holds
    /// them (a container still running in one keeps it).
    pub fn remove(host: &dyn Host, dir: &Path) -> Result<()> {
        pid::remove(host, dir)?;
        for kind in Kind::ALL {
            let file = dir.join(kind.name());
            unmount_all(&file)?;
            delete(&file, fs::remove_file(&file))?;
        }
        unmount_all(dir)?;
        delete(dir, fs::remove_dir(dir))
    }
}

/// Makes `dir` a shared mount point, bind-mounting it onto itself first if it is not a
/// mount point yet (`mount --make-rshared` fails with EINVAL on a plain directory).
fn share_dir(dir: &Path) -> Result<()> {
    let make_shared = || {
        mount(None::<&str>, dir, None::<&str>, MsFlags::MS_SHARED | MsFlags::MS_REC, None::<&str>)
    };
    let error = |source| Error::ShareDir { dir: dir.to_path_buf(), source };
    match make_shared() {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL) => {
            mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
                .map_err(error)?;
            make_shared().map_err(error)
        }
        Err(source) => Err(error(source)),
    }
}

/// Whether `file` is a mounted namespace (an nsfs inode); false if it is missing.
fn holds_namespace(file: &Path) -> Result<bool> {
    match statfs(file) {
        Ok(stat) => Ok(stat.filesystem_type() == NSFS_MAGIC),
        Err(Errno::ENOENT) => Ok(false),
        Err(source) => Err(Error::Inspect { file: file.to_path_buf(), source }),
    }
}

/// Creates one namespace of each kind in `missing` and mounts it onto its file, from a
/// dedicated thread so no other thread of the agent ever moves into them.
fn make_namespaces(dir: &Path, missing: Vec<(Kind, PathBuf)>) -> Result<()> {
    for (_, file) in &missing {
        fs::File::create(file)
            .map_err(|source| Error::CreateFile { file: file.clone(), source })?;
    }
    let thread = std::thread::Builder::new()
        .name("outpost-pod-ns".to_owned())
        .spawn(move || -> Result<()> {
            let flags =
                missing.iter().fold(CloneFlags::empty(), |flags, (kind, _)| flags | kind.clone_flag());
            unshare(flags).map_err(|source| Error::Unshare {
                kinds: missing.iter().map(|(kind, _)| kind.name()).collect::<Vec<_>>().join("+"),
                source,
            })?;
            if missing.iter().any(|(kind, _)| *kind == Kind::Network) {
                loopback_up().map_err(|source| Error::Loopback { source })?;
            }
            for (kind, file) in missing {
                let own = Pid::OwnThread.path(&format!("ns/{}", kind.name()));
                mount(Some(&own), &file, None::<&str>, MsFlags::MS_BIND, None::<&str>)
                    .map_err(|source| Error::Mount { kind, file: file.clone(), source })?;
                tracing::debug!(kind = kind.name(), file = %file.display(), "created pod namespace");
            }
            Ok(())
        })
        .map_err(|source| Error::Thread { dir: dir.to_path_buf(), source })?;
    thread.join().map_err(|_| Error::ThreadPanicked { dir: dir.to_path_buf() })?
}

/// Brings `lo` up in the calling thread's network namespace, as CNI's `loopback` plugin
/// would (the kernel then gives it 127.0.0.1/8 and ::1): one plugin process less on every
/// pod start.
#[allow(unsafe_code)]
fn loopback_up() -> nix::Result<()> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
    use std::os::fd::AsRawFd as _;
    let socket = socket(AddressFamily::Inet, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None)?;
    // SAFETY: `ifreq` is plain data, for which all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in request.ifr_name.iter_mut().zip(c"lo".to_bytes_with_nul()) {
        *to = libc::c_char::from_ne_bytes([*from]);
    }
    // SAFETY: SIOCGIFFLAGS reads the flags of the interface `request` names into its
    // `ifru_flags`, and SIOCSIFFLAGS sets them from it; `request` outlives both calls.
    unsafe {
        Errno::result(libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request))?;
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        Errno::result(libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request))?;
    }
    Ok(())
}

/// Lazily unmounts everything mounted on `path` (a racing create may have stacked two
/// mounts); a path that is missing or not a mount point is fine.
fn unmount_all(path: &Path) -> Result<()> {
    loop {
        match umount2(path, MntFlags::MNT_DETACH) {
            Ok(()) => continue,
            Err(Errno::EINVAL | Errno::ENOENT) => return Ok(()),
            Err(source) => return Err(Error::Unmount { path: path.to_path_buf(), source }),
        }
    }
}

fn delete(path: &Path, result: io::Result<()>) -> Result<()> {
    match result {
        Err(error) if error.kind() != io::ErrorKind::NotFound => {
            Err(Error::Delete { path: path.to_path_buf(), source: error })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
