//! Who wrote a manifest: the process fanotify named, read from `/proc/<pid>` at event
//! time, or (once it has exited) from the eBPF exec history. The parsers are pure; the
//! readers do a few small reads of procfs and never block on anything else.

use std::fs;
use std::io::Read;

use serde::{Deserialize, Serialize};

use super::{ExecHistory, ExecRecord};
use crate::config::Backend;
use crate::host::proc;

/// At most this many bytes of a command line are kept (the rest is marked as cut).
const MAX_CMDLINE: usize = 4096;

/// What a writer's identity is based on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataSource {
    /// `/proc/<pid>` while the writer was still running.
    Proc,
    /// The eBPF exec history: the writer had exited, its last exec was recorded.
    Ebpf,
}

/// Why a change happened, as far as the kernel says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A kernel event on the file; `pid` is what the backend reported (fanotify only).
    Event { pid: Option<i32>, backend: Backend },
    /// A full rescan (start, queue overflow, directory replaced): no event names a writer.
    Rescan,
}

/// The process that wrote a manifest, or why it is not known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Writer {
    pub pid: Option<i32>,
    /// Where the details below come from; absent when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<DataSource>,
    /// Real user id.
    pub uid: Option<u32>,
    /// Effective user id, when it differs from `uid` (a setuid program).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub euid: Option<u32>,
    pub gid: Option<u32>,
    /// `uid`'s name in the host's `/etc/passwd`.
    pub user: Option<String>,
    pub argv: Vec<String>,
    pub exe: Option<String>,
    pub comm: Option<String>,
    /// The process's last exec as the kernel recorded it (eBPF on): the binary and
    /// arguments it was started with, even when `/proc` shows it changed them since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<KernelExec>,
    /// One line: who it was, or why it is not known. Never empty.
    pub summary: String,
}

/// A process's last exec, from the eBPF exec history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelExec {
    pub filename: String,
    pub argv: Vec<String>,
    pub uid: u32,
    /// When it happened (RFC 3339).
    pub at: String,
}

impl KernelExec {
    fn of(record: &ExecRecord) -> KernelExec {
        KernelExec {
            filename: record.filename.clone(),
            argv: record.argv.clone(),
            uid: record.uid,
            at: record.at.to_string(),
        }
    }
}

impl Writer {
    /// Who made a change that no local process wrote (a client of the local API, the
    /// manifest URL's server), as `summary` says.
    pub fn remote(summary: &str) -> Writer {
        Writer::unknown(None, summary)
    }

    fn unknown(pid: Option<i32>, why: &str) -> Writer {
        Writer {
            pid,
            source: None,
            uid: None,
            euid: None,
            gid: None,
            user: None,
            argv: Vec::new(),
            exe: None,
            comm: None,
            exec: None,
            summary: why.to_owned(),
        }
    }

    /// `argv` as one line (arguments with spaces, quotes or control characters quoted
    /// and escaped), or the command name in brackets when there is no command line.
    pub fn command(&self) -> String {
        if self.argv.is_empty() {
            self.comm.as_deref().map(|c| format!("[{c}]")).unwrap_or_default()
        } else {
            self.argv.iter().map(|a| quoted(a)).collect::<Vec<_>>().join(" ")
        }
    }

    fn summarize(&mut self, note: &str) {
        let pid = self.pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
        let uid = match (self.uid, &self.user) {
            (Some(uid), Some(user)) => format!(" uid {uid} ({user})"),
            (Some(uid), None) => format!(" uid {uid}"),
            _ => String::new(),
        };
        self.summary = format!("pid {pid}{uid}: {}{note}", self.command());
    }
}

/// Identifies the writer of a change. `/proc` first; if the process is gone, the exec
/// history (when eBPF is on); otherwise says that it exited.
pub fn identify(origin: Origin, exec: Option<&dyn ExecHistory>) -> Writer {
    let pid = match origin {
        Origin::Rescan => {
            return Writer::unknown(
                None,
                "unknown (found by a rescan: no kernel event names a writer)",
            );
        }
        Origin::Event { backend: Backend::Inotify, .. } => {
            return Writer::unknown(None, "unknown (inotify backend)");
        }
        Origin::Event { pid: None, .. } | Origin::Event { pid: Some(..=0), .. } => {
            return Writer::unknown(
                None,
                "unknown (the writer runs outside the agent's PID namespace)",
            );
        }
        Origin::Event { pid: Some(pid), .. } => pid,
    };
    let record = u32::try_from(pid).ok().and_then(|tgid| exec?.exec_of(tgid));
    if let Some(mut writer) = from_proc(pid) {
        writer.exec = record.as_ref().map(KernelExec::of);
        return writer;
    }
    if let Some(record) = record {
        return from_exec(pid, record);
    }
    Writer::unknown(Some(pid), &format!("pid {pid} exited before it could be identified"))
}

