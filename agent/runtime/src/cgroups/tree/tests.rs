use super::*;

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A v1 mount point with these controller trees (each with `cgroup.procs`, as mounted).
fn v1(trees: &[&str]) -> (tempfile::TempDir, Hierarchy) {
    let root = tempfile::tempdir().unwrap();
    for tree in trees {
        std::fs::create_dir_all(root.path().join(tree)).unwrap();
        std::fs::write(root.path().join(tree).join("cgroup.procs"), "").unwrap();
    }
    std::fs::create_dir_all(root.path().join("not-a-tree")).unwrap();
    let hierarchy = Hierarchy::at(root.path());
    (root, hierarchy)
}

#[test]
fn q2_v1_creates_the_cgroup_in_every_controller_tree() {
    let (root, h) = v1(&["cpu", "memory", "pids", "cpuset", "unified"]);
    std::fs::write(root.path().join("cpuset/cpuset.cpus"), "0-1\n").unwrap();
    std::fs::write(root.path().join("cpuset/cpuset.mems"), "0\n").unwrap();
    // A real cpuset tree gives each new cgroup empty files; the test makes them.
    std::fs::create_dir_all(root.path().join("cpuset/kubepods/podu")).unwrap();
    for dir in ["cpuset/kubepods", "cpuset/kubepods/podu"] {
        std::fs::write(root.path().join(dir).join("cpuset.cpus"), "").unwrap();
        std::fs::write(root.path().join(dir).join("cpuset.mems"), "\n").unwrap();
    }
    create(&h, "/kubepods/podu").unwrap();
    for tree in ["cpu", "memory", "pids", "cpuset", "unified"] {
        assert!(root.path().join(tree).join("kubepods/podu").is_dir(), "{tree}");
    }
    assert!(!root.path().join("not-a-tree/kubepods").exists());
    assert_eq!(read(root.path().join("cpuset/kubepods/podu/cpuset.cpus")), "0-1");
    assert_eq!(read(root.path().join("cpuset/kubepods/cpuset.mems")), "0");
    assert!(exists(&h, "/kubepods/podu"));
    // cgroupfs removes a cgroup with its files; a plain directory needs them gone first.
    for file in ["cpuset.cpus", "cpuset.mems"] {
        std::fs::remove_file(root.path().join("cpuset/kubepods/podu").join(file)).unwrap();
    }
    remove(&h, "/kubepods/podu").unwrap();
    assert!(!exists(&h, "/kubepods/podu"));
    assert!(exists(&h, "/kubepods"), "only the pod's own cgroup goes");
    remove(&h, "/kubepods/podu").unwrap();
}

#[test]
fn q2_v1_limits_go_to_each_controllers_files() {
    let (root, h) = v1(&["cpu", "memory", "pids"]);
    create(&h, "/kubepods/burstable/podu").unwrap();
    let config = ResourceConfig {
        cpu_shares: 102,
        cpu_quota: Some(20_000),
        cpu_period: 100_000,
        memory_limit: Some(64 << 20),
        pids_limit: Some(100),
    };
    apply(&h, "/kubepods/burstable/podu", &config).unwrap();
    let file = |f: &str| read(root.path().join(f));
    assert_eq!(file("cpu/kubepods/burstable/podu/cpu.shares"), "102");
    assert_eq!(file("cpu/kubepods/burstable/podu/cpu.cfs_quota_us"), "20000");
    assert_eq!(file("cpu/kubepods/burstable/podu/cpu.cfs_period_us"), "100000");
    assert_eq!(file("memory/kubepods/burstable/podu/memory.limit_in_bytes"), "67108864");
    assert_eq!(file("pids/kubepods/burstable/podu/pids.max"), "100");
    // Unlimited again: written where the files are (a real tree has them all).
    apply(&h, "/kubepods/burstable/podu", &ResourceConfig::unlimited(2)).unwrap();
    assert_eq!(file("cpu/kubepods/burstable/podu/cpu.cfs_quota_us"), "-1");
    assert_eq!(file("memory/kubepods/burstable/podu/memory.limit_in_bytes"), "-1");
    assert_eq!(file("pids/kubepods/burstable/podu/pids.max"), "max");
    // Unlimited where a controller is not mounted: nothing to write, no error.
    let (root, h) = v1(&["cpu"]);
    create(&h, "/kubepods").unwrap();
    apply(&h, "/kubepods", &ResourceConfig::unlimited(2)).unwrap();
    assert_eq!(read(root.path().join("cpu/kubepods/cpu.shares")), "2");
    let limited = ResourceConfig { memory_limit: Some(1), ..ResourceConfig::unlimited(2) };
    let e = apply(&h, "/kubepods", &limited).unwrap_err();
    assert!(e.to_string().contains("memory.limit_in_bytes"), "{e}");
}

