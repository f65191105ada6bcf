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
pub use outpost_core::node_status::machine::meminfo_field;

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
mod tests {
    use super::*;

    const NET_DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0
  eth0: 5000      40    2    0    0     0          0         0     7000      50    3    0    0     0       0          0
veth12ab:  10       1    0    0    0     0          0         0       20       2    0    0    0     0       0          0
";

    #[test]
    fn n2_interfaces_are_read_without_loopback_and_pod_veths() {
        let host = net_dev(NET_DEV, true);
        assert_eq!(host.len(), 1);
        assert_eq!(
            host[0],
            InterfaceStats {
                name: "eth0".into(),
                rx_bytes: Some(5000),
                rx_errors: Some(2),
                tx_bytes: Some(7000),
                tx_errors: Some(3),
            }
        );
        assert_eq!(net_dev(NET_DEV, false).len(), 2, "a pod's own veth-named interfaces count");
        assert_eq!(default_interface(&host).name, "eth0");
        assert_eq!(default_interface(&[]), InterfaceStats::default());
    }

    #[test]
    fn n2_node_cpu_is_the_busy_ticks() {
        let stat = "cpu  10 2 3 1000 50 4 5 6 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n";
        assert_eq!(cpu_ns(stat, 100), Some((10 + 2 + 3 + 4 + 5 + 6) * 10_000_000));
        assert_eq!(cpu_ns("intr 1\n", 100), None);
    }

    #[test]
    fn n2_meminfo_vmstat_and_cgroup_fields() {
        let meminfo = "MemTotal:  2048 kB\nInactive(file):  1 kB\nAnonPages: 3 kB\n";
        assert_eq!(meminfo_field(meminfo, "MemTotal"), Some(2048 * 1024));
        assert_eq!(meminfo_field(meminfo, "Inactive(file)"), Some(1024));
        assert_eq!(meminfo_field(meminfo, "MemFree"), None);
        assert_eq!(vmstat_field("pgfault 77\npgmajfault 3\n", "pgmajfault"), Some(3));
        assert_eq!(
            own_cgroup("0::/system.slice/outpost.service\n").as_deref(),
            Some("/system.slice/outpost.service")
        );
        assert_eq!(own_cgroup("5:cpu,cpuacct:/a\n4:memory:/b\n").as_deref(), Some("/b"));
    }

    #[test]
    fn n2_the_mount_of_a_path_is_the_longest_mount_point_above_it() {
        let mounts = "/dev/sda1 / ext4 rw 0 0\n/dev/sdb1 /var/lib ext4 rw 0 0\ntmpfs /var/lib/x tmpfs rw 0 0\n";
        assert_eq!(mount_source(mounts, "/var/lib/containerd").as_deref(), Some("/dev/sdb1"));
        assert_eq!(mount_source(mounts, "/var/library").as_deref(), Some("/dev/sda1"));
        assert_eq!(mount_source(mounts, "/var/lib/x").as_deref(), Some("tmpfs"));
    }
}
