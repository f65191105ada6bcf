use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodStatus,
};
use k8s_openapi::jiff::Timestamp;
use outpost_core::merge::DeltaOp;
use outpost_core::pod::Source;

use super::*;
use crate::apiserver::{Health, Recorder};
use crate::config::Backend;
use crate::podconfig::{Snapshot, SourceHealth, SourceState};

/// A registry with the scrape-time collectors, as `outpost run` makes it.
fn registry(snapshot: SnapshotHandle, sources: Sources) -> Registry {
    let mut registry = Registry::default();
    register(&mut registry, snapshot, sources);
    registry
}

fn has_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.lines().any(|l| l == *line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn source_health_is_exported() {
    let snapshot = Snapshot {
        sources: vec![
            SourceHealth {
                source: Source::File,
                state: SourceState::Live,
                last_error: None,
                errors_total: 0,
                last_success: Some(Timestamp::from_second(1_700_000_000).unwrap()),
                problems: Vec::new(),
            },
            SourceHealth {
                source: Source::Url,
                state: SourceState::Checkpoint,
                last_error: Some("connection refused".into()),
                errors_total: 3,
                last_success: None,
                problems: Vec::new(),
            },
        ],
        ..Snapshot::default()
    };
    let handle = SnapshotHandle::from(snapshot);
    let text = render(&registry(handle, Sources::default())).unwrap();
    for line in [
        "outpost_source_state{source=\"url\",state=\"checkpoint\"} 1",
        "outpost_source_state{source=\"url\",state=\"live\"} 0",
        "outpost_source_errors_total{source=\"url\"} 3",
        "outpost_source_errors_total{source=\"file\"} 0",
        "outpost_source_last_success_timestamp_seconds{source=\"file\"} 1700000000.0",
        "outpost_pods{source=\"file\"} 0",
        "outpost_pod_conflicts 0",
        "# EOF",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    assert!(!text.contains("last_success_timestamp_seconds{source=\"url\"}"), "{text}");
}

#[test]
fn sync_and_events_are_exported() {
    let connectivity = crate::apiserver::Connectivity::default();
    connectivity.reachable();
    let backlog = tokio::sync::watch::Sender::new(crate::apiserver::StatusBacklog {
        version: 7,
        queued: 3,
        due: 3,
    });
    let events = Recorder::default();
    let node = crate::apiserver::events::node_ref("edge-1");
    events.emit(&node, crate::apiserver::events::EventType::Warning, "FailedValidation", "bad");
    let sources = Sources {
        sync: Some(Health { connectivity, status_backlog: backlog.subscribe() }),
        events,
        ..Sources::default()
    };
    let handle = SnapshotHandle::default();
    let text = render(&registry(handle, sources)).unwrap();
    for line in [
        "outpost_apiserver_reachable 1",
        "outpost_pod_status_updates_queued 3",
        "outpost_events_recorded_total 1",
        "outpost_events_rate_limited_total 0",
        "outpost_events_dropped_total 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    // Without a kubeconfig there is no API server to report on.
    let handle = SnapshotHandle::default();
    let text = render(&registry(handle, Sources::default())).unwrap();
    assert!(!text.contains("outpost_apiserver_reachable"), "{text}");
}

fn pod(uid: &str, name: &str) -> Arc<Pod> {
    let mut pod = Pod::default();
    pod.metadata.uid = Some(uid.to_owned());
    pod.metadata.name = Some(name.to_owned());
    pod.metadata.namespace = Some("default".to_owned());
    Arc::new(pod)
}

fn live(source: Source) -> SourceHealth {
    SourceHealth {
        source,
        state: SourceState::Live,
        last_error: None,
        errors_total: 0,
        last_success: None,
        problems: Vec::new(),
    }
}

fn status(phase: &str, running: &[bool]) -> PodStatus {
    let container = |(i, up): (usize, &bool)| ContainerStatus {
        name: format!("c{i}"),
        state: Some(if *up {
            ContainerState { running: Some(ContainerStateRunning::default()), ..Default::default() }
        } else {
            ContainerState::default()
        }),
        ..Default::default()
    };
    PodStatus {
        phase: Some(phase.to_owned()),
        container_statuses: Some(running.iter().enumerate().map(container).collect()),
        ..Default::default()
    }
}

#[test]
fn running_pods_and_containers_join_statuses_with_sources() {
    let snapshot = Snapshot {
        pods: vec![
            (Source::File, pod("a", "web")),
            (Source::File, pod("b", "db")),
            (Source::Url, pod("c", "proxy")),
            (Source::File, pod("d", "not-started-yet")),
        ],
        sources: vec![live(Source::File), live(Source::Url), live(Source::Push)],
        ..Snapshot::default()
    };
    let statuses = StatusStore::default();
    statuses.set("a", status("Running", &[true, true]));
    statuses.set("b", status("Running", &[true, false]));
    statuses.set("c", status("Pending", &[false]));
    // A status of a pod no longer desired is not counted.
    statuses.set("gone", status("Running", &[true]));
    let handle = SnapshotHandle::from(snapshot);
    let sources = Sources { statuses, ..Sources::default() };
    let text = render(&registry(handle, sources)).unwrap();
    has_lines(
        &text,
        &[
            "outpost_running_pods{source=\"file\"} 2",
            "outpost_running_pods{source=\"url\"} 0",
            "outpost_running_pods{source=\"push\"} 0",
            "outpost_running_containers{source=\"file\"} 3",
            "outpost_running_containers{source=\"url\"} 0",
        ],
    );
}

#[test]
fn counted_metrics_are_exported() {
    let handle = SnapshotHandle::default();
    let mut registry = registry(handle, Sources::default());
    let outpost = registry.sub_registry_with_prefix("outpost");
    let merge = crate::podconfig::metrics::Merge::register(outpost);
    let sources = crate::source::metrics::SourceMetrics::register(outpost);
    let workers = crate::worker::metrics::Metrics::register(outpost);
    let images = crate::runtime::image::metrics::ImageImports::register(outpost);
    let checkpoints = crate::checkpoint::metrics::CheckpointWrites::register(outpost);
    merge.pod_delta(DeltaOp::Add, Source::File);
    merge.pod_delta(DeltaOp::Add, Source::File);
    merge.pod_delta(DeltaOp::Remove, Source::Push);
    sources.manifest_rejected(Source::Url);
    workers.container_restarted(Source::File);
    workers.pod_started(Source::File, Duration::from_millis(300));
    images.image_imported(Duration::from_secs(2));
    workers.image_pulled(Duration::from_millis(20));
    checkpoints.checkpoint_written("push", true);
    checkpoints.checkpoint_written("url", false);
    let text = render(&registry).unwrap();
    has_lines(
        &text,
        &[
            "# TYPE outpost_pod_deltas counter",
            "outpost_pod_deltas_total{op=\"add\",source=\"file\"} 2",
            "outpost_pod_deltas_total{op=\"remove\",source=\"push\"} 1",
            "outpost_manifest_errors_total{source=\"url\"} 1",
            "outpost_container_restarts_total{source=\"file\"} 1",
            "# TYPE outpost_pod_start_duration_seconds histogram",
            "outpost_pod_start_duration_seconds_count{source=\"file\"} 1",
            "outpost_pod_start_duration_seconds_bucket{le=\"0.32\",source=\"file\"} 1",
            "outpost_pod_start_duration_seconds_bucket{le=\"0.16\",source=\"file\"} 0",
            "outpost_image_import_duration_seconds_count 1",
            "outpost_image_import_duration_seconds_sum 2.0",
            "outpost_image_pull_duration_seconds_count 1",
            "outpost_checkpoint_writes_total{source=\"push\"} 1",
            "outpost_checkpoint_writes_total{source=\"url\"} 1",
            "outpost_checkpoint_write_failures_total{source=\"url\"} 1",
        ],
    );
    assert!(!text.contains("write_failures_total{source=\"push\"}"), "{text}");
    // No watcher reported yet: no info line; then the backend the file source uses.
    assert!(!text.contains("outpost_manifest_watcher_info"), "{text}");
    sources.manifest_watcher(Backend::Inotify);
    let text = render(&registry).unwrap();
    has_lines(
        &text,
        &[
            "# TYPE outpost_manifest_watcher info",
            "outpost_manifest_watcher_info{backend=\"inotify\"} 1",
        ],
    );
}

#[test]
fn probe_runs_are_counted_and_timed_per_container_until_removed() {
    let mut registry = Registry::default();
    let workers =
        crate::worker::metrics::Metrics::register(registry.sub_registry_with_prefix("outpost"));
    let labels = crate::worker::metrics::ProbeLabels {
        probe_type: "Readiness",
        namespace: "default",
        pod: "web",
        pod_uid: "u1",
        container: "nginx",
    };
    workers.probed(&labels, "successful", Duration::from_micros(800));
    workers.probed(&labels, "successful", Duration::from_millis(3));
    workers.probed(&labels, "failed", Duration::from_secs(1));
    let liveness = crate::worker::metrics::ProbeLabels { probe_type: "Liveness", ..labels };
    workers.probed(&liveness, "unknown", Duration::from_millis(15));
    let text = render(&registry).unwrap();
    let readiness = "container=\"nginx\",pod=\"web\",namespace=\"default\"";
    has_lines(
        &text,
        &[
            "# TYPE outpost_prober_probe counter",
            &format!(
                "outpost_prober_probe_total{{probe_type=\"Readiness\",result=\"successful\",{readiness},pod_uid=\"u1\"}} 2"
            ),
            &format!(
                "outpost_prober_probe_total{{probe_type=\"Readiness\",result=\"failed\",{readiness},pod_uid=\"u1\"}} 1"
            ),
            &format!(
                "outpost_prober_probe_total{{probe_type=\"Liveness\",result=\"unknown\",{readiness},pod_uid=\"u1\"}} 1"
            ),
            "# TYPE outpost_prober_probe_duration_seconds histogram",
            &format!(
                "outpost_prober_probe_duration_seconds_count{{probe_type=\"Readiness\",{readiness}}} 3"
            ),
            &format!(
                "outpost_prober_probe_duration_seconds_bucket{{le=\"0.001\",probe_type=\"Readiness\",{readiness}}} 1"
            ),
            &format!(
                "outpost_prober_probe_duration_seconds_bucket{{le=\"0.005\",probe_type=\"Readiness\",{readiness}}} 2"
            ),
            &format!(
                "outpost_prober_probe_duration_seconds_bucket{{le=\"1.0\",probe_type=\"Readiness\",{readiness}}} 3"
            ),
            &format!(
                "outpost_prober_probe_duration_seconds_bucket{{le=\"0.02\",probe_type=\"Liveness\",{readiness}}} 1"
            ),
        ],
    );
    // The readiness probe's container is gone: its series too, the liveness probe's stay.
    workers.probe_removed(&labels);
    let text = render(&registry).unwrap();
    assert!(!text.contains("probe_type=\"Readiness\""), "{text}");
    assert!(text.contains("probe_type=\"Liveness\""), "{text}");
}

#[test]
fn kernel_metrics_say_whether_bpf_is_loaded_and_count_execs_per_container() {
    use crate::ebpf::audit::{Entry, Kind};
    let ebpf = crate::ebpf::Handle::default();
    let entry = |container: &str, kind| Entry {
        kind,
        time: "2026-01-01T00:00:00Z".into(),
        container: container.into(),
        container_id: "id".into(),
        pid: 10,
        ns_pid: 1,
        comm: "sh".into(),
        ppid: None,
        uid: None,
        filename: None,
        argv: Vec::new(),
        exit_code: None,
        signal: None,
    };
    ebpf.record("u1", "default", "web", entry("main", Kind::Exec));
    ebpf.record("u1", "default", "web", entry("main", Kind::Exec));
    ebpf.record("u1", "default", "web", entry("main", Kind::Exit));
    ebpf.record("u1", "default", "web", entry("side", Kind::Exec));
    let handle = SnapshotHandle::default();
    let sources = Sources { ebpf: ebpf.clone(), ..Sources::default() };
    let registry = registry(handle, sources);
    let text = render(&registry).unwrap();
    has_lines(
        &text,
        &[
            "# TYPE outpost_ebpf_loaded gauge",
            "outpost_ebpf_loaded 0",
            "# TYPE outpost_pod_process_execs counter",
            "outpost_pod_process_execs_total{namespace=\"default\",pod=\"web\",container=\"main\"} 2",
            "outpost_pod_process_execs_total{namespace=\"default\",pod=\"web\",container=\"side\"} 1",
        ],
    );
    // Not loaded: no traffic families at all.
    assert!(!text.contains("outpost_pod_network"), "{text}");
    ebpf.forget_pod("u1");
    assert!(!render(&registry).unwrap().contains("pod=\"web\""));
}

#[test]
fn pods_and_containers_usage_is_read_from_their_cgroups_at_scrape_time() {
    use crate::runtime::cgroups::{Driver, Hierarchy, Layout, PodCgroups};
    let host = Arc::new(crate::host::Recording::new());
    // Pod `a` (BestEffort: no resources) and its container `id1`, cgroup v1.
    let pod_cgroup = "/sys/fs/cgroup/{}/kubepods/besteffort/poda";
    for (cgroup, cpu_ns, usage, inactive) in [
        (pod_cgroup.to_owned(), 2_500_000_000u64, 4096u64, 1024u64),
        (format!("{pod_cgroup}/id1"), 1_000_000_000, 3000, 0),
    ] {
        let dir = |controller: &str| PathBuf::from(cgroup.replace("{}", controller));
        host.file(dir("cpuacct").join("cpuacct.usage"), cpu_ns.to_string())
            .file(dir("memory").join("memory.usage_in_bytes"), usage.to_string())
            .file(dir("memory").join("memory.stat"), format!("total_inactive_file {inactive}\n"));
    }
    let root = PathBuf::from("/sys/fs/cgroup");
    let cgroups = PodCgroups::new(Layout::new(Driver::Cgroupfs, "/"), Hierarchy::V1 { root }, None);
    let snapshot = Snapshot {
        pods: vec![(Source::File, pod("a", "web")), (Source::File, pod("b", "gone"))],
        sources: vec![live(Source::File)],
        ..Snapshot::default()
    };
    let statuses = StatusStore::default();
    let mut running = status("Running", &[true, false]);
    let containers = running.container_statuses.as_mut().unwrap();
    containers[0].container_id = Some("containerd://id1".to_owned());
    containers[1].container_id = Some("containerd://id2".to_owned());
    statuses.set("a", running);
    // Pod `b` has a status but no cgroup (torn down meanwhile): left out.
    statuses.set("b", status("Running", &[true]));
    let handle = SnapshotHandle::from(snapshot);
    // The node's stats read the cgroups; the usage collector takes their reading.
    let stats = crate::stats::Stats::new(crate::stats::Sources {
        snapshot: handle.clone(),
        statuses: statuses.clone(),
        cgroups: Some(Arc::new(cgroups)),
        host: host.clone(),
        ..crate::stats::Sources::default()
    });
    let sources = Sources { statuses, stats, ..Sources::default() };
    let text = render(&registry(handle, sources)).unwrap();
    has_lines(
        &text,
        &[
            "outpost_pod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} 2.5",
            "outpost_pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} 3072",
            "outpost_container_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\",container=\"c0\"} 1.0",
            "outpost_container_memory_working_set_bytes{namespace=\"default\",pod=\"web\",container=\"c0\"} 3000",
        ],
    );
    assert!(!text.contains("pod=\"gone\""), "{text}");
    assert!(!text.contains("container=\"c1\""), "not running: {text}");
    // One scrape, one reading: each file of the pod's cgroups was read once.
    let stat = PathBuf::from("/sys/fs/cgroup/memory/kubepods/besteffort/poda/memory.stat");
    assert_eq!(host.reads().iter().filter(|path| **path == stat).count(), 1);
}
