//! `/metrics/cadvisor` from a reading, as kubelet's embedded cAdvisor writes the series
//! dashboards use: for the machine's root cgroup (`id="/"`), for each pod's cgroup
//! (`container=""`) and for each container, with cAdvisor's labels `container`, `id`
//! (the cgroup), `image`, `name` (the runtime's container ID), `namespace`, `pod`, in
//! cAdvisor's (sorted) order, and each sample stamped with its reading's time. Pure.

use super::Reading;
use super::exposition::{Family, Kind};
use super::resource::millis;
use super::summary::{CpuStats, MemoryStats};

/// Whose series: cAdvisor's six labels.
struct Subject<'a> {
    container: &'a str,
    id: &'a str,
    image: &'a str,
    name: &'a str,
    namespace: &'a str,
    pod: &'a str,
}

impl Subject<'_> {
    /// The labels, with `extra` (`cpu`, `device`, `interface`) in sorted place.
    fn labels(&self, extra: Option<(&'static str, &str)>) -> Vec<(&'static str, String)> {
        let mut labels = vec![
            ("container", self.container.to_owned()),
            ("id", self.id.to_owned()),
            ("image", self.image.to_owned()),
            ("name", self.name.to_owned()),
            ("namespace", self.namespace.to_owned()),
            ("pod", self.pod.to_owned()),
        ];
        if let Some((key, value)) = extra {
            labels.push((key, value.to_owned()));
            labels.sort_by_key(|(k, _)| *k);
        }
        labels
    }
}

/// The families, one per name.
struct Families {
    cpu: Family,
    memory_usage: Family,
    working_set: Family,
    rss: Family,
    swap: Family,
    rx_bytes: Family,
    rx_errors: Family,
    tx_bytes: Family,
    tx_errors: Family,
    fs_usage: Family,
    fs_limit: Family,
    fs_inodes: Family,
    fs_inodes_free: Family,
    last_seen: Family,
    start_time: Family,
    cpu_shares: Family,
    cpu_period: Family,
    cpu_quota: Family,
    memory_limit: Family,
}

impl Families {
    fn new() -> Families {
        use Kind::{Counter, Gauge};
        Families {
            cpu: Family::new(
                "container_cpu_usage_seconds_total",
                "Cumulative cpu time consumed in seconds.",
                Counter,
            ),
            memory_usage: Family::new(
                "container_memory_usage_bytes",
                "Current memory usage in bytes, including all memory regardless of when it was accessed",
                Gauge,
            ),
            working_set: Family::new(
                "container_memory_working_set_bytes",
                "Current working set in bytes.",
                Gauge,
            ),
            rss: Family::new("container_memory_rss", "Size of RSS in bytes.", Gauge),
            swap: Family::new("container_memory_swap", "Container swap usage in bytes.", Gauge),
            rx_bytes: Family::new(
                "container_network_receive_bytes_total",
                "Cumulative count of bytes received",
                Counter,
            ),
            rx_errors: Family::new(
                "container_network_receive_errors_total",
                "Cumulative count of errors encountered while receiving",
                Counter,
            ),
            tx_bytes: Family::new(
                "container_network_transmit_bytes_total",
                "Cumulative count of bytes transmitted",
                Counter,
            ),
            tx_errors: Family::new(
                "container_network_transmit_errors_total",
                "Cumulative count of errors encountered while transmitting",
                Counter,
            ),
            fs_usage: Family::new(
                "container_fs_usage_bytes",
                "Number of bytes that are consumed by the container on this filesystem.",
                Gauge,
            ),
            fs_limit: Family::new(
                "container_fs_limit_bytes",
                "Number of bytes that can be consumed by the container on this filesystem.",
                Gauge,
            ),
            fs_inodes: Family::new("container_fs_inodes_total", "Number of Inodes", Gauge),
            fs_inodes_free: Family::new(
                "container_fs_inodes_free",
                "Number of available Inodes",
                Gauge,
            ),
            last_seen: Family::new(
                "container_last_seen",
                "Last time a container was seen by the exporter",
                Gauge,
            ),
            start_time: Family::new(
                "container_start_time_seconds",
                "Start time of the container since unix epoch in seconds.",
                Gauge,
            ),
            cpu_shares: Family::new(
                "container_spec_cpu_shares",
                "CPU share of the container.",
                Gauge,
            ),
            cpu_period: Family::new(
                "container_spec_cpu_period",
                "CPU period of the container.",
                Gauge,
            ),
            cpu_quota: Family::new(
                "container_spec_cpu_quota",
                "CPU quota of the container.",
                Gauge,
            ),
            memory_limit: Family::new(
                "container_spec_memory_limit_bytes",
                "Memory limit for the container.",
                Gauge,
            ),
        }
    }

    /// CPU, memory and last-seen series of one subject.
    fn usage(
        &mut self,
        who: &Subject<'_>,
        cpu: Option<&CpuStats>,
        memory: Option<&MemoryStats>,
        at: i64,
    ) {
        if let Some(cpu) = cpu
            && let Some(ns) = cpu.usage_core_nano_seconds
        {
            self.cpu.push(
                who.labels(Some(("cpu", "total"))),
                ns as f64 / 1e9,
                Some(millis(&cpu.time)),
            );
        }
        if let Some(memory) = memory {
            let t = Some(millis(&memory.time));
            for (family, value) in [
                (&mut self.memory_usage, memory.usage_bytes),
                (&mut self.working_set, memory.working_set_bytes),
                (&mut self.rss, memory.rss_bytes),
            ] {
                if let Some(value) = value {
                    family.push(who.labels(None), value as f64, t);
                }
            }
        }
        self.last_seen.push(who.labels(None), (at / 1000) as f64, Some(at));
    }

