//! The kernel's notifications the eviction manager waits on instead of polling:
//!
//! - [`Threshold`]: a cgroup v1 memory usage threshold (`cgroup.event_control` with an
//!   eventfd on `memory.usage_in_bytes`): the kernel signals the eventfd when the usage
//!   crosses the value, either way. Kubelet's `kernelMemcgNotification` does the same;
//!   each one is armed again after every pass, with the inactive file cache of the
//!   moment (the threshold is on usage, the signal on working set).
//! - [`Psi`]: a PSI trigger (`/proc/pressure/memory`, or a v2 cgroup's
//!   `memory.pressure`): the kernel raises `POLLPRI` when tasks stalled on memory for
//!   longer than the trigger's share of its window. Without `CAP_SYS_RESOURCE` the
//!   kernel only takes windows in whole multiples of 2 s and stalls of 500 ms or more,
//!   so the finer trigger is tried first.
//! - [`FsWrites`]: a fanotify filesystem mark (`FAN_MARK_FILESYSTEM`, `FAN_MODIFY`) on
//!   nodefs and imagefs: a write anywhere on them makes the descriptor readable. The
//!   caller reads it at most once per [`super::DISK_CHECK_INTERVAL`], draining what
//!   queued meanwhile (the kernel merges repeated writes to one file).
//!
//! All of it is safe code over `nix` and tokio's `AsyncFd`, but for the registration of
//! the descriptors with tokio's reactor ([`sys`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::errno::Errno;
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::fanotify::{EventFFlags, Fanotify, InitFlags, MarkFlags, MaskFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A memory usage threshold on a v1 cgroup, armed once.
#[derive(Debug)]
pub struct Threshold {
    eventfd: AsyncFd<EventFd>,
    /// Kept open: the kernel watches usage through this descriptor.
    _usage: File,
}

impl Threshold {
    /// Arms a threshold at `bytes` of usage on the memory cgroup directory `dir`.
    pub fn arm(dir: &Path, bytes: u64) -> io::Result<Threshold> {
        let usage = File::open(dir.join("memory.usage_in_bytes"))?;
        let eventfd = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        let line = format!("{} {} {bytes}", eventfd.as_raw_fd(), usage.as_raw_fd());
        std::fs::write(dir.join("cgroup.event_control"), line)?;
        let eventfd = sys::register(eventfd, Interest::READABLE)?;
        Ok(Threshold { eventfd, _usage: usage })
    }

    /// Resolves when usage crossed the threshold (since it was armed or last fired).
    pub async fn crossed(&self) -> io::Result<()> {
        loop {
            let mut guard = self.eventfd.readable().await?;
            match guard.try_io(|fd| fd.get_ref().read().map_err(io::Error::from)) {
                Ok(result) => return result.map(drop),
                Err(_would_block) => continue,
            }
        }
    }
}

/// A PSI trigger.
#[derive(Debug)]
pub struct Psi {
    file: AsyncFd<File>,
    pub trigger: &'static str,
}

/// The triggers tried in turn: 150 ms of stall in 1 s, else (without
/// `CAP_SYS_RESOURCE`) 500 ms in 2 s.
const PSI_TRIGGERS: [&str; 2] = ["some 150000 1000000", "some 500000 2000000"];

impl Psi {
    /// Opens a trigger on `path` (`/proc/pressure/memory`, or a cgroup's
    /// `memory.pressure`).
    pub fn open(path: &Path) -> io::Result<Psi> {
        let mut last = io::Error::from(io::ErrorKind::Unsupported);
        for trigger in PSI_TRIGGERS {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(path)?;
            match file.write_all(format!("{trigger}\0").as_bytes()) {
                Ok(()) => {
                    let file = sys::register(file, Interest::PRIORITY)?;
                    return Ok(Psi { file, trigger });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Resolves when the trigger fires.
    pub async fn stalled(&self) -> io::Result<()> {
        let mut guard = self.file.ready(Interest::PRIORITY).await?;
        guard.clear_ready();
        Ok(())
    }
}

/// Writes to one or more filesystems.
#[derive(Debug)]
pub struct FsWrites {
    group: AsyncFd<Fanotify>,
}

impl FsWrites {
    /// Marks the filesystems of `paths` (their nearest existing ancestors) for writes.
    /// File identifiers are asked for first (no descriptor opened per event), plain
    /// events where the filesystem cannot give them.
    pub fn open(paths: &[&Path]) -> io::Result<FsWrites> {
        let base = InitFlags::FAN_CLASS_NOTIF | InitFlags::FAN_CLOEXEC | InitFlags::FAN_NONBLOCK;
        let with_fid = base | InitFlags::from_bits_retain(libc::FAN_REPORT_FID);
        match Self::marked(with_fid, paths) {
            Ok(group) => Ok(group),
            Err(Errno::EINVAL | Errno::EXDEV | Errno::EOPNOTSUPP | Errno::ENODEV) => {
                Self::marked(base, paths).map_err(io::Error::from)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn marked(flags: InitFlags, paths: &[&Path]) -> Result<FsWrites, Errno> {
        let group = Fanotify::init(flags, EventFFlags::O_RDONLY | EventFFlags::O_CLOEXEC)?;
        for path in paths {
            let Some(dir) = path.ancestors().find(|dir| dir.exists()) else { continue };
            group.mark(
                MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_FILESYSTEM,
                MaskFlags::FAN_MODIFY | MaskFlags::FAN_CLOSE_WRITE,
                nix::fcntl::AT_FDCWD,
                Some(dir),
            )?;
        }
        let group = sys::register(group, Interest::READABLE)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        Ok(FsWrites { group })
    }

    /// Resolves when something was written, after draining every event queued.
    pub async fn written(&self) -> io::Result<usize> {
        loop {
            let mut guard = self.group.readable().await?;
            let mut count = 0;
            loop {
                match guard.get_inner().read_events() {
                    Ok(events) if events.is_empty() => break,
                    Ok(events) => count += events.len(),
                    Err(Errno::EAGAIN) => break,
                    Err(e) => return Err(e.into()),
                }
            }
            guard.clear_ready();
            if count > 0 {
                return Ok(count);
            }
        }
    }
}

/// The only `unsafe` code of the eviction manager.
#[allow(unsafe_code)]
mod sys {
    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;

    use nix::sys::eventfd::EventFd;
    use nix::sys::fanotify::Fanotify;
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    /// A value that owns its descriptor: it keeps it open, and `as_raw_fd` returns that
    /// same descriptor, until the value is dropped.
    pub(super) trait OwnsFd: AsRawFd {}

    // Each wraps an `OwnedFd` it never replaces or closes before its own drop.
    impl OwnsFd for EventFd {}
    impl OwnsFd for File {}
    impl OwnsFd for Fanotify {}

    /// Registers `value`'s descriptor with the reactor.
    pub(super) fn register<T: OwnsFd>(value: T, interest: Interest) -> io::Result<AsyncFd<T>> {
        // SAFETY: `T: OwnsFd` owns its descriptor and closes it only when dropped, and the
        // `AsyncFd` owns `value` (it deregisters before dropping it), so the descriptor
        // stays open, and the same, for as long as it is registered.
        unsafe { AsyncFd::register_with_interest(value, interest) }.map_err(|e| e.into_parts().1)
    }
}
