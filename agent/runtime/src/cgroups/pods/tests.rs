use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

fn v1() -> (tempfile::TempDir, Hierarchy) {
    let root = tempfile::tempdir().unwrap();
    for tree in ["cpu", "memory", "pids"] {
        std::fs::create_dir_all(root.path().join(tree)).unwrap();
        std::fs::write(root.path().join(tree).join("cgroup.procs"), "").unwrap();
    }
    let hierarchy = Hierarchy::at(root.path());
    (root, hierarchy)
}

fn read(root: &Path, file: &str) -> String {
    let path: PathBuf = root.join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// cgroupfs removes a cgroup with its control files; a plain directory needs them gone.
fn drop_files(root: &Path, relative: &str) {
    for tree in ["cpu", "memory", "pids"] {
        for entry in std::fs::read_dir(root.join(tree).join(relative)).into_iter().flatten() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::remove_file(entry.path()).unwrap();
            }
        }
    }
}

fn pod(uid: &str, resources: serde_json::Value) -> Pod {
    serde_json::from_value(json!({ "metadata": { "name": "p", "uid": uid }, "spec": {
        "containers": [{ "name": "c", "image": "busybox", "resources": resources }] } }))
    .unwrap()
}

#[test]
fn q2_pods_go_under_their_qos_class_with_kubelets_limits() {
    let (root, h) = v1();
    let cgroups = PodCgroups::new(Layout::new(Driver::Cgroupfs, "/edge"), h, Some(64));
    cgroups.ensure_node(&ResourceConfig::unlimited(2048)).unwrap();
    let r = root.path();
    assert_eq!(read(r, "cpu/edge/kubepods/cpu.shares"), "2048");
    assert_eq!(read(r, "cpu/edge/kubepods/besteffort/cpu.shares"), "2");
    assert_eq!(read(r, "cpu/edge/kubepods/burstable/cpu.shares"), "2");

    let guaranteed = pod("g", json!({ "limits": { "cpu": "200m", "memory": "32Mi" } }));
    let name = cgroups.ensure_pod(&guaranteed).unwrap();
    assert_eq!(cgroups.path(&name), "/edge/kubepods/podg");
    assert_eq!(cgroups.container_path(&name, "c1"), "/edge/kubepods/podg/c1");
    assert_eq!(read(r, "cpu/edge/kubepods/podg/cpu.shares"), "204");
    assert_eq!(read(r, "cpu/edge/kubepods/podg/cpu.cfs_quota_us"), "20000");
    assert_eq!(read(r, "memory/edge/kubepods/podg/memory.limit_in_bytes"), "33554432");
    assert_eq!(read(r, "pids/edge/kubepods/podg/pids.max"), "64");

    let best_effort = pod("e", json!({}));
    cgroups.ensure_pod(&best_effort).unwrap();
    assert_eq!(read(r, "cpu/edge/kubepods/besteffort/pode/cpu.shares"), "2");

    let a = pod("a", json!({ "requests": { "cpu": "300m" } }));
    let b = pod("b", json!({ "requests": { "cpu": "700m" }, "limits": { "memory": "1Gi" } }));
    cgroups.ensure_pod(&a).unwrap();
    assert_eq!(read(r, "cpu/edge/kubepods/burstable/cpu.shares"), "307");
    cgroups.ensure_pod(&b).unwrap();
    cgroups.ensure_pod(&b).unwrap();
    assert_eq!(read(r, "cpu/edge/kubepods/burstable/cpu.shares"), "1024", "b counted once");
    assert_eq!(read(r, "memory/edge/kubepods/burstable/podb/memory.limit_in_bytes"), "1073741824");
    assert_eq!(cgroups.pod_uids(), ["a", "b", "e", "g"]);

    drop_files(r, "edge/kubepods/burstable/podb");
    cgroups.remove_pod("b").unwrap();
    assert!(!r.join("cpu/edge/kubepods/burstable/podb").exists());
    assert_eq!(read(r, "cpu/edge/kubepods/burstable/cpu.shares"), "307", "b's request is gone");
    for (uid, dir) in [("a", "burstable/poda"), ("e", "besteffort/pode"), ("g", "podg")] {
        drop_files(r, &format!("edge/kubepods/{dir}"));
        cgroups.remove_pod(uid).unwrap();
    }
    assert_eq!(cgroups.pod_uids(), Vec::<String>::new());
    assert_eq!(read(r, "cpu/edge/kubepods/burstable/cpu.shares"), "2");
}

