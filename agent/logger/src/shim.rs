//! The logger's side of containerd's `binary://` log protocol. The shim starts the logger
//! with the container's stdout as fd 3, its stderr as fd 4 and, as fd 5, a pipe to close
//! once ready; the logger writes CRI records to its file until both streams end.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::logger;
use crate::rotation::{self, Limits, LogFile};

/// The shim's fds: the container's stdout, its stderr, the readiness pipe.
const STDOUT_FD: RawFd = 3;
const STDERR_FD: RawFd = 4;
const READY_FD: RawFd = 5;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "fd {0} was not inherited (the container logger is run by containerd's shim, with the container's stdout, stderr and a readiness pipe as fds 3, 4 and 5)"
    )]
    NotInherited(RawFd),
    #[error("the shim's fds were already taken")]
    AlreadyTaken,
    #[error(transparent)]
    Open(#[from] rotation::Error),
    #[error(transparent)]
    Logger(#[from] logger::Error),
    /// The arguments: a flag the logger does not take.
    #[error("unknown flag {0}")]
    UnknownFlag(String),
    /// The arguments: a flag's value that is not a whole number.
    #[error("{0} needs a whole number")]
    Number(&'static str),
    #[error("--max-files must be at least 1")]
    NoFiles,
    #[error("more than one PATH")]
    Paths,
    #[error("no PATH: the live log file to write")]
    NoPath,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Opens the log file at `path`, tells the shim it is ready, and logs until the
/// container's output ends.
pub fn container_log(path: &Path, limits: Limits) -> Result<()> {
    let [stdout, stderr, ready] = shim_fds()?;
    let opened = LogFile::open(path, limits);
    // Ready (or failed: the shim then goes on without a logger; the error is in its log).
    drop(ready);
    let mut file = opened?;
    logger::run(stdout, Some(stderr), &mut file)?;
    Ok(())
}

/// What the shim (or a person) asked for: `[container-log] [--max-size BYTES]
/// [--max-files N] PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    pub path: PathBuf,
    pub limits: Limits,
}

impl Args {
    /// Logs as asked, from the shim's fds.
    pub fn run(&self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        container_log(&self.path, self.limits)?;
        Ok(())
    }
}

/// The usage line of the `outpost-container-log` binary.
pub const USAGE: &str = "usage: outpost-container-log [container-log] [--max-size BYTES] [--max-files N] PATH (run by containerd's shim from a binary:// log URI)";

/// Parses the arguments after the program's name. The shim passes the log URI's query as
/// `container-log PATH`; the limits default to kubelet's.
pub fn parse_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Args> {
    let mut limits = Limits::default();
    let mut path = None;
    let mut args = args.into_iter().peekable();
    if args.peek().is_some_and(|first| first == crate::SUBCOMMAND) {
        args.next();
    }
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--max-size") => limits.max_size = number(args.next(), "--max-size")?,
            Some("--max-files") => match number(args.next(), "--max-files")? {
                0 => return Err(Error::NoFiles),
                n => limits.max_files = n,
            },
            Some(flag) if flag.starts_with("--") => {
                return Err(Error::UnknownFlag(flag.to_owned()));
            }
            _ if path.is_some() => return Err(Error::Paths),
            _ => path = Some(PathBuf::from(arg)),
        }
    }
    let path = path.ok_or(Error::NoPath)?;
    Ok(Args { path, limits })
}

fn number<T: std::str::FromStr>(
    value: Option<std::ffi::OsString>,
    flag: &'static str,
) -> Result<T> {
    value.as_ref().and_then(|v| v.to_str()).and_then(|v| v.parse().ok()).ok_or(Error::Number(flag))
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
    let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
        return false;
    };
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
