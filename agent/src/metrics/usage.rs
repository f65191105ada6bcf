//! What each pod and container uses, read from their cgroups' files at scrape time (no
//! sampling) by the node's stats ([`Stats::usage`]), with kubelet's resource-metric names: `pod_cpu_usage_seconds_total`,
//! `pod_memory_working_set_bytes`, `container_cpu_usage_seconds_total`,
//! `container_memory_working_set_bytes` (labels `namespace`, `pod`, `container`).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::runtime::cgroups::Usage as CgroupUsage;
use crate::stats::Stats;

/// The pods' and containers' usage, as the node's stats read their cgroups.
#[derive(Debug)]
pub(super) struct Usage {
    pub stats: Stats,
}

/// One sample's labels (namespace, pod, container) and what its cgroup used.
type Sample = (Vec<(&'static str, String)>, CgroupUsage);

impl Collector for Usage {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (pods, containers) = self.samples();
        let families = [
            (&pods, "pod_cpu_usage_seconds", "pod_memory_working_set_bytes", "pod"),
            (
                &containers,
                "container_cpu_usage_seconds",
                "container_memory_working_set_bytes",
                "container",
            ),
        ];
        for (samples, cpu_name, memory_name, scope) in families {
            let cpu: Vec<(&Sample, f64)> =
                samples.iter().filter_map(|s| Some((s, s.1.cpu_ns? as f64 / 1e9))).collect();
            // Families without samples are left out, as the other collectors do.
            if !cpu.is_empty() {
                let help = format!("CPU time the {scope}'s cgroup used, in seconds (kubelet's)");
                let mut family =
                    encoder.encode_descriptor(cpu_name, &help, None, MetricType::Counter)?;
                for ((labels, _), seconds) in cpu {
                    let labels: Vec<(&str, &str)> =
                        labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    ConstCounter::new(seconds).encode(family.encode_family(&labels)?)?;
                }
            }
            let memory: Vec<(&Sample, u64)> =
                samples.iter().filter_map(|s| Some((s, s.1.working_set_bytes?))).collect();
            if !memory.is_empty() {
                let help = format!(
                    "The {scope}'s cgroup memory less its inactive file cache, in bytes \
                     (kubelet's working set)"
                );
                let mut family =
                    encoder.encode_descriptor(memory_name, &help, None, MetricType::Gauge)?;
                for ((labels, _), bytes) in memory {
                    let labels: Vec<(&str, &str)> =
                        labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    ConstGauge::new(i64::try_from(bytes).unwrap_or(i64::MAX))
                        .encode(family.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

impl Usage {
    /// The desired pods the workers report, and their running containers, with what
    /// their cgroups use now (those whose cgroup is gone are left out).
    fn samples(&self) -> (Vec<Sample>, Vec<Sample>) {
        let mut pods = Vec::new();
        let mut containers = Vec::new();
        for (target, usage) in self.stats.usage() {
            let pod = target.pod();
            let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = pod.metadata.name.clone().unwrap_or_default();
            if let Some(usage) = usage.own {
                pods.push((vec![("namespace", namespace.clone()), ("pod", name.clone())], usage));
            }
            for (container, usage) in target.containers().zip(usage.containers) {
                let Some(usage) = usage else { continue };
                let labels = vec![
                    ("namespace", namespace.clone()),
                    ("pod", name.clone()),
                    ("container", container.name.clone()),
                ];
                containers.push((labels, usage));
            }
        }
        (pods, containers)
    }
}