#[test]
fn q2_teardown_removes_an_older_agents_pod_cgroup_too() {
    let (root, h) = v1();
    for tree in ["cpu", "memory", "pids"] {
        std::fs::create_dir_all(root.path().join(tree).join("outpost/podold")).unwrap();
    }
    let cgroups = PodCgroups::new(Layout::new(Driver::Cgroupfs, "/"), h, None);
    assert_eq!(cgroups.pod_uids(), Vec::<String>::new(), "not an orphan of this agent's");
    cgroups.remove_pod("old").unwrap();
    for tree in ["cpu", "memory", "pids"] {
        assert!(!root.path().join(tree).join("outpost/podold").exists());
    }
}

#[test]
fn teardown_removes_a_container_cgroup_runc_left_in_one_hierarchy() {
    let (root, h) = v1();
    let cgroups = PodCgroups::new(Layout::new(Driver::Cgroupfs, "/"), h, None);
    let name = cgroups.layout.pod(QosClass::BestEffort, "u1");
    let pod = cgroups.path(&name);
    let pod = pod.trim_start_matches('/');
    for tree in ["cpu", "memory", "pids"] {
        std::fs::create_dir_all(root.path().join(tree).join(pod)).unwrap();
    }
    std::fs::create_dir_all(root.path().join("cpu").join(pod).join("c1")).unwrap();
    cgroups.remove_pod("u1").unwrap();
    for tree in ["cpu", "memory", "pids"] {
        assert!(!root.path().join(tree).join(pod).exists(), "{tree}");
    }
}

#[test]
fn pod_uids_are_read_from_either_drivers_names() {
    assert_eq!(pod_uid_of("pod12-ab", Driver::Cgroupfs).as_deref(), Some("12-ab"));
    assert_eq!(pod_uid_of("burstable", Driver::Cgroupfs), None);
    assert_eq!(pod_uid_of("pod", Driver::Cgroupfs), None);
    assert_eq!(
        pod_uid_of("kubepods-burstable-pod12_ab.slice", Driver::Systemd).as_deref(),
        Some("12-ab")
    );
    assert_eq!(pod_uid_of("kubepods-burstable.slice", Driver::Systemd), None);
}

#[test]
fn q2_under_systemd_slices_are_set_and_started_through_systemctl() {
    use std::sync::Arc;

    use crate::cgroups::systemd::Recording;
    let (_root, h) = v1();
    let systemctl = Arc::new(Recording::default());
    let cgroups = PodCgroups::new(Layout::new(Driver::Systemd, "/"), h, Some(64))
        .with_systemctl(systemctl.clone());
    cgroups.ensure_node(&ResourceConfig::unlimited(2048)).unwrap();
    let unlimited = |shares: u64| {
        format!(
            "CPUShares={shares} CPUQuotaPeriodSec=100ms CPUQuota= MemoryLimit=infinity TasksMax=infinity"
        )
    };
    assert_eq!(
        systemctl.take(),
        [
            format!("set-property --runtime kubepods.slice {}", unlimited(2048)),
            "start kubepods.slice".to_owned(),
            "start kubepods-besteffort.slice".to_owned(),
            "start kubepods-burstable.slice".to_owned(),
            format!("set-property --runtime kubepods-besteffort.slice {}", unlimited(2)),
            "start kubepods-besteffort.slice".to_owned(),
            format!("set-property --runtime kubepods-burstable.slice {}", unlimited(2)),
            "start kubepods-burstable.slice".to_owned(),
        ]
    );
    let p = pod("1-2", json!({ "requests": { "cpu": "100m" }, "limits": { "memory": "32Mi" } }));
    let name = cgroups.ensure_pod(&p).unwrap();
    assert_eq!(cgroups.container_path(&name, "c1"), "kubepods-burstable-pod1_2.slice:outpost:c1");
    assert_eq!(
        systemctl.take(),
        [
            "set-property --runtime kubepods-burstable-pod1_2.slice CPUShares=102 \
             CPUQuotaPeriodSec=100ms CPUQuota= MemoryLimit=33554432 TasksMax=64",
            "start kubepods-burstable-pod1_2.slice",
            &format!("set-property --runtime kubepods-burstable.slice {}", unlimited(102)),
            "start kubepods-burstable.slice",
        ]
    );
    cgroups.remove_pod("1-2").unwrap();
    let calls = systemctl.take();
    assert_eq!(
        calls[..3],
        [
            "stop kubepods-pod1_2.slice",
            "stop kubepods-burstable-pod1_2.slice",
            "stop kubepods-besteffort-pod1_2.slice"
        ]
    );
    assert!(calls[3].ends_with(&unlimited(2)), "the Burstable slice shrinks: {calls:?}");
}