/// The writer as `/proc/<pid>` shows it; `None` if the process is gone (or a zombie:
/// its command line and executable are gone with it).
pub fn from_proc(pid: i32) -> Option<Writer> {
    let dir = proc::pid_dir(pid);
    let status = proc::status(pid).ok()?;
    let status = Status::parse(&status);
    if status.zombie {
        return None;
    }
    let argv = read_capped(&dir.join("cmdline"), MAX_CMDLINE).map(|b| parse_cmdline(&b));
    let exe = proc::exe(pid).ok().map(|p| p.to_string_lossy().into_owned());
    let comm = proc::comm(pid).or(status.name);
    // Read last: if it is gone now, what was read may be half of a dying process.
    if fs::metadata(&dir).is_err() {
        return None;
    }
    let mut writer = Writer {
        pid: Some(pid),
        source: Some(DataSource::Proc),
        uid: status.uid,
        euid: status.euid.filter(|e| Some(*e) != status.uid),
        gid: status.gid,
        user: status.uid.and_then(user_name),
        argv: argv.unwrap_or_default(),
        exe,
        comm,
        exec: None,
        summary: String::new(),
    };
    writer.summarize("");
    Some(writer)
}

/// The writer from its last exec, recorded by the eBPF programs.
pub fn from_exec(pid: i32, record: ExecRecord) -> Writer {
    let exec = KernelExec::of(&record);
    let comm = record.filename.rsplit('/').next().filter(|c| !c.is_empty()).map(str::to_owned);
    let mut writer = Writer {
        pid: Some(pid),
        source: Some(DataSource::Ebpf),
        uid: Some(record.uid),
        euid: None,
        gid: None,
        user: user_name(record.uid),
        argv: record.argv,
        exec: None,
        exe: Some(record.filename),
        comm,
        summary: String::new(),
    };
    writer.exec = Some(exec);
    writer.summarize(" (exited; from the eBPF exec history)");
    writer
}

/// An argument as it can be shown on one line: as it is when plain, else quoted with
/// its quotes, backslashes and control characters escaped.
pub fn quoted(arg: &str) -> String {
    let plain =
        !arg.is_empty() && arg.chars().all(|c| c.is_alphanumeric() || "_-./:=,@+%^".contains(c));
    if plain { arg.to_owned() } else { format!("{arg:?}") }
}

fn read_capped(path: &std::path::Path, cap: usize) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    fs::File::open(path).ok()?.take(cap as u64 + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() > cap {
        bytes.truncate(cap);
        bytes.extend_from_slice("…".as_bytes());
    }
    Some(bytes)
}

/// `/proc/<pid>/cmdline`: arguments separated (and ended) by NUL bytes.
pub fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes.split(|b| *b == 0).map(|arg| String::from_utf8_lossy(arg).into_owned()).collect()
}

/// What the audit takes from `/proc/<pid>/status`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub name: Option<String>,
    pub uid: Option<u32>,
    pub euid: Option<u32>,
    pub gid: Option<u32>,
    pub zombie: bool,
}

impl Status {
    /// `Name:`, `State:`, `Uid:` (real, effective, saved, fs) and `Gid:` lines.
    pub fn parse(text: &str) -> Status {
        let mut status = Status::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else { continue };
            let mut fields = value.split_whitespace();
            match key {
                "Name" => status.name = Some(value.trim().to_owned()),
                "State" => status.zombie = fields.next() == Some("Z"),
                "Uid" => {
                    status.uid = fields.next().and_then(|f| f.parse().ok());
                    status.euid = fields.next().and_then(|f| f.parse().ok());
                }
                "Gid" => status.gid = fields.next().and_then(|f| f.parse().ok()),
                _ => {}
            }
        }
        status
    }
}

/// The name of `uid` in the host's `/etc/passwd` (read directly: no NSS module that
/// could block the watcher).
fn user_name(uid: u32) -> Option<String> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd_name(&passwd, uid)
}

/// The first `/etc/passwd` entry with `uid`.
pub fn passwd_name(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id: u32 = fields.nth(1)?.parse().ok()?;
        (id == uid && !name.is_empty()).then(|| name.to_owned())
    })
}
