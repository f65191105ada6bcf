//! What B5 reads from `/proc` about the agent and its threads: reading these files never
//! wakes the process read.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;

/// The unit of `utime` and `stime` in `/proc/<pid>/stat` (`USER_HZ`, 100 in Linux's ABI).
const USER_HZ: f64 = 100.0;

/// One thread's counters (`/proc/<pid>/task/<tid>/`).
#[derive(Debug, Clone, Default)]
pub struct Thread {
    pub comm: String,
    /// `schedstat`'s third field: how many times the thread was put on a CPU.
    pub scheduled: u64,
    /// `schedstat`'s first field: nanoseconds on a CPU.
    pub run_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

/// The process's counters at one instant.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Instant,
    /// `utime + stime` of the whole process (all threads, live and exited), in `USER_HZ`.
    cpu_ticks: u64,
    threads: BTreeMap<u32, Thread>,
}

impl Sample {
    pub fn take(pid: u32) -> anyhow::Result<Sample> {
        let proc = format!("/proc/{pid}");
        let stat = std::fs::read_to_string(format!("{proc}/stat"))
            .with_context(|| format!("cannot read {proc}/stat (has the agent exited?)"))?;
        let cpu_ticks = cpu_ticks(&stat).with_context(|| format!("unexpected {proc}/stat"))?;
        let mut threads = BTreeMap::new();
        let tasks = std::fs::read_dir(format!("{proc}/task"))
            .with_context(|| format!("cannot list {proc}/task"))?;
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            // A thread that exits between the listing and the reads is left out.
            if let Some(thread) = read_thread(&task.path()) {
                threads.insert(tid, thread);
            }
        }
        Ok(Sample { at: Instant::now(), cpu_ticks, threads })
    }
}

fn read_thread(dir: &Path) -> Option<Thread> {
    let comm = std::fs::read_to_string(dir.join("comm")).ok()?.trim_end().to_owned();
    let schedstat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
    let mut fields = schedstat.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (run_ns, _waiting_ns, scheduled) = (fields.next()??, fields.next()??, fields.next()??);
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    Some(Thread {
        comm,
        scheduled,
        run_ns,
        voluntary: status_field(&status, "voluntary_ctxt_switches")?,
        involuntary: status_field(&status, "nonvoluntary_ctxt_switches")?,
    })
}

/// `utime + stime` from a `/proc/<pid>/stat` line.
fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name is in parentheses and may hold spaces and parentheses itself;
    // the fields after it start with the third (state).
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(field(14)? + field(15)?)
}

/// A number field of a `status` file (`VmRSS:   1234 kB` → 1234).
fn status_field(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, `RssAnon`...), in MiB.
pub fn memory_mib(pid: u32, field: &str) -> anyhow::Result<f64> {
    kib_field(&format!("/proc/{pid}/status"), field)
}

/// The proportional set size (`Pss` of `/proc/<pid>/smaps_rollup`, in MiB): the RSS with
/// each page shared by n processes counted 1/n (the pages of a binary or library that
/// several processes map).
pub fn pss_mib(pid: u32) -> anyhow::Result<f64> {
    kib_field(&format!("/proc/{pid}/smaps_rollup"), "Pss")
}

fn kib_field(path: &str, field: &str) -> anyhow::Result<f64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    let kib = status_field(&text, field).with_context(|| format!("no {field} in {path}"))?;
    Ok(kib as f64 / 1024.0)
}

/// What happened between two samples.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    pub seconds: f64,
    /// CPU time as a percentage of one core.
    pub cpu_percent: f64,
    /// CPU time from the threads' `schedstat` (ns resolution, threads alive at the end).
    pub run_ms: f64,
    pub scheduled: u64,
    pub voluntary: u64,
    pub involuntary: u64,
    /// Times scheduled, per thread name (those scheduled at all).
    pub by_comm: BTreeMap<String, u64>,
    pub threads_start: usize,
    pub threads_end: usize,
    /// Threads that exited during the window: what they did after `start` is not counted.
    pub threads_exited: usize,
}

impl Delta {
    pub fn between(start: &Sample, end: &Sample) -> Delta {
        let mut delta = Delta {
            seconds: end.at.duration_since(start.at).as_secs_f64(),
            threads_start: start.threads.len(),
            threads_end: end.threads.len(),
            threads_exited: start.threads.keys().filter(|t| !end.threads.contains_key(t)).count(),
            ..Delta::default()
        };
        let ticks = end.cpu_ticks.saturating_sub(start.cpu_ticks) as f64;
        delta.cpu_percent = ticks / USER_HZ / delta.seconds * 100.0;
        let mut run_ns = 0;
        for (tid, now) in &end.threads {
            // A thread born during the window counts from zero.
            let before = start.threads.get(tid).cloned().unwrap_or_default();
            let scheduled = now.scheduled.saturating_sub(before.scheduled);
            delta.scheduled += scheduled;
            run_ns += now.run_ns.saturating_sub(before.run_ns);
            delta.voluntary += now.voluntary.saturating_sub(before.voluntary);
            delta.involuntary += now.involuntary.saturating_sub(before.involuntary);
            if scheduled > 0 {
                *delta.by_comm.entry(now.comm.clone()).or_default() += scheduled;
            }
        }
        delta.run_ms = run_ns as f64 / 1e6;
        delta
    }

    /// Wakeups per second: the times the threads went to sleep (voluntary switches), each
    /// ended by one wakeup. A preemption (an involuntary switch: another process ran first
    /// on the core, as containerd or the shim does after the agent writes to it) is not a
    /// wakeup; [`Delta::scheduled`] counts both.
    pub fn wakeups_per_s(&self) -> f64 {
        self.voluntary as f64 / self.seconds
    }
}

/// The memory of one process, in MiB.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub rss: f64,
    pub pss: f64,
}
