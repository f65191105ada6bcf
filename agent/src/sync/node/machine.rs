//! Reads the machine for the node status: `/proc` through the node task's host, local
//! files and one `statvfs`, no requests. A file that cannot be read leaves its part of the
//! status empty (a container without `/sys/class/dmi`, say) rather than stopping the
//! report.

use std::path::Path;
use std::sync::atomic::Ordering;

use outpost_core::node_status::machine::{self, go_arch};
use outpost_core::node_status::{FsStats, PidStats, Readings};

use super::Config;
use crate::host::Host;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn read_line(path: &str) -> String {
    read(path).map(|text| machine::first_line(&text)).unwrap_or_default()
}

/// The first line of `/proc/<file>`.
fn proc_line(host: &dyn Host, file: &str) -> String {
    host.proc(file).map(|text| machine::first_line(&text)).unwrap_or_default()
}

/// The readings now (blocking: small reads of `/proc`, `/sys` and `/etc`).
pub fn readings(config: &Config, hostname: &str) -> Readings {
    let host = config.host.as_ref();
    let cpus = crate::host::capacity::cpus();
    let os_image = ["/etc/os-release", "/usr/lib/os-release"]
        .into_iter()
        .find_map(|path| machine::os_release_pretty_name(&read(path)?))
        .unwrap_or_else(|| "Linux".to_owned());
    let meminfo = host.proc("meminfo").ok();
    Readings {
        cpus,
        memory: meminfo.as_deref().and_then(machine::meminfo),
        swap: meminfo.as_deref().and_then(|text| machine::meminfo_field(text, "SwapTotal")),
        nodefs: nodefs(&config.state_dir),
        pids: pids(host),
        machine_id: read_line("/etc/machine-id"),
        system_uuid: read_line("/sys/class/dmi/id/product_uuid"),
        boot_id: proc_line(host, "sys/kernel/random/boot_id"),
        kernel_version: proc_line(host, "sys/kernel/osrelease"),
        os_image,
        architecture: go_arch(std::env::consts::ARCH).to_owned(),
        node_ip: config.node_ip,
        hostname: hostname.to_owned(),
        runtime_ready: config.runtime.load(Ordering::Relaxed),
        shutting_down: config.shutdown.is_cancelled(),
        pressure: *config.pressure.borrow(),
        runtime_version: config.runtime_version.get().cloned(),
        kubelet_port: config.kubelet_port,
        max_pods: config.max_pods,
        devices: config.devices.borrow().clone(),
        certificates: config
            .certificates
            .iter()
            .map(|(kind, status)| status.borrow().held(kind))
            .collect(),
        certificates_judged_at: Some(crate::apiserver::server_time::trusted_now()),
    }
}

/// The filesystem holding `state_dir` (or its nearest existing parent, before the agent
/// made it).
fn nodefs(state_dir: &Path) -> Option<FsStats> {
    let fs = crate::host::capacity::filesystem(state_dir)?;
    Some(FsStats { capacity: fs.capacity, available: fs.available })
}

/// PIDs as kubelet counts them: the limit is the lower of `pid_max` and `threads-max`,
/// those in use the tasks `/proc/loadavg` counts.
fn pids(host: &dyn Host) -> Option<PidStats> {
    let max = crate::host::capacity::pid_max(host)?;
    let running = machine::loadavg_tasks(&host.proc("loadavg").ok()?)?;
    Some(PidStats { max, running })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_are_the_lower_limit_and_the_tasks_loadavg_counts() {
        let host = crate::host::Recording::new();
        assert_eq!(pids(&host), None, "nothing to read");
        host.file("/proc/sys/kernel/pid_max", "4194304\n")
            .file("/proc/sys/kernel/threads-max", "62000\n")
            .file("/proc/loadavg", "0.00 0.01 0.05 1/768 4242\n");
        assert_eq!(pids(&host), Some(PidStats { max: 62000, running: 768 }));
    }
}
