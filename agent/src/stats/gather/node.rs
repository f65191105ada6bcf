//! The node's own figures: CPU (the root cgroup, else `/proc/stat`), memory
//! (`/proc/meminfo` and `/proc/vmstat`, or the root memory cgroup on v1), network
//! (`/proc/net/dev`), nodefs and imagefs (`statvfs`), rlimit, and kubelet's system
//! containers the agent can read (`pods`: the pods cgroup; `kubelet`: the agent's own).

use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use outpost_core::stats::procfs;
use outpost_core::stats::summary::{
    ContainerStats, CpuStats, FsStats, MemoryStats, NetworkStats, NodeStats, RlimitStats,
    RuntimeStats, SwapStats,
};

use super::Context;
use crate::host::Pid;
use crate::runtime::cgroups::{CGROUP_ROOT, Hierarchy, Usage};

/// `/proc/stat`'s tick rate (`USER_HZ`): 100 on every Linux architecture Outpost runs on.
const USER_HZ: u64 = 100;

/// The node's stats, and its memory total and CPU count (cAdvisor's machine figures).
pub(super) fn node(context: &mut Context<'_>, time: &Time) -> (NodeStats, u64, usize) {
    let host = context.sources.host.as_ref();
    let read = |file: &str| host.proc(file).unwrap_or_default();
    let hierarchy = Hierarchy::on(host, Path::new(CGROUP_ROOT));
    let root = hierarchy.usage(host, "/").ok();
    let cpu_ns = root.and_then(|u| u.cpu_ns).or_else(|| procfs::cpu_ns(&read("stat"), USER_HZ));
    let cpu = cpu_ns.map(|ns| context.cpu("/", ns, time));
    let meminfo = read("meminfo");
    let vmstat = read("vmstat");
    let total = procfs::meminfo_field(&meminfo, "MemTotal");
    let memory = total.map(|total| {
        // cgroup v1's root counts memory; v2's root has no memory.current (cAdvisor
        // takes /proc/meminfo then).
        let (usage, working_set) =
            match root.and_then(|u| Some((u.memory_bytes?, u.working_set_bytes?))) {
                Some(pair) => pair,
                None => {
                    let free = procfs::meminfo_field(&meminfo, "MemFree").unwrap_or(0);
                    let usage = total.saturating_sub(free);
                    let inactive = procfs::meminfo_field(&meminfo, "Inactive(file)").unwrap_or(0);
                    (usage, usage.saturating_sub(inactive))
                }
            };
        MemoryStats {
            time: time.clone(),
            available_bytes: Some(total.saturating_sub(working_set)),
            usage_bytes: Some(usage),
            working_set_bytes: Some(working_set),
            rss_bytes: root
                .and_then(|u| u.rss_bytes)
                .or_else(|| procfs::meminfo_field(&meminfo, "AnonPages")),
            page_faults: procfs::vmstat_field(&vmstat, "pgfault"),
            major_page_faults: procfs::vmstat_field(&vmstat, "pgmajfault"),
        }
    });
    let swap = procfs::meminfo_field(&meminfo, "SwapTotal").map(|swap_total| {
        let free = procfs::meminfo_field(&meminfo, "SwapFree").unwrap_or(0);
        SwapStats {
            time: time.clone(),
            swap_available_bytes: Some(free),
            swap_usage_bytes: Some(swap_total.saturating_sub(free)),
        }
    });
    let all = context.all();
    let interfaces = if all { procfs::net_dev(&read("net/dev"), true) } else { Vec::new() };
    let network = (!interfaces.is_empty()).then(|| NetworkStats {
        time: time.clone(),
        default: procfs::default_interface(&interfaces),
        interfaces,
    });
    let fs = filesystem(&context.sources.state_dir, time).filter(|_| all);
    let runtime = context.imagefs.map(|root| RuntimeStats { image_fs: filesystem(root, time) });
    let number = |file: &str| read(file).trim().parse::<i64>().ok();
    let rlimit = RlimitStats {
        time: time.clone(),
        maxpid: number("sys/kernel/pid_max"),
        curproc: outpost_core::node_status::machine::loadavg_tasks(&read("loadavg"))
            .and_then(|n| i64::try_from(n).ok()),
    };
    let own_cgroup = host.proc_pid_text(Pid::Own, "cgroup").unwrap_or_default();
    let system_containers = system_containers(context, &hierarchy, &own_cgroup, time);
    let stats = NodeStats {
        node_name: context.sources.node_name.clone(),
        system_containers,
        start_time: boot_time(&read("stat")).unwrap_or_else(|| time.clone()),
        cpu,
        memory,
        network,
        fs,
        runtime,
        rlimit: all.then_some(rlimit),
        swap,
    };
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    (stats, total.unwrap_or(0), cpus)
}

