use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::stats::exposition::encode;
use crate::stats::summary::{
    ContainerStats, FsStats, InterfaceStats, NetworkStats, PodReference, PodStats, Summary,
};
use crate::stats::{ContainerMeta, PodMeta};

fn time() -> Time {
    Time(Timestamp::from_second(100).unwrap())
}

fn cpu(ns: u64) -> CpuStats {
    CpuStats { time: time(), usage_nano_cores: None, usage_core_nano_seconds: Some(ns) }
}

fn memory(ws: u64) -> MemoryStats {
    MemoryStats {
        time: time(),
        available_bytes: None,
        usage_bytes: Some(ws * 2),
        working_set_bytes: Some(ws),
        rss_bytes: Some(ws / 2),
        page_faults: None,
        major_page_faults: None,
    }
}

fn reading() -> Reading {
    let mut reading = Reading::failed("edge-1", Timestamp::from_second(101).unwrap());
    reading.failed = false;
    reading.cpus = 2;
    reading.memory_bytes = 1 << 30;
    reading.imagefs_device = Some("/dev/sda1".into());
    reading.summary.node.cpu = Some(cpu(5_000_000_000));
    reading.summary.node.memory = Some(memory(4096));
    let interface = InterfaceStats {
        name: "eth0".into(),
        rx_bytes: Some(10),
        rx_errors: Some(0),
        tx_bytes: Some(20),
        tx_errors: Some(1),
    };
    reading.summary = Summary {
        pods: vec![PodStats {
            pod_ref: PodReference { name: "p".into(), namespace: "ns".into(), uid: "u".into() },
            start_time: time(),
            containers: vec![ContainerStats {
                name: "web".into(),
                start_time: Time(Timestamp::from_second(90).unwrap()),
                cpu: Some(cpu(1_500_000_000)),
                memory: Some(memory(1000)),
                rootfs: Some(FsStats {
                    used_bytes: Some(7),
                    capacity_bytes: Some(100),
                    ..FsStats::at(time())
                }),
                logs: None,
                swap: None,
            }],
            cpu: Some(cpu(2_000_000_000)),
            memory: Some(memory(2000)),
            network: Some(NetworkStats {
                time: time(),
                default: interface.clone(),
                interfaces: vec![interface],
            }),
            volume_stats: Vec::new(),
            ephemeral_storage: None,
            process_stats: None,
            swap: None,
        }],
        ..reading.summary
    };
    reading.pods = vec![PodMeta {
        cgroup: "/kubepods/besteffort/podu".into(),
        containers: vec![ContainerMeta {
            image: "busybox:1".into(),
            id: "abc".into(),
            cgroup: "/kubepods/besteffort/podu/abc".into(),
            cpu_shares: 2,
            cpu_period: 100_000,
            cpu_quota: None,
            memory_limit: None,
        }],
    }];
    reading
}

#[test]
fn n2_cadvisor_series_have_its_labels_pod_level_series_and_timestamps() {
    let text = encode(&families(&reading()));
    for line in [
        "container_cpu_usage_seconds_total{container=\"\",cpu=\"total\",id=\"/\",image=\"\",name=\"\",namespace=\"\",pod=\"\"} 5 100000",
        "container_cpu_usage_seconds_total{container=\"web\",cpu=\"total\",id=\"/kubepods/besteffort/podu/abc\",image=\"busybox:1\",name=\"abc\",namespace=\"ns\",pod=\"p\"} 1.5 100000",
        "container_cpu_usage_seconds_total{container=\"\",cpu=\"total\",id=\"/kubepods/besteffort/podu\",image=\"\",name=\"\",namespace=\"ns\",pod=\"p\"} 2 100000",
        "container_memory_working_set_bytes{container=\"web\",id=\"/kubepods/besteffort/podu/abc\",image=\"busybox:1\",name=\"abc\",namespace=\"ns\",pod=\"p\"} 1000 100000",
        "container_memory_rss{container=\"\",id=\"/kubepods/besteffort/podu\",image=\"\",name=\"\",namespace=\"ns\",pod=\"p\"} 1000 100000",
        "container_network_transmit_errors_total{container=\"\",id=\"/kubepods/besteffort/podu\",image=\"\",interface=\"eth0\",name=\"\",namespace=\"ns\",pod=\"p\"} 1 100000",
        "container_fs_usage_bytes{container=\"web\",device=\"/dev/sda1\",id=\"/kubepods/besteffort/podu/abc\",image=\"busybox:1\",name=\"abc\",namespace=\"ns\",pod=\"p\"} 7 100000",
        "container_spec_memory_limit_bytes{container=\"web\",id=\"/kubepods/besteffort/podu/abc\",image=\"busybox:1\",name=\"abc\",namespace=\"ns\",pod=\"p\"} 0 101000",
        "container_start_time_seconds{container=\"web\",id=\"/kubepods/besteffort/podu/abc\",image=\"busybox:1\",name=\"abc\",namespace=\"ns\",pod=\"p\"} 90 101000",
        "container_last_seen{container=\"web\",id=\"/kubepods/besteffort/podu/abc\",image=\"busybox:1\",name=\"abc\",namespace=\"ns\",pod=\"p\"} 101 101000",
        "machine_cpu_cores 2 101000",
        "container_scrape_error 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert!(!text.contains("container_spec_cpu_quota"), "no quota, no series");
    assert!(!text.contains("container_memory_swap"), "no swap read, no series");
}
