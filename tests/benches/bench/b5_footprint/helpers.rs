//! Which processes on the machine one agent adds besides itself: containerd's shims for
//! its containers and the container loggers they start; and the memory of a set of
//! processes. Read from `/proc` only.

use std::path::Path;

use super::procfs::{Memory, memory_mib, pss_mib};

/// A process: its PID, parent and command line.
#[derive(Debug, Clone)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub args: Vec<String>,
}

impl Process {
    /// The base name of `argv[0]` (`/usr/bin/conmon` → `conmon`).
    pub fn name(&self) -> &str {
        let first = self.args.first().map_or("", String::as_str);
        first.rsplit('/').next().unwrap_or(first)
    }

    /// The value after `flag` (`-namespace ns` → `ns`).
    fn flag(&self, flag: &str) -> Option<&str> {
        self.args.windows(2).find(|w| w[0] == flag).map(|w| w[1].as_str())
    }
}

/// Every process with a command line (kernel threads have none).
pub fn processes() -> Vec<Process> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // After the parenthesized command name: state, then the parent's PID.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            (!args.is_empty()).then_some(Process { pid, ppid, args })
        })
        .collect()
}

/// The agent's containers' helpers, by kind.
#[derive(Debug, Clone, Default)]
pub struct Helpers {
    /// containerd's shims serving the agent's namespace on its containerd.
    pub shims: Vec<u32>,
    /// The container loggers: `outpost-container-log …` (the logger's own binary) or
    /// `outpost container-log …`, writing under the agent's log dir or started by one
    /// of its shims.
    pub loggers: Vec<u32>,
}

impl Helpers {
    /// The helpers of the agent using `namespace` on the containerd at `socket`, with
    /// pod logs under `log_dir`.
    pub fn find(namespace: &str, socket: &Path, log_dir: &Path) -> Helpers {
        let all = processes();
        let shims: Vec<u32> = all
            .iter()
            .filter(|p| {
                p.name().starts_with("containerd-shim")
                    && p.flag("-namespace") == Some(namespace)
                    && p.flag("-address").is_some_and(|a| same_file(a, socket))
            })
            .map(|p| p.pid)
            .collect();
        let loggers = all
            .iter()
            .filter(|p| {
                let logger = p.name() == "outpost-container-log"
                    || p.args.get(1).is_some_and(|a| a == "container-log");
                let ours = shims.contains(&p.ppid)
                    || p.args.iter().skip(1).any(|a| Path::new(a).starts_with(log_dir));
                logger && ours
            })
            .map(|p| p.pid)
            .collect();
        Helpers { shims, loggers }
    }
}

/// Whether `address` (a shim's `-address`, maybe `unix://…`) names the file `socket`.
fn same_file(address: &str, socket: &Path) -> bool {
    let address = Path::new(address.trim_start_matches("unix://"));
    address == socket
        || address.canonicalize().is_ok_and(|a| socket.canonicalize().is_ok_and(|s| a == s))
}

/// The memory of each of `pids` (one that exited meanwhile is left out).
pub fn memory(pids: &[u32]) -> Vec<Memory> {
    pids.iter()
        .filter_map(|&pid| {
            Some(Memory { rss: memory_mib(pid, "VmRSS").ok()?, pss: pss_mib(pid).ok()? })
        })
        .collect()
}

/// The sum of one figure over processes, in MiB.
pub fn total(memory: &[Memory], figure: fn(&Memory) -> f64) -> f64 {
    // From 0.0: an empty `sum` of floats is -0.0.
    memory.iter().map(figure).fold(0.0, |sum, value| sum + value)
}
