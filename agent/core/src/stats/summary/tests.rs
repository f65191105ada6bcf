//! The Summary API's JSON against kubelet's field names and shapes (N2).

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::stats::exposition;
use crate::stats::resource;

fn time(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap())
}

fn cpu(ns: u64) -> CpuStats {
    CpuStats {
        time: time(100),
        usage_nano_cores: Some(250_000_000),
        usage_core_nano_seconds: Some(ns),
    }
}

fn memory(ws: u64) -> MemoryStats {
    MemoryStats {
        time: time(100),
        available_bytes: None,
        usage_bytes: Some(ws + 10),
        working_set_bytes: Some(ws),
        rss_bytes: Some(ws / 2),
        page_faults: Some(7),
        major_page_faults: Some(1),
    }
}

fn fs(used: u64) -> FsStats {
    FsStats {
        used_bytes: Some(used),
        inodes_used: Some(2),
        capacity_bytes: Some(1000),
        ..FsStats::at(time(100))
    }
}

fn sample() -> Summary {
    let container = ContainerStats {
        name: "web".into(),
        start_time: time(50),
        cpu: Some(cpu(2_000_000_000)),
        memory: Some(memory(4096)),
        rootfs: Some(fs(10)),
        logs: Some(fs(20)),
        swap: None,
    };
    let interface = InterfaceStats {
        name: "eth0".into(),
        rx_bytes: Some(1),
        rx_errors: Some(0),
        tx_bytes: Some(2),
        tx_errors: Some(0),
    };
    Summary {
        node: NodeStats {
            node_name: "edge-1".into(),
            system_containers: Vec::new(),
            start_time: time(1),
            cpu: Some(cpu(9_000_000_000)),
            memory: Some(memory(1 << 20)),
            network: Some(NetworkStats {
                time: time(100),
                default: interface.clone(),
                interfaces: vec![interface.clone()],
            }),
            fs: Some(fs(500)),
            runtime: Some(RuntimeStats { image_fs: Some(fs(300)) }),
            rlimit: Some(RlimitStats {
                time: time(100),
                maxpid: Some(4194304),
                curproc: Some(300),
            }),
            swap: None,
        },
        pods: vec![PodStats {
            pod_ref: PodReference { name: "p".into(), namespace: "ns".into(), uid: "u".into() },
            start_time: time(40),
            containers: vec![container],
            cpu: Some(cpu(3_000_000_000)),
            memory: Some(memory(8192)),
            network: Some(NetworkStats {
                time: time(100),
                default: interface,
                interfaces: Vec::new(),
            }),
            volume_stats: vec![VolumeStats { fs: fs(5), name: "cache".into(), pvc_ref: None }],
            ephemeral_storage: FsStats::sum(time(100), Some(&fs(500)), [&fs(10), &fs(20), &fs(5)]),
            process_stats: Some(ProcessStats { process_count: Some(3) }),
            swap: None,
        }],
    }
}

