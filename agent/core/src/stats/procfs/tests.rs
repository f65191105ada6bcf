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
    let mounts =
        "/dev/sda1 / ext4 rw 0 0\n/dev/sdb1 /var/lib ext4 rw 0 0\ntmpfs /var/lib/x tmpfs rw 0 0\n";
    assert_eq!(mount_source(mounts, "/var/lib/containerd").as_deref(), Some("/dev/sdb1"));
    assert_eq!(mount_source(mounts, "/var/library").as_deref(), Some("/dev/sda1"));
    assert_eq!(mount_source(mounts, "/var/lib/x").as_deref(), Some("tmpfs"));
}