    fn into_vec(self) -> Vec<Family> {
        vec![
            self.cpu,
            self.fs_inodes_free,
            self.fs_inodes,
            self.fs_limit,
            self.fs_usage,
            self.last_seen,
            self.rss,
            self.swap,
            self.memory_usage,
            self.working_set,
            self.rx_bytes,
            self.rx_errors,
            self.tx_bytes,
            self.tx_errors,
            self.cpu_period,
            self.cpu_quota,
            self.cpu_shares,
            self.memory_limit,
            self.start_time,
        ]
    }
}

/// cAdvisor's series of `reading`.
pub fn families(reading: &Reading) -> Vec<Family> {
    let at = reading.time.as_millisecond();
    let mut f = Families::new();
    let node = &reading.summary.node;
    let root = Subject { container: "", id: "/", image: "", name: "", namespace: "", pod: "" };
    f.usage(&root, node.cpu.as_ref(), node.memory.as_ref(), at);
    f.start_time.push(root.labels(None), node.start_time.0.as_second() as f64, Some(at));
    for (pod, meta) in reading.summary.pods.iter().zip(&reading.pods) {
        let (name, namespace) = (&pod.pod_ref.name, &pod.pod_ref.namespace);
        let who =
            Subject { container: "", id: &meta.cgroup, image: "", name: "", namespace, pod: name };
        f.usage(&who, pod.cpu.as_ref(), pod.memory.as_ref(), at);
        if let Some(swap) = pod.swap.as_ref().and_then(|s| s.swap_usage_bytes) {
            f.swap.push(who.labels(None), swap as f64, Some(at));
        }
        f.start_time.push(who.labels(None), pod.start_time.0.as_second() as f64, Some(at));
        for interface in pod.network.iter().flat_map(|n| &n.interfaces) {
            let labels = || who.labels(Some(("interface", interface.name.as_str())));
            let t = pod.network.as_ref().map(|n| millis(&n.time));
            for (family, value) in [
                (&mut f.rx_bytes, interface.rx_bytes),
                (&mut f.rx_errors, interface.rx_errors),
                (&mut f.tx_bytes, interface.tx_bytes),
                (&mut f.tx_errors, interface.tx_errors),
            ] {
                if let Some(value) = value {
                    family.push(labels(), value as f64, t);
                }
            }
        }
        for (container, c_meta) in pod.containers.iter().zip(&meta.containers) {
            let who = Subject {
                container: &container.name,
                id: &c_meta.cgroup,
                image: &c_meta.image,
                name: &c_meta.id,
                namespace,
                pod: name,
            };
            f.usage(&who, container.cpu.as_ref(), container.memory.as_ref(), at);
            if let Some(swap) = container.swap.as_ref().and_then(|s| s.swap_usage_bytes) {
                f.swap.push(who.labels(None), swap as f64, Some(at));
            }
            f.start_time.push(
                who.labels(None),
                container.start_time.0.as_second() as f64,
                Some(at),
            );
            if let Some(rootfs) = &container.rootfs {
                let device = reading.imagefs_device.as_deref().unwrap_or_default();
                let labels = || who.labels(Some(("device", device)));
                let t = Some(millis(&rootfs.time));
                for (family, value) in [
                    (&mut f.fs_usage, rootfs.used_bytes),
                    (&mut f.fs_limit, rootfs.capacity_bytes),
                    (&mut f.fs_inodes, rootfs.inodes),
                    (&mut f.fs_inodes_free, rootfs.inodes_free),
                ] {
                    if let Some(value) = value {
                        family.push(labels(), value as f64, t);
                    }
                }
            }
            let spec = Some(at);
            f.cpu_shares.push(who.labels(None), c_meta.cpu_shares as f64, spec);
            f.cpu_period.push(who.labels(None), c_meta.cpu_period as f64, spec);
            if let Some(quota) = c_meta.cpu_quota {
                f.cpu_quota.push(who.labels(None), quota as f64, spec);
            }
            f.memory_limit.push(who.labels(None), c_meta.memory_limit.unwrap_or(0) as f64, spec);
        }
    }
    let mut families = f.into_vec();
    let mut cores = Family::new("machine_cpu_cores", "Number of logical CPU cores.", Kind::Gauge);
    cores.push(Vec::new(), reading.cpus as f64, Some(at));
    let mut memory = Family::new(
        "machine_memory_bytes",
        "Amount of memory installed on the machine.",
        Kind::Gauge,
    );
    memory.push(Vec::new(), reading.memory_bytes as f64, Some(at));
    let mut error = Family::new(
        "container_scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        Kind::Gauge,
    );
    error.push(Vec::new(), f64::from(u8::from(reading.failed)), None);
    families.extend([error, cores, memory]);
    families
}

#[cfg(test)]
mod tests;