/// The boot time (`/proc/stat`'s `btime`).
fn boot_time(stat: &str) -> Option<Time> {
    let seconds: i64 = stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()?;
    Some(Time(k8s_openapi::jiff::Timestamp::from_second(seconds).ok()?))
}

/// A whole filesystem: capacity, free and used bytes and inodes.
pub(super) fn filesystem(path: &Path, time: &Time) -> Option<FsStats> {
    let fs = crate::host::capacity::filesystem(path)?;
    Some(FsStats {
        time: time.clone(),
        available_bytes: Some(fs.available),
        capacity_bytes: Some(fs.capacity),
        used_bytes: Some(fs.capacity.saturating_sub(fs.available)),
        inodes_free: Some(fs.inodes_free),
        inodes: Some(fs.inodes),
        inodes_used: Some(fs.inodes.saturating_sub(fs.inodes_free)),
    })
}

/// kubelet's `pods` (the pods cgroup) and `kubelet` (the agent's own cgroup) system
/// containers.
fn system_containers(
    context: &mut Context<'_>,
    hierarchy: &Hierarchy,
    self_cgroup: &str,
    time: &Time,
) -> Vec<ContainerStats> {
    let mut containers = Vec::new();
    let pods = context.sources.cgroups.as_ref().map(|c| c.path(&c.layout().pods()));
    let own = procfs::own_cgroup(self_cgroup).filter(|path| path != "/");
    let host = context.sources.host.as_ref();
    for (name, path) in [("pods", pods), ("kubelet", own)] {
        let Some(path) = path else { continue };
        let Ok(usage) = hierarchy.usage(host, &path) else { continue };
        containers.push(ContainerStats {
            name: name.to_owned(),
            start_time: time.clone(),
            cpu: usage.cpu_ns.map(|ns| context.cpu(&path, ns, time)),
            memory: Some(memory(&usage, time)),
            rootfs: None,
            logs: None,
            swap: None,
        });
    }
    containers
}

/// A cgroup's memory figures; available is its limit less its working set, when limited.
pub(super) fn memory(usage: &Usage, time: &Time) -> MemoryStats {
    MemoryStats {
        time: time.clone(),
        available_bytes: usage
            .memory_limit_bytes
            .zip(usage.working_set_bytes)
            .map(|(limit, ws)| limit.saturating_sub(ws)),
        usage_bytes: usage.memory_bytes,
        working_set_bytes: usage.working_set_bytes,
        rss_bytes: usage.rss_bytes,
        page_faults: usage.page_faults,
        major_page_faults: usage.major_page_faults,
    }
}

impl Context<'_> {
    /// A cgroup's CPU figures, its rate from the previous reading.
    pub(super) fn cpu(&mut self, key: &str, cumulative_ns: u64, time: &Time) -> CpuStats {
        CpuStats {
            time: time.clone(),
            usage_nano_cores: self.rates.observe(key, cumulative_ns, self.now),
            usage_core_nano_seconds: Some(cumulative_ns),
        }
    }
}
