//! `outpost container-log PATH` (hidden): the logger containerd's shim starts for a
//! container whose log URI is [`crate::runtime::logs::logger_uri`]. The shim hands it the
//! container's stdout as fd 3, its stderr as fd 4 and, as fd 5, a pipe to close once ready;
//! it writes CRI records to PATH until both streams end.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cli::ContainerLogArgs;
use crate::runtime::logs::logger;
use crate::runtime::logs::rotation::{self, Limits, LogFile};

/// The shim's fds: the container's stdout, its stderr, the readiness pipe.
const STDOUT_FD: RawFd = 3;
const STDERR_FD: RawFd = 4;
const READY_FD: RawFd = 5;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "fd {0} was not inherited (outpost container-log is run by containerd's shim, with the container's stdout, stderr and a readiness pipe as fds 3, 4 and 5)"
    )]
    NotInherited(RawFd),
    #[error("the shim's fds were already taken")]
    AlreadyTaken,
    #[error(transparent)]
    Open(#[from] rotation::Error),
    #[error(transparent)]
    Logger(#[from] logger::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Opens the log file, tells the shim it is ready, and logs until the container's output
/// ends.
pub fn container_log(args: &ContainerLogArgs) -> Result<ExitCode> {
    let [stdout, stderr, ready] = shim_fds()?;
    let limits = Limits { max_size: args.max_size, max_files: args.max_files };
    let opened = LogFile::open(&args.path, limits);
    // Ready (or failed: the shim then goes on without a logger; the error is in its log).
    drop(ready);
    let mut file = opened?;
    logger::run(stdout, stderr, &mut file)?;
    Ok(ExitCode::SUCCESS)
}

/// Takes ownership of fds 3, 4 and 5, once per process, after checking that each was
/// inherited: open and not close-on-exec (every fd this process opens itself is).
fn shim_fds() -> Result<[OwnedFd; 3]> {
    static TAKEN: AtomicBool = AtomicBool::new(false);
    for fd in [STDOUT_FD, STDERR_FD, READY_FD] {
        if !inherited(fd) {
            return Err(Error::NotInherited(fd));
        }
    }
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Err(Error::AlreadyTaken);
    }
    Ok([STDOUT_FD, STDERR_FD, READY_FD].map(owned))
}

/// Whether `fd` is open without close-on-exec, from `/proc/self/fdinfo`.
fn inherited(fd: RawFd) -> bool {
    const O_CLOEXEC: u32 = 0o2_000_000;
    let Ok(info) = crate::host::proc::own_fdinfo(fd) else { return false };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
        .is_some_and(|flags| flags & O_CLOEXEC == 0)
}

#[allow(unsafe_code)]
fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: called once per process (`TAKEN`) by `shim_fds`, which checked that fds 3-5
    // are open and not close-on-exec: as this process opens every fd of its own with
    // close-on-exec (std and nix do), they were inherited across exec, from the shim
    // (containerd's NewBinaryIO passes them as ExtraFiles). Nothing else refers to them.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests;
