use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use outpost_core::eviction::{Memcg, Resource, Signal};
use outpost_core::pod::Source;

use super::candidates::{PodPlaces, candidates, walk};
use super::notify::{FsWrites, Psi, Threshold};
use super::signals::{Sources, read};
use crate::host::Recording;
use crate::runtime::cgroups::{Driver, Hierarchy, Layout};

fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const MI: u64 = 1024 * 1024;

/// A cgroup v1 hierarchy on the recording host.
fn v1() -> Hierarchy {
    Hierarchy::V1 { root: PathBuf::from("/sys/fs/cgroup") }
}

/// A `/proc` and a cgroup v1 tree on the recording host; the filesystems are `root`'s.
fn machine(root: &Path) -> (Sources, Arc<Recording>) {
    let host = Arc::new(Recording::new());
    let memory = v1().dir("memory", "/");
    host.file("/proc/meminfo", "MemTotal:  8388608 kB\nMemFree: 1 kB\nMemAvailable: 4194304 kB\n")
        .file("/proc/sys/kernel/pid_max", "32768\n")
        .file("/proc/sys/kernel/threads-max", "100000\n")
        .file("/proc/loadavg", "0.00 0.01 0.05 1/768 4242\n")
        .file(memory.join("memory.usage_in_bytes"), (7000 * MI).to_string())
        .file(memory.join("memory.stat"), format!("total_inactive_file {}\n", 1000 * MI))
        .file(memory.join("kubepods/memory.limit_in_bytes"), (2048 * MI).to_string())
        .file(memory.join("kubepods/memory.usage_in_bytes"), (1500 * MI).to_string())
        .file(memory.join("kubepods/memory.stat"), format!("total_inactive_file {}\n", 100 * MI));
    let sources = Sources {
        hierarchy: v1(),
        pods_cgroup: "/kubepods".into(),
        nodefs: root.to_owned(),
        imagefs: Some(root.join("containerd/snapshots")),
        host: host.clone(),
    };
    (sources, host)
}

// E1: the signals as kubelet computes them.
#[test]
fn signals_are_read_as_kubelet_computes_them() {
    let dir = tempfile::tempdir().unwrap();
    let reading = read(&machine(dir.path()).0);
    let o = |s| reading.observations.get(s).unwrap();
    let mi = |n: u64| i64::try_from(n * MI).unwrap();
    // 8 GiB less (7000 - 1000) MiB of working set.
    assert_eq!(
        (o(Signal::MemoryAvailable).available, o(Signal::MemoryAvailable).capacity),
        (mi(8192 - 6000), mi(8192))
    );
    assert_eq!(
        reading.root,
        Some(Memcg { usage: 7000 * MI, inactive: 1000 * MI, capacity: 8192 * MI })
    );
    // The pods cgroup: its 2 GiB limit less (1500 - 100) MiB.
    let allocatable = o(Signal::AllocatableMemoryAvailable);
    assert_eq!((allocatable.available, allocatable.capacity), (mi(2048 - 1400), mi(2048)));
    let pids = o(Signal::PidAvailable);
    assert_eq!((pids.available, pids.capacity), (32768 - 768, 32768));
    for signal in [
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
    ] {
        let fs = o(signal);
        assert!(fs.capacity > 0 && fs.available <= fs.capacity, "{signal}: {fs:?}");
    }
}

#[test]
fn an_unlimited_or_missing_pods_cgroup_gives_no_allocatable_signal() {
    let dir = tempfile::tempdir().unwrap();
    let (sources, host) = machine(dir.path());
    let limit = sources.hierarchy.dir("memory", "/kubepods").join("memory.limit_in_bytes");
    host.file(&limit, "9223372036854771712");
    assert!(read(&sources).observations.get(Signal::AllocatableMemoryAvailable).is_none());
    host.remove(limit.parent().unwrap());
    let reading = read(&sources);
    assert!(reading.pods.is_none());
    assert!(reading.observations.get(Signal::MemoryAvailable).is_some());
}

#[test]
fn without_a_root_usage_file_memory_comes_from_meminfo() {
    let dir = tempfile::tempdir().unwrap();
    let (mut sources, host) = machine(dir.path());
    host.remove(sources.hierarchy.dir("memory", "/").join("memory.usage_in_bytes"));
    sources.imagefs = None;
    let reading = read(&sources);
    assert_eq!(reading.root, None);
    let memory = reading.observations.get(Signal::MemoryAvailable).unwrap();
    assert_eq!(memory.available, i64::try_from(4096 * MI).unwrap(), "MemAvailable");
    assert!(reading.observations.get(Signal::ImageFsAvailable).is_none());
}

fn pod(name: &str, container: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container { name: container.into(), ..Container::default() }],
            ..PodSpec::default()
        }),
        status: None,
    })
}

fn status(phase: &str, container: &str, id: &str) -> Arc<PodStatus> {
    Arc::new(PodStatus {
        phase: Some(phase.into()),
        qos_class: Some("BestEffort".into()),
        container_statuses: Some(vec![ContainerStatus {
            name: container.into(),
            container_id: Some(format!("containerd://{id}")),
            ..ContainerStatus::default()
        }]),
        ..PodStatus::default()
    })
}

