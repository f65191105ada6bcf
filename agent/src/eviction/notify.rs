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
//!   nodefs and imagefs: a write anywhere on them wakes a thread blocked on the group,
//!   at most once per interval (the kernel queues and merges what comes meanwhile).
//!
//! All of it is safe code over `nix` and tokio's `AsyncFd`; the descriptors are registered
//! with tokio's reactor by [`crate::host::reactor`].

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::fanotify::{EventFFlags, Fanotify, InitFlags, MarkFlags, MaskFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;
use tracing::warn;

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
        let eventfd = crate::host::reactor::register(eventfd, Interest::READABLE)?;
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
                    let file = crate::host::reactor::register(file, Interest::PRIORITY)?;
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

/// Writes to one or more filesystems, seen by a thread of its own that blocks on the
/// fanotify group: it wakes on a write, takes every event queued, tells the eviction
/// manager, and sleeps for the current interval, while the kernel queues (and merges)
/// what comes meanwhile. No descriptor is registered with tokio's reactor, so writes
/// between two checks cost the agent nothing.
#[derive(Debug)]
pub struct FsWrites {
    written: Arc<Notify>,
    interval_ms: Arc<AtomicU64>,
}

impl FsWrites {
    /// Marks the filesystems of `paths` (their nearest existing ancestors) for writes and
    /// starts the thread. File identifiers are asked for first (no descriptor opened per
    /// event), plain events where the filesystem cannot give them.
    pub fn open(paths: &[&Path], interval: Duration) -> io::Result<FsWrites> {
        let base = InitFlags::FAN_CLASS_NOTIF | InitFlags::FAN_CLOEXEC;
        let with_fid = base | InitFlags::from_bits_retain(libc::FAN_REPORT_FID);
        let (group, fid) = match marked(with_fid, paths) {
            Ok(group) => (group, true),
            Err(Errno::EINVAL | Errno::EXDEV | Errno::EOPNOTSUPP | Errno::ENODEV) => {
                (marked(base, paths)?, false)
            }
            Err(e) => return Err(e.into()),
        };
        let written = Arc::new(Notify::new());
        let interval_ms = Arc::new(AtomicU64::new(millis(interval)));
        let (notify, sleep) = (written.clone(), interval_ms.clone());
        std::thread::Builder::new().name("eviction-fs".to_owned()).spawn(move || {
            loop {
                if let Err(e) = take_events(&group, fid) {
                    warn!(error = %e, "cannot read filesystem write events; disk is checked by the backstop only");
                    return;
                }
                notify.notify_one();
                std::thread::sleep(Duration::from_millis(sleep.load(Ordering::Relaxed)));
            }
        })?;
        Ok(FsWrites { written, interval_ms })
    }

    /// Resolves when something was written since the last time.
    pub async fn written(&self) {
        self.written.notified().await;
    }

    /// The least time between two wake-ups from now on.
    pub fn set_interval(&self, interval: Duration) {
        self.interval_ms.store(millis(interval), Ordering::Relaxed);
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn marked(flags: InitFlags, paths: &[&Path]) -> Result<Fanotify, Errno> {
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
    Ok(group)
}

/// Blocks until there are events, then takes every one queued. With file identifiers
/// the bytes are only read; plain events are parsed, which closes their descriptors.
fn take_events(group: &Fanotify, fid: bool) -> Result<(), Errno> {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut first = true;
    while first || readable(group)? {
        first = false;
        let read = if fid {
            nix::unistd::read(group, &mut buffer).map(drop)
        } else {
            group.read_events().map(drop)
        };
        match read {
            Ok(()) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether more events are queued now.
fn readable(group: &Fanotify) -> Result<bool, Errno> {
    let mut fds = [PollFd::new(group.as_fd(), PollFlags::POLLIN)];
    Ok(poll(&mut fds, PollTimeout::ZERO)? > 0)
}
