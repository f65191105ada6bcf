//! The kernel's text files the node's figures come from, parsed (pure): `/proc/net/dev`
//! (interfaces' counters), `/proc/stat`'s `cpu` line (the node's CPU time),
//! `/proc/meminfo` and `/proc/vmstat` fields, `/proc/<pid>/cgroup`'s unified line, and
//! the mount a path is on (`/proc/self/mounts`).

use super::summary::InterfaceStats;

/// The interfaces of `/proc/net/dev`, but loopback and, when `host`, the host side of
/// pods' veth pairs and bridges (as cAdvisor leaves them out of the node's).
pub fn net_dev(text: &str, host: bool) -> Vec<InterfaceStats> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, counters) = line.split_once(':')?;
            let name = name.trim();
            let ignored = name == "lo"
                || (host
                    && ["veth", "docker", "cni", "flannel", "cali"]
                        .iter()
                        .any(|p| name.starts_with(p)));
            if ignored {
                return None;
            }
            let fields: Vec<u64> =
                counters.split_whitespace().filter_map(|f| f.parse().ok()).collect();
            // Receive: bytes packets errs drop fifo frame compressed multicast;
            // transmit: bytes packets errs drop fifo colls carrier compressed.
            (fields.len() >= 16).then(|| InterfaceStats {
                name: name.to_owned(),
                rx_bytes: Some(fields[0]),
                rx_errors: Some(fields[2]),
                tx_bytes: Some(fields[8]),
                tx_errors: Some(fields[10]),
            })
        })
        .collect()
}

/// The interface kubelet reports inline: `eth0` (kubelet's default interface name), else
/// the first one.
pub fn default_interface(interfaces: &[InterfaceStats]) -> InterfaceStats {
    interfaces
        .iter()
        .find(|i| i.name == "eth0")
        .or_else(|| interfaces.first())
        .cloned()
        .unwrap_or_default()
}

/// The node's CPU time in nanoseconds from `/proc/stat`'s `cpu` line: user, nice,
/// system, irq, softirq and steal (not idle nor iowait), in ticks of `hz`.
pub fn cpu_ns(text: &str, hz: u64) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|i| ticks.get(*i)).sum();
    (hz > 0 && ticks.len() >= 4).then(|| busy.saturating_mul(1_000_000_000 / hz))
}

/// A `/proc/meminfo` field in bytes: the node status's parser.
pub use crate::node_status::machine::meminfo_field;

/// A `/proc/vmstat` counter.
pub fn vmstat_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok()).flatten()
    })
}

/// The cgroup v2 path of `/proc/<pid>/cgroup` (its `0::` line), else the v1 memory
/// controller's.
pub fn own_cgroup(text: &str) -> Option<String> {
    let unified = text.lines().find_map(|l| l.strip_prefix("0::"));
    let memory = || {
        text.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == "memory").then_some(path)
        })
    };
    unified.or_else(memory).map(str::to_owned)
}

/// The source (device) of the mount `path` is on, from `/proc/self/mounts`: the longest
/// mount point that is `path` or one of its parents (the last mounted wins a tie).
pub fn mount_source(mounts: &str, path: &str) -> Option<String> {
    let mut best: Option<(&str, &str)> = None;
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (Some(source), Some(point)) = (fields.next(), fields.next()) else { continue };
        let point = point.replace("\\040", " ");
        let under = path == point
            || point == "/"
            || path.strip_prefix(point.as_str()).is_some_and(|rest| rest.starts_with('/'));
        if under && best.is_none_or(|(p, _)| point.len() >= p.len()) {
            best = Some((mounts_point(line), source));
        }
    }
    best.map(|(_, source)| source.to_owned())
}

/// The mount point field of a mounts line, as written.
fn mounts_point(line: &str) -> &str {
    line.split_whitespace().nth(1).unwrap_or_default()
}

#[cfg(test)]
mod tests;