// E2: candidates are the pods that run, with their cgroup's and containers' usage.
#[test]
fn candidates_read_their_pod_and_container_cgroups() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(Recording::new());
    let hierarchy = v1();
    let layout = Layout::new(Driver::Cgroupfs, "/");
    let pod_cgroup = "/kubepods/besteffort/poduid-hog";
    let memory = hierarchy.dir("memory", pod_cgroup);
    host.file(memory.join("memory.usage_in_bytes"), (450 * MI).to_string())
        .file(memory.join("memory.stat"), format!("total_inactive_file {}\n", 50 * MI))
        .file(memory.join("c1/memory.usage_in_bytes"), (400 * MI).to_string())
        .file(memory.join("c1/memory.stat"), "total_inactive_file 0\n")
        .file(hierarchy.dir("pids", pod_cgroup).join("pids.current"), "3\n");
    let places = PodPlaces {
        hierarchy,
        layout,
        state_dir: dir.path().join("state"),
        pod_log_dir: dir.path().join("logs"),
        host,
    };
    let pods = vec![
        (Source::Api, pod("hog", "hog")),
        (Source::File, pod("static", "web")),
        (Source::Api, pod("done", "job")),
        (Source::Api, pod("unknown", "x")),
    ];
    let statuses: HashMap<String, Arc<PodStatus>> = [
        ("uid-hog".to_owned(), status("Running", "hog", "c1")),
        ("uid-static".to_owned(), status("Running", "web", "c2")),
        ("uid-done".to_owned(), status("Failed", "job", "c3")),
    ]
    .into_iter()
    .collect();
    let found = candidates(&pods, &statuses, &places, Resource::Memory);
    let names: Vec<_> = found.iter().map(|c| c.pod.metadata.name.clone().unwrap()).collect();
    assert_eq!(
        names,
        ["hog", "static"],
        "terminal pods and pods without a status are not candidates"
    );
    let hog = found[0].stats.as_ref().unwrap();
    assert_eq!((hog.memory, hog.processes), (400 * MI, 3));
    assert_eq!(hog.containers[0].memory, Some(400 * MI));
    assert!(found[1].stats.is_none(), "no cgroup: usage unknown");
}

#[test]
fn disk_usage_counts_volumes_on_nodefs_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pods/u/volumes/kubernetes.io~empty-dir/scratch");
    write(data.join("a"), &"x".repeat(10_000));
    write(data.join("sub/b"), &"y".repeat(5_000));
    let (bytes, inodes) = walk(&dir.path().join("pods/u/volumes"), None);
    assert!(bytes >= 15_000, "{bytes}");
    assert_eq!(inodes, 5, "two files and three directories");
    assert_eq!(walk(&dir.path().join("none"), None), (0, 0));
    let other_device = walk(&dir.path().join("pods"), Some(u64::MAX));
    assert_eq!(other_device, (0, 0), "entries of another filesystem are skipped");
}

fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

// The kernel's side, where this machine has it: a v1 memory threshold fires when the
// usage crosses it.
#[tokio::test]
async fn a_memory_threshold_fires_when_usage_crosses_it() {
    let root = Hierarchy::detect();
    let dir = root.dir("memory", "/");
    if !is_root() || root.is_v2() || !dir.join("cgroup.event_control").exists() {
        eprintln!("skipped: needs root and a cgroup v1 memory hierarchy");
        return;
    }
    let usage: u64 =
        std::fs::read_to_string(dir.join("memory.usage_in_bytes")).unwrap().trim().parse().unwrap();
    // 16 MiB above the usage: crossed when this test touches 64 MiB.
    let threshold = Threshold::arm(&dir, usage + 16 * MI).unwrap();
    let hog: Vec<u8> = vec![1; 64 * 1024 * 1024];
    let fired = tokio::time::timeout(Duration::from_secs(10), threshold.crossed()).await;
    drop(hog);
    assert!(matches!(fired, Ok(Ok(()))), "{fired:?}");
}

#[tokio::test]
async fn a_psi_trigger_opens_where_the_kernel_has_psi() {
    let path = Path::new("/proc/pressure/memory");
    if !path.exists() {
        eprintln!("skipped: no PSI");
        return;
    }
    let trigger = Psi::open(path).unwrap();
    assert!(trigger.trigger.starts_with("some "));
}

#[tokio::test]
async fn a_write_on_the_filesystem_is_seen() {
    if !is_root() {
        eprintln!("skipped: fanotify filesystem marks need root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let writes = FsWrites::open(&[dir.path()], Duration::from_millis(10)).unwrap();
    let file = dir.path().join("f");
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        std::fs::write(file, "data").unwrap();
    });
    let seen = tokio::time::timeout(Duration::from_secs(10), writes.written()).await;
    writer.await.unwrap();
    assert!(seen.is_ok(), "no write seen");
}
