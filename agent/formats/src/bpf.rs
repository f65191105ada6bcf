//! The records the BPF programs write (`agent-ebpf/src/outpost.h`), mirrored with
//! `#[repr(C)]` structs, and a pure parser from ring buffer bytes to [`KernelEvent`].
//! The parser reads each field at its `offset_of!` in the mirror, checking every length:
//! bytes from the kernel are never transmuted. Also pure: what `task->exit_code` means.

use std::mem::{offset_of, size_of};

pub const COMM_LEN: usize = 16;
pub const FILENAME_LEN: usize = 256;
pub const ARGS_LEN: usize = 256;

pub const KIND_EXEC: u32 = 1;
pub const KIND_EXIT: u32 = 2;
pub const KIND_OOM_KILL: u32 = 3;

/// `struct outpost_event_header`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct EventHeader {
    pub kind: u32,
    pub tgid: u32,
    pub pid: u32,
    pub ns_tgid: u32,
    pub cgroup_id: u64,
    pub ktime_ns: u64,
    pub comm: [u8; COMM_LEN],
}

/// `struct outpost_exec_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ExecEvent {
    pub header: EventHeader,
    pub uid: u32,
    pub ppid: u32,
    pub filename_len: u32,
    pub args_len: u32,
    pub filename: [u8; FILENAME_LEN],
    pub args: [u8; ARGS_LEN],
}

/// `struct outpost_exit_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ExitEvent {
    pub header: EventHeader,
    pub exit_code: u32,
    pub _pad: u32,
}

/// `struct outpost_oom_kill_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OomKillEvent {
    pub header: EventHeader,
    pub uid: u32,
    pub _pad: u32,
}

/// `struct outpost_traffic`: one CPU's counters for one pod cgroup.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
}

/// `struct outpost_exec_info`: EXEC_HISTORY's value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ExecInfo {
    pub ktime_ns: u64,
    pub uid: u32,
    pub args_len: u32,
    pub filename: [u8; FILENAME_LEN],
    pub args: [u8; ARGS_LEN],
}

// The layouts the C compiler gives the structs in outpost.h (x86_64 and aarch64 alike).
const _: () = assert!(size_of::<EventHeader>() == 48);
const _: () = assert!(size_of::<ExecEvent>() == 576);
const _: () = assert!(size_of::<ExitEvent>() == 56);
const _: () = assert!(size_of::<OomKillEvent>() == 56);
const _: () = assert!(size_of::<Traffic>() == 32);
const _: () = assert!(size_of::<ExecInfo>() == 528);

/// POD_TRAFFIC's value as the map hands it out: four u64 (see [`Traffic`]).
pub type TrafficValue = [u64; 4];
/// EXEC_HISTORY's value as raw bytes, parsed by [`exec_info`].
pub type ExecInfoValue = [u8; size_of::<ExecInfo>()];

impl Traffic {
    pub fn from_value(v: TrafficValue) -> Traffic {
        Traffic { rx_bytes: v[0], rx_packets: v[1], tx_bytes: v[2], tx_packets: v[3] }
    }

    pub fn add(&mut self, other: &Traffic) {
        self.rx_bytes = self.rx_bytes.wrapping_add(other.rx_bytes);
        self.rx_packets = self.rx_packets.wrapping_add(other.rx_packets);
        self.tx_bytes = self.tx_bytes.wrapping_add(other.tx_bytes);
        self.tx_packets = self.tx_packets.wrapping_add(other.tx_packets);
    }
}

/// What every record says about the task it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub tgid: u32,
    pub pid: u32,
    /// The process's id in its own pid namespace (1: a container's init).
    pub ns_tgid: u32,
    pub cgroup_id: u64,
    pub ktime_ns: u64,
    pub comm: String,
}

/// One ring buffer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelEvent {
    Exec { task: Task, uid: u32, ppid: u32, filename: String, argv: Vec<String> },
    Exit { task: Task, exit_code: u32 },
    OomKill { task: Task, uid: u32 },
}

impl KernelEvent {
    pub fn task(&self) -> &Task {
        match self {
            KernelEvent::Exec { task, .. }
            | KernelEvent::Exit { task, .. }
            | KernelEvent::OomKill { task, .. } => task,
        }
    }
}

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("a ring buffer record of {len} bytes is too short for {what} ({need} bytes)")]
    Short { what: &'static str, len: usize, need: usize },
    #[error(
        "a ring buffer record of unknown kind {0}: is agent-ebpf/outpost.bpf.o newer than the agent?"
    )]
    Kind(u32),
}