#[test]
fn q2_v2_enables_controllers_down_the_path_and_writes_v2_files() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("cgroup.controllers"), "cpuset cpu io memory pids\n").unwrap();
    std::fs::write(root.path().join("cgroup.subtree_control"), "memory\n").unwrap();
    std::fs::write(root.path().join("cgroup.procs"), "").unwrap();
    let h = Hierarchy::at(root.path());
    assert!(h.is_v2());
    // What the kernel shows in a child: its parent's enabled controllers.
    std::fs::create_dir_all(root.path().join("edge/kubepods")).unwrap();
    std::fs::write(root.path().join("edge/cgroup.controllers"), "cpu memory pids\n").unwrap();
    std::fs::write(root.path().join("edge/kubepods/cgroup.controllers"), "cpu pids\n").unwrap();
    create(&h, "/edge/kubepods/podu").unwrap();
    let file = |f: &str| read(root.path().join(f));
    assert_eq!(file("cgroup.subtree_control"), "+cpu +cpuset +io +pids", "memory was on");
    assert_eq!(file("edge/cgroup.subtree_control"), "+cpu +memory +pids");
    assert_eq!(file("edge/kubepods/cgroup.subtree_control"), "+cpu +pids");
    assert!(!root.path().join("edge/kubepods/podu/cgroup.subtree_control").exists());
    let config = ResourceConfig {
        cpu_shares: 1024,
        cpu_quota: Some(50_000),
        cpu_period: 100_000,
        memory_limit: Some(1 << 30),
        pids_limit: None,
    };
    apply(&h, "/edge/kubepods/podu", &config).unwrap();
    assert_eq!(file("edge/kubepods/podu/cpu.weight"), "39");
    assert_eq!(file("edge/kubepods/podu/cpu.max"), "50000 100000");
    assert_eq!(file("edge/kubepods/podu/memory.max"), "1073741824");
    assert!(!root.path().join("edge/kubepods/podu/pids.max").exists(), "unlimited, no file");
    apply(&h, "/edge/kubepods/podu", &ResourceConfig::unlimited(2)).unwrap();
    assert_eq!(file("edge/kubepods/podu/cpu.max"), "max 100000");
    assert_eq!(file("edge/kubepods/podu/memory.max"), "max");
}

#[test]
fn q2_a_cgroup_still_in_use_is_reported_after_trying_every_tree() {
    let (root, h) = v1(&["cpu", "memory"]);
    // A directory that cannot go stands for a container cgroup with a process in it.
    std::fs::create_dir_all(root.path().join("memory/kubepods/podu/container")).unwrap();
    std::fs::write(root.path().join("memory/kubepods/podu/container/cgroup.procs"), "7").unwrap();
    std::fs::create_dir_all(root.path().join("cpu/kubepods/podu/left")).unwrap();
    let e = remove(&h, "/kubepods/podu").unwrap_err();
    assert!(e.to_string().contains("memory/kubepods/podu"), "{e}");
    assert!(!root.path().join("cpu/kubepods/podu").exists(), "the others go, empty children too");
}
