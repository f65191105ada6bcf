//! What each pod and container uses, read from their cgroups' files at scrape time (no
//! sampling), with kubelet's resource-metric names: `pod_cpu_usage_seconds_total`,
//! `pod_memory_working_set_bytes`, `container_cpu_usage_seconds_total`,
//! `container_memory_working_set_bytes` (labels `namespace`, `pod`, `container`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ContainerStatus;
use outpost_core::pod;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::podconfig::SnapshotHandle;
use crate::runtime::cgroups::{PodCgroups, Usage as CgroupUsage};
use crate::status::StatusStore;

#[derive(Debug)]
pub(super) struct Usage {
    pub snapshot: SnapshotHandle,
    pub statuses: StatusStore,
    pub cgroups: Arc<PodCgroups>,
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
        let snap = self.snapshot.load();
        let mut pods = Vec::new();
        let mut containers = Vec::new();
        for (_, desired) in &snap.pods {
            let Some(status) = self.statuses.get(pod::uid(desired)) else { continue };
            let namespace = desired.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = desired.metadata.name.clone().unwrap_or_default();
            let running: Vec<&ContainerStatus> = status
                .container_statuses
                .iter()
                .chain(status.init_container_statuses.iter())
                .flatten()
                .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
                .collect();
            let ids = running.iter().filter_map(|c| {
                c.container_id.as_deref().map(|id| id.trim_start_matches("containerd://"))
            });
            let (own, by_container) = self.cgroups.usage(&crate::host::Kernel, desired, ids);
            if let Some(usage) = own {
                pods.push((vec![("namespace", namespace.clone()), ("pod", name.clone())], usage));
            }
            for (id, usage) in by_container {
                let Some(usage) = usage else { continue };
                let Some(container) = running
                    .iter()
                    .find(|c| c.container_id.as_deref().is_some_and(|c| c.ends_with(id)))
                else {
                    continue;
                };
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
