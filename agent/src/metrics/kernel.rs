//! What the kernel (eBPF) counts: each pod's network traffic, read from the pod cgroups'
//! per-CPU counters at scrape time (no polling), and each container's execs.

use std::collections::HashMap;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::ebpf::Handle;
use crate::ebpf::records::Traffic;
use crate::podconfig::SnapshotHandle;

#[derive(Debug)]
pub(super) struct Kernel {
    pub snapshot: SnapshotHandle,
    pub ebpf: Handle,
}

/// One traffic family: name, help, and which counter.
type Family = (&'static str, &'static str, fn(&Traffic) -> u64);

const TRAFFIC: [Family; 4] = [
    ("pod_network_receive_bytes", "Bytes received by a pod's sockets", |t| t.rx_bytes),
    ("pod_network_receive_packets", "Packets received by a pod's sockets", |t| t.rx_packets),
    ("pod_network_transmit_bytes", "Bytes sent by a pod's sockets", |t| t.tx_bytes),
    ("pod_network_transmit_packets", "Packets sent by a pod's sockets", |t| t.tx_packets),
];

impl Collector for Kernel {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        ConstGauge::new(i64::from(self.ebpf.is_loaded())).encode(encoder.encode_descriptor(
            "ebpf_loaded",
            "Whether the eBPF programs are loaded (1) or the agent runs on containerd's events alone (0)",
            None,
            MetricType::Gauge,
        )?)?;
        // Families without samples are left out (some parsers take a bare descriptor for
        // part of the next family).
        let traffic = if self.ebpf.is_loaded() {
            pods_traffic(&self.snapshot, self.ebpf.pod_traffic())
        } else {
            Vec::new()
        };
        if !traffic.is_empty() {
            for (name, help, counter) in TRAFFIC {
                let mut family =
                    encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
                for ((namespace, pod), t) in &traffic {
                    let labels = [("namespace", namespace.as_str()), ("pod", pod.as_str())];
                    ConstCounter::new(counter(t)).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        // Empty without BPF: nothing records execs then.
        let mut execs = self.ebpf.exec_counts();
        if execs.is_empty() {
            return Ok(());
        }
        execs.sort();
        let mut family = encoder.encode_descriptor(
            "pod_process_execs",
            "Programs run (execve) in a pod's containers, as the kernel saw them",
            None,
            MetricType::Counter,
        )?;
        for (namespace, pod, container, n) in &execs {
            let labels = [
                ("namespace", namespace.as_str()),
                ("pod", pod.as_str()),
                ("container", container.as_str()),
            ];
            ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Traffic by desired pod (namespace, name), from traffic by pod UID; pods that are not
/// desired any more (or another agent's) are left out.
fn pods_traffic(
    snapshot: &SnapshotHandle,
    by_uid: Vec<(String, Traffic)>,
) -> Vec<((String, String), Traffic)> {
    let snap = snapshot.load();
    let names: HashMap<&str, (&str, &str)> = snap
        .pods
        .iter()
        .map(|(_, pod)| {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            (outpost_core::pod::uid(pod), (namespace, name))
        })
        .collect();
    let mut out: Vec<((String, String), Traffic)> = by_uid
        .iter()
        .filter_map(|(uid, t)| {
            let (namespace, name) = names.get(uid.as_str())?;
            Some((((*namespace).to_owned(), (*name).to_owned()), *t))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
