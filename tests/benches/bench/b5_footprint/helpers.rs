//! Which processes on the machine one agent adds besides itself: containerd's shims for
//! its containers and the container loggers they start; and the memory of a set of
//! processes. Read from `/proc` only.

use std::path::Path;

use outpost_leaks::processes;

use super::procfs::{Memory, memory_mib, pss_mib};

/// The agent's containers' helpers, by kind.
#[derive(Debug, Clone, Default)]
pub struct Helpers {
    /// containerd's shims serving the agent's namespace on its containerd.
    pub shims: Vec<u32>,
    /// The container loggers: `outpost-container-log …` (the logger's own binary) or
    /// `outpost container-log …`, writing under the agent's log dir or started by one
    /// of its shims; and the node logger (`outpost-container-log node`, or `outpost
    /// container-log-node`, its state under the agent's run dir).
    pub loggers: Vec<u32>,
}

impl Helpers {
    /// The helpers of the agent using `namespace` on the containerd at `socket`, with
    /// pod logs under `log_dir` and its run dir `run_dir`.
    pub fn find(namespace: &str, socket: &Path, log_dir: &Path, run_dir: &Path) -> Helpers {
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
                    || p.args
                        .get(1)
                        .is_some_and(|a| a == "container-log" || a == "container-log-node");
                let ours = shims.contains(&p.ppid)
                    || p.args.iter().skip(1).any(|a| {
                        Path::new(a).starts_with(log_dir) || Path::new(a).starts_with(run_dir)
                    });
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