#[test]
fn n2_summary_serializes_with_kubelets_names() {
    let json = serde_json::to_value(sample()).unwrap();
    let node = &json["node"];
    assert_eq!(node["nodeName"], "edge-1");
    assert_eq!(node["startTime"], "1970-01-01T00:00:01Z");
    assert_eq!(node["cpu"]["usageCoreNanoSeconds"], 9_000_000_000u64);
    assert_eq!(node["cpu"]["usageNanoCores"], 250_000_000);
    assert_eq!(node["memory"]["workingSetBytes"], 1 << 20);
    assert_eq!(node["memory"]["rssBytes"], 1 << 19);
    assert_eq!(node["memory"]["pageFaults"], 7);
    assert_eq!(node["memory"]["majorPageFaults"], 1);
    assert!(node["memory"].get("availableBytes").is_none(), "unknown figures are left out");
    // The default interface inline, and the list.
    assert_eq!(node["network"]["name"], "eth0");
    assert_eq!(node["network"]["rxBytes"], 1);
    assert_eq!(node["network"]["interfaces"][0]["txBytes"], 2);
    assert_eq!(node["fs"]["usedBytes"], 500);
    assert_eq!(node["runtime"]["imageFs"]["usedBytes"], 300);
    assert_eq!(node["rlimit"]["maxpid"], 4194304);
    assert_eq!(node["rlimit"]["curproc"], 300);
    assert!(node.get("systemContainers").is_none());
    let pod = &json["pods"][0];
    assert_eq!(pod["podRef"], serde_json::json!({"name": "p", "namespace": "ns", "uid": "u"}));
    assert_eq!(pod["containers"][0]["name"], "web");
    assert_eq!(pod["containers"][0]["rootfs"]["usedBytes"], 10);
    assert_eq!(pod["containers"][0]["logs"]["inodesUsed"], 2);
    assert_eq!(pod["volume"][0]["name"], "cache");
    assert_eq!(pod["volume"][0]["usedBytes"], 5, "a volume's fs figures are inline");
    assert_eq!(pod["ephemeral-storage"]["usedBytes"], 35);
    assert_eq!(pod["ephemeral-storage"]["inodesUsed"], 6);
    assert_eq!(pod["ephemeral-storage"]["capacityBytes"], 1000);
    assert_eq!(pod["process_stats"]["process_count"], 3);
    // And back: a client with kubelet's types reads it.
    let back: Summary = serde_json::from_value(json).unwrap();
    assert_eq!(back, sample());
}

#[test]
fn n2_only_cpu_and_memory_drops_the_rest() {
    assert!(only_cpu_and_memory(Some("only_cpu_and_memory=true")));
    assert!(!only_cpu_and_memory(Some("only_cpu_and_memory=false")));
    assert!(!only_cpu_and_memory(None));
    let json = serde_json::to_value(sample().cpu_and_memory()).unwrap();
    let node = json["node"].as_object().unwrap();
    let mut keys: Vec<&str> = node.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["cpu", "memory", "nodeName", "startTime"]);
    let pod = json["pods"][0].as_object().unwrap();
    let mut keys: Vec<&str> = pod.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["containers", "cpu", "memory", "podRef", "startTime"]);
    let container = json["pods"][0]["containers"][0].as_object().unwrap();
    assert!(container.get("rootfs").is_none() && container.get("logs").is_none());
    assert!(container.get("cpu").is_some());
}

#[test]
fn n2_ephemeral_storage_is_unknown_without_parts() {
    assert_eq!(FsStats::sum(time(1), None, []), None);
    assert_eq!(FsStats::sum(time(1), None, [&FsStats::at(time(1))]), None);
}

#[test]
fn n2_resource_metrics_have_kubelets_names_labels_and_timestamps() {
    let text = exposition::encode(&resource::families(&sample(), false));
    for line in [
        "# TYPE node_cpu_usage_seconds_total counter",
        "node_cpu_usage_seconds_total 9 100000",
        "node_memory_working_set_bytes 1048576 100000",
        "container_cpu_usage_seconds_total{container=\"web\",pod=\"p\",namespace=\"ns\"} 2 100000",
        "container_memory_working_set_bytes{container=\"web\",pod=\"p\",namespace=\"ns\"} 4096 100000",
        "container_start_time_seconds{container=\"web\",pod=\"p\",namespace=\"ns\"} 50",
        "pod_cpu_usage_seconds_total{pod=\"p\",namespace=\"ns\"} 3 100000",
        "pod_memory_working_set_bytes{pod=\"p\",namespace=\"ns\"} 8192 100000",
        "resource_scrape_error 0",
        "scrape_error 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert!(!text.contains("swap"), "no swap read, no swap series");
    let failed = exposition::encode(&resource::families(&sample(), true));
    assert!(failed.lines().any(|l| l == "resource_scrape_error 1"));
}