/// Reads one ring buffer record.
pub fn parse(bytes: &[u8]) -> Result<KernelEvent, Error> {
    let header = need(bytes, "an event header", size_of::<EventHeader>())?;
    let task = task(header);
    match u32_at(header, offset_of!(EventHeader, kind)) {
        KIND_EXEC => {
            let b = need(bytes, "an exec event", size_of::<ExecEvent>())?;
            let filename_len = u32_at(b, offset_of!(ExecEvent, filename_len)) as usize;
            let args_len = u32_at(b, offset_of!(ExecEvent, args_len)) as usize;
            let filename = field(b, offset_of!(ExecEvent, filename), FILENAME_LEN, filename_len);
            let args = field(b, offset_of!(ExecEvent, args), ARGS_LEN, args_len);
            Ok(KernelEvent::Exec {
                task,
                uid: u32_at(b, offset_of!(ExecEvent, uid)),
                ppid: u32_at(b, offset_of!(ExecEvent, ppid)),
                filename: text(until_nul(filename)),
                argv: argv(args),
            })
        }
        KIND_EXIT => {
            let b = need(bytes, "an exit event", size_of::<ExitEvent>())?;
            Ok(KernelEvent::Exit { task, exit_code: u32_at(b, offset_of!(ExitEvent, exit_code)) })
        }
        KIND_OOM_KILL => {
            let b = need(bytes, "an OOM kill event", size_of::<OomKillEvent>())?;
            Ok(KernelEvent::OomKill { task, uid: u32_at(b, offset_of!(OomKillEvent, uid)) })
        }
        kind => Err(Error::Kind(kind)),
    }
}

/// An EXEC_HISTORY entry: the last binary a process ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRecord {
    pub ktime_ns: u64,
    pub uid: u32,
    pub filename: String,
    pub argv: Vec<String>,
}

/// Reads an EXEC_HISTORY value.
pub fn exec_info(b: &ExecInfoValue) -> ExecRecord {
    let args_len = u32_at(b, offset_of!(ExecInfo, args_len)) as usize;
    let filename = field(b, offset_of!(ExecInfo, filename), FILENAME_LEN, FILENAME_LEN);
    ExecRecord {
        ktime_ns: u64_at(b, offset_of!(ExecInfo, ktime_ns)),
        uid: u32_at(b, offset_of!(ExecInfo, uid)),
        filename: text(until_nul(filename)),
        argv: argv(field(b, offset_of!(ExecInfo, args), ARGS_LEN, args_len)),
    }
}

/// How a process ended, from `task->exit_code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The status containerd reports: the exit status, or 128 + the signal.
    pub code: u32,
    /// The signal that killed it.
    pub signal: Option<u32>,
    pub core_dumped: bool,
}

/// `task->exit_code` is `(status & 0xff) << 8` after exit(status), and the signal number
/// (`| 0x80` with a core dump) after a fatal signal, as wait(2) sees it.
pub fn exit_status(exit_code: u32) -> ExitStatus {
    let signal = exit_code & 0x7f;
    if signal == 0 {
        ExitStatus { code: (exit_code >> 8) & 0xff, signal: None, core_dumped: false }
    } else {
        ExitStatus { code: 128 + signal, signal: Some(signal), core_dumped: exit_code & 0x80 != 0 }
    }
}

fn need<'a>(bytes: &'a [u8], what: &'static str, len: usize) -> Result<&'a [u8], Error> {
    bytes.get(..len).ok_or(Error::Short { what, len: bytes.len(), need: len })
}

fn task(header: &[u8]) -> Task {
    let comm = field(header, offset_of!(EventHeader, comm), COMM_LEN, COMM_LEN);
    Task {
        tgid: u32_at(header, offset_of!(EventHeader, tgid)),
        pid: u32_at(header, offset_of!(EventHeader, pid)),
        ns_tgid: u32_at(header, offset_of!(EventHeader, ns_tgid)),
        cgroup_id: u64_at(header, offset_of!(EventHeader, cgroup_id)),
        ktime_ns: u64_at(header, offset_of!(EventHeader, ktime_ns)),
        comm: text(until_nul(comm)),
    }
}

/// `len` bytes of the field at `offset` (at most its `size`), within `b`.
fn field(b: &[u8], offset: usize, size: usize, len: usize) -> &[u8] {
    let end = offset.saturating_add(len.min(size)).min(b.len());
    b.get(offset.min(end)..end).unwrap_or_default()
}

fn u32_at(b: &[u8], offset: usize) -> u32 {
    let mut word = [0u8; 4];
    if let Some(bytes) = b.get(offset..offset + 4) {
        word.copy_from_slice(bytes);
    }
    u32::from_ne_bytes(word)
}

fn u64_at(b: &[u8], offset: usize) -> u64 {
    let mut word = [0u8; 8];
    if let Some(bytes) = b.get(offset..offset + 8) {
        word.copy_from_slice(bytes);
    }
    u64::from_ne_bytes(word)
}

fn until_nul(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |end| &b[..end])
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// NUL-separated arguments (as in /proc/<pid>/cmdline; the last may be cut short).
fn argv(b: &[u8]) -> Vec<String> {
    let b = b.strip_suffix(&[0]).unwrap_or(b);
    if b.is_empty() {
        return Vec::new();
    }
    b.split(|&c| c == 0).map(text).collect()
}

#[cfg(test)]
mod tests;
