//! `/proc`: how its files are named ([`Pid`], [`Pid::path`]), the readers of the agent's
//! own files, and the parsing of `mountinfo`. Readers return the file's text (or
//! `None`/an error when it cannot be read: a process that is gone); what a caller makes
//! of `stat`, `status` or `limits` stays with the caller. What the agent reads about other
//! processes and the system goes through [`crate::Host`].
//!
//! The `procfs` crate would do this too, but it parses far more than the handful of
//! files read here and brings its own dependencies; these readers are a few lines each.

pub mod smaps;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// This process's mount table.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

/// A process as `/proc` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pid {
    /// `/proc/self`: the agent.
    Own,
    /// `/proc/thread-self`: the calling thread.
    OwnThread,
    /// `/proc/<pid>`.
    Id(u32),
}

impl Pid {
    /// The init process, pid 1.
    pub const INIT: Pid = Pid::Id(1);

    /// `/proc/<pid>/<file>`.
    pub fn path(self, file: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{self}/{file}"))
    }
}

impl std::fmt::Display for Pid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pid::Own => f.write_str("self"),
            Pid::OwnThread => f.write_str("thread-self"),
            Pid::Id(pid) => write!(f, "{pid}"),
        }
    }
}

/// `/proc/<file>`: a system-wide file (`meminfo`, `net/unix`, `sys/kernel/hostname`).
pub fn system_path(file: &str) -> PathBuf {
    Path::new("/proc").join(file)
}

/// A namespace, known by its nsfs inode: `/proc/<pid>/ns/<kind>`, or a file a bind mount
/// of one holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Namespace {
    pub dev: u64,
    pub ino: u64,
}

impl Namespace {
    /// The namespace whose nsfs file `metadata` is of.
    pub fn of(metadata: &fs::Metadata) -> Namespace {
        use std::os::unix::fs::MetadataExt;
        Namespace { dev: metadata.dev(), ino: metadata.ino() }
    }
}

/// `/proc/<pid>`.
pub fn pid_dir(pid: i32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}"))
}

/// `/proc/<pid>/<file>` as text.
fn pid_text(pid: i32, file: &str) -> io::Result<String> {
    fs::read_to_string(pid_dir(pid).join(file))
}

/// `/proc/self/status`.
pub fn own_status() -> io::Result<String> {
    fs::read_to_string("/proc/self/status")
}

/// `/proc/self/stat`.
pub fn own_stat() -> io::Result<String> {
    fs::read_to_string("/proc/self/stat")
}

/// `/proc/self/limits`.
pub fn own_limits() -> io::Result<String> {
    fs::read_to_string("/proc/self/limits")
}

/// How many file descriptors this process has open.
pub fn own_open_fds() -> io::Result<usize> {
    // The directory handle being read is one of the entries: not counted.
    Ok(fs::read_dir("/proc/self/fd")?.count().saturating_sub(1))
}

/// `/proc/stat` (the kernel's, with `btime`).
pub fn kernel_stat() -> io::Result<String> {
    fs::read_to_string("/proc/stat")
}

/// `/proc/net/route`: the IPv4 routing table.
pub fn net_route() -> io::Result<String> {
    fs::read_to_string("/proc/net/route")
}

/// `/proc/<pid>/status`.
pub fn status(pid: i32) -> io::Result<String> {
    pid_text(pid, "status")
}

/// `/proc/<pid>/cmdline`: the arguments, each ended by a NUL byte.
pub fn cmdline(pid: i32) -> io::Result<Vec<u8>> {
    fs::read(pid_dir(pid).join("cmdline"))
}

/// `/proc/<pid>/exe`: the executable's path.
pub fn exe(pid: i32) -> io::Result<PathBuf> {
    fs::read_link(pid_dir(pid).join("exe"))
}

/// `/proc/<pid>/comm` without its newline: the command name; `None` when `pid` is not a
/// process (any more).
pub fn comm(pid: i32) -> Option<String> {
    if pid <= 0 {
        return None;
    }
    let comm = pid_text(pid, "comm").ok()?;
    Some(comm.strip_suffix('\n').unwrap_or(&comm).to_owned())
}

/// Whether `pid` exists and is not a zombie (its state in `/proc/<pid>/stat`).
pub fn alive(pid: i32) -> bool {
    pid_text(pid, "stat").is_ok_and(|stat| running_state(&stat))
}

/// Whether a `/proc/<pid>/stat` line is of a process that is not a zombie.
fn running_state(stat: &str) -> bool {
    // "pid (comm) S ...": the state follows the last ')', as comm may hold one.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

/// One line of mountinfo: where, which filesystem type, and how mounts propagate to and
/// from it (its optional fields: `shared:N` is a peer group's member, `master:N` a slave
/// of one; neither: private).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub mount_point: PathBuf,
    pub fstype: String,
    pub shared: bool,
    pub slave: bool,
}

/// This process's mounts ([`MOUNTINFO`]).
pub fn mounts() -> io::Result<Vec<Mount>> {
    Ok(parse_mountinfo(&fs::read_to_string(MOUNTINFO)?))
}

/// The mounts in `/proc/<pid>/mountinfo` text (lines that do not parse are skipped).
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let mount_point = fields.nth(4)?;
            // The mount's options, then the optional fields, then "-", then the
            // filesystem type.
            fields.next()?;
            let (mut shared, mut slave) = (false, false);
            for field in fields.by_ref() {
                match field {
                    "-" => break,
                    _ if field.starts_with("shared:") => shared = true,
                    _ if field.starts_with("master:") => slave = true,
                    _ => {}
                }
            }
            let fstype = fields.next()?;
            Some(Mount {
                mount_point: PathBuf::from(unescape(mount_point)),
                fstype: fstype.to_owned(),
                shared,
                slave,
            })
        })
        .collect()
}

/// A mountinfo path with its octal escapes (`\040` for a space, ...) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(digits) => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
