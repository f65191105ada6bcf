//! End to end, QoS and the pods' cgroups (Q1, Q2) and node allocatable, with real
//! containerd and runc on this host's cgroup v1 controllers: each pod's `status.qosClass`
//! and the cgroup files of the pod and its container, kubelet's hierarchy under the test
//! node's own `--cgroup-root`; a CPU limit holds a busy loop to its quota; an adopted pod
//! keeps its cgroup; pod-level `spec.resources`; `--enforce-node-allocatable pods` limits
//! kubepods; the Node's allocatable as the API server sees it.

use outpost_tests::needs;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node as ApiNodeObject;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, container, eventually, wait_pod};

const LONG: Duration = Duration::from_secs(60);
/// runc's (and the kernel's) "no memory limit" under cgroup v1, rounded to a page.
const V1_UNLIMITED: u64 = 1 << 62;

/// A static pod: one busybox container `main` running `script`, with `resources` (YAML
/// flow mapping, `{}` for none) and `pod_extra` lines under `spec:`.
fn manifest(name: &str, script: &str, resources: &str, pod_extra: &str) -> String {
    let script = serde_json::to_string(script).unwrap();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{pod_extra}  containers:\n  \
         - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    \
         command: [\"sh\", \"-c\", {script}]\n    resources: {resources}\n"
    )
}

const SLEEP: &str = "trap 'exit 0' TERM; while true; do sleep 0.1; done";

fn running(p: &serde_json::Value) -> bool {
    p["status"]["phase"] == "Running" && container(p)["state"]["running"].is_object()
}

fn uid(p: &serde_json::Value) -> String {
    p["metadata"]["uid"].as_str().unwrap().to_owned()
}

fn container_id(p: &serde_json::Value) -> String {
    container(p)["containerID"].as_str().unwrap().trim_start_matches("containerd://").to_owned()
}

/// A cgroup v1 file: `/sys/fs/cgroup/<controller>/<cgroup>/<file>`, trimmed.
fn cg(controller: &str, cgroup: &str, file: &str) -> String {
    let path = format!("/sys/fs/cgroup/{controller}/{}/{file}", cgroup.trim_start_matches('/'));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")).trim().to_owned()
}

fn number(controller: &str, cgroup: &str, file: &str) -> u64 {
    cg(controller, cgroup, file).parse().unwrap()
}

/// The cpu, memory and pids figures of a cgroup: shares, quota, period, memory limit
/// (`None`: unlimited), pids.max.
fn limits(cgroup: &str) -> (u64, i64, u64, Option<u64>, String) {
    let memory = number("memory", cgroup, "memory.limit_in_bytes");
    (
        number("cpu", cgroup, "cpu.shares"),
        cg("cpu", cgroup, "cpu.cfs_quota_us").parse().unwrap(),
        number("cpu", cgroup, "cpu.cfs_period_us"),
        (memory < V1_UNLIMITED).then_some(memory),
        cg("pids", cgroup, "pids.max"),
    )
}

/// Skips (or fails under CI) on a host whose controllers are on cgroup v2: these tests
/// read v1 files, what this machine has.
fn v1_host() -> bool {
    let v1 = std::path::Path::new("/sys/fs/cgroup/cpu/cpu.shares").exists();
    if !v1 && std::env::var_os("CI").is_some() {
        panic!("these tests read cgroup v1 files; this host has its controllers on v2");
    }
    v1
}

/// Q1, Q2: each class's status and cgroups, with `--pod-max-pids`.
#[needs(pods)]
#[test]
fn q1_q2_each_class_is_in_the_status_and_in_kubelets_cgroups() {
    let node = Node::new();
    if !v1_host() {
        return;
    }
    let mut args = node.args();
    args.extend(["--pod-max-pids".into(), "500".into()]);
    let agent = outpost_tests::agent::Agent::start_pods(&node.manifests(), &args);
    let guaranteed = "{limits: {cpu: 200m, memory: 64Mi}}";
    let burstable = "{requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 300m}}";
    node.put("g.yaml", &manifest("g", SLEEP, guaranteed, ""));
    node.put("b.yaml", &manifest("b", SLEEP, burstable, ""));
    node.put("e.yaml", &manifest("e", SLEEP, "{}", ""));
    let g = wait_pod(&agent, "g-edge-1", LONG, running);
    let b = wait_pod(&agent, "b-edge-1", LONG, running);
    let e = wait_pod(&agent, "e-edge-1", LONG, running);
    assert_eq!(g["status"]["qosClass"], "Guaranteed");
    assert_eq!(b["status"]["qosClass"], "Burstable");
    assert_eq!(e["status"]["qosClass"], "BestEffort");

    let pods = node.kubepods();
    let pid_limit = "500".to_owned();
    let g_cgroup = format!("{pods}/pod{}", uid(&g));
    assert_eq!(limits(&g_cgroup), (204, 20_000, 100_000, Some(64 << 20), pid_limit.clone()));
    let g_container = format!("{g_cgroup}/{}", container_id(&g));
    let (shares, quota, period, memory, _) = limits(&g_container);
    assert_eq!((shares, quota, period, memory), (204, 20_000, 100_000, Some(64 << 20)));

    let b_cgroup = format!("{pods}/burstable/pod{}", uid(&b));
    assert_eq!(limits(&b_cgroup), (102, 30_000, 100_000, None, pid_limit.clone()));
    let e_cgroup = format!("{pods}/besteffort/pod{}", uid(&e));
    assert_eq!(limits(&e_cgroup), (2, -1, 100_000, None, pid_limit));
    let e_container = format!("{e_cgroup}/{}", container_id(&e));
    assert_eq!(number("cpu", &e_container, "cpu.shares"), 2);

    // The QoS cgroups: BestEffort the minimum, Burstable its pods' requests.
    assert_eq!(number("cpu", &format!("{pods}/besteffort"), "cpu.shares"), 2);
    assert_eq!(number("cpu", &format!("{pods}/burstable"), "cpu.shares"), 102);
    // Each container's processes are in its own cgroup, in every controller.
    for controller in ["cpu", "memory", "pids"] {
        let procs = cg(controller, &g_container, "cgroup.procs");
        assert!(!procs.is_empty(), "{controller}: the container's processes are there");
    }

    // A Burstable pod leaving takes its request from the Burstable cgroup.
    node.remove("b.yaml");
    eventually("b's cgroup is removed", LONG, || node.leftovers(&uid(&b)).is_empty());
    eventually("the Burstable cgroup's shares drop to the minimum", LONG, || {
        number("cpu", &format!("{pods}/burstable"), "cpu.shares") == 2
    });
}

/// Q2: a CPU limit is enforced. A busy loop under 200m uses, over a window, about its
/// quota and no more (a bound on use, not a time), and the kernel throttles it.
#[needs(pods)]
#[test]
fn q2_a_busy_loop_stays_within_its_cpu_limit() {
    let node = Node::new();
    if !v1_host() {
        return;
    }
    let agent = node.start();
    let spin = "while true; do :; done";
    node.put("spin.yaml", &manifest("spin", spin, "{limits: {cpu: 200m, memory: 32Mi}}", ""));
    let p = wait_pod(&agent, "spin-edge-1", LONG, running);
    let cgroup = format!("{}/pod{}", node.kubepods(), uid(&p));
    let usage = || number("cpuacct", &cgroup, "cpuacct.usage");
    let throttled = || {
        cg("cpu", &cgroup, "cpu.stat")
            .lines()
            .find_map(|l| l.strip_prefix("nr_throttled ")?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (start, used_before) = (Instant::now(), usage());
    std::thread::sleep(Duration::from_secs(3));
    let (window, used) = (start.elapsed(), usage() - used_before);
    let share = used as f64 / window.as_nanos() as f64;
    // 0.2 CPU is the quota; a period's rounding at the window's edges is all it may add.
    assert!(share <= 0.25, "the loop used {share:.3} CPU over {window:?}, above its 0.2 limit");
    assert!(share > 0.0, "the loop ran");
    eventually("the kernel throttles the loop", LONG, || throttled() > 0);
    // What it used, read from its cgroups at scrape time.
    let (status, metrics) = agent.get("/metrics");
    assert_eq!(status, 200);
    let sample = |prefix: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| {
            panic!("no {prefix} in /metrics:\n{metrics}");
        });
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let pod = "namespace=\"default\",pod=\"spin-edge-1\"";
    assert!(sample(&format!("outpost_pod_cpu_usage_seconds_total{{{pod}}}")) > 0.0);
    assert!(sample(&format!("outpost_pod_memory_working_set_bytes{{{pod}}}")) > 0.0);
    let main = format!("outpost_container_cpu_usage_seconds_total{{{pod},container=\"main\"}}");
    assert!(sample(&main) > 0.0);
}

/// Q2: after `kill -9` of the agent, the adopted pod keeps its container in its cgroup
/// with the same limits.
#[needs(pods)]
#[test]
fn q2_an_adopted_pod_keeps_its_cgroup_and_limits() {
    let node = Node::new();
    if !v1_host() {
        return;
    }
    let agent = node.start();
    let resources = "{requests: {cpu: 250m}, limits: {cpu: 500m, memory: 48Mi}}";
    node.put("keep.yaml", &manifest("keep", SLEEP, resources, ""));
    let before = wait_pod(&agent, "keep-edge-1", LONG, running);
    let cgroup = format!("{}/burstable/pod{}", node.kubepods(), uid(&before));
    let container = format!("{cgroup}/{}", container_id(&before));
    let limits_before = (limits(&cgroup), limits(&container));
    // The container's init (its shell; the `sleep`s it runs come and go).
    let init = cg("memory", &container, "cgroup.procs").lines().next().unwrap().to_owned();
    agent.signal("KILL");
    drop(agent);
    let agent = node.start();
    agent.wait_for_log("adopted running container");
    let after = wait_pod(&agent, "keep-edge-1", LONG, running);
    assert_eq!(container_id(&after), container_id(&before), "the same container");
    assert_eq!(after["status"]["qosClass"], "Burstable");
    assert_eq!((limits(&cgroup), limits(&container)), limits_before);
    let procs = cg("memory", &container, "cgroup.procs");
    assert!(procs.lines().any(|pid| pid == init), "the same init {init} is there: {procs}");
    assert_eq!(number("cpu", &format!("{}/burstable", node.kubepods()), "cpu.shares"), 256);
}

/// Pod-level `spec.resources` size the pod's cgroup and decide its class.
#[needs(pods)]
#[test]
fn q2_pod_level_resources_limit_the_pod_cgroup() {
    let node = Node::new();
    if !v1_host() {
        return;
    }
    let agent = node.start();
    let pod_level = "  resources: {requests: {cpu: 100m}, limits: {cpu: 500m, memory: 128Mi}}\n";
    node.put("shared.yaml", &manifest("shared", SLEEP, "{}", pod_level));
    let p = wait_pod(&agent, "shared-edge-1", LONG, running);
    assert_eq!(p["status"]["qosClass"], "Burstable");
    let cgroup = format!("{}/burstable/pod{}", node.kubepods(), uid(&p));
    assert_eq!(limits(&cgroup), (102, 50_000, 100_000, Some(128 << 20), "max".to_owned()));
}

/// `--enforce-node-allocatable pods` (the default) limits kubepods to capacity less the
/// reservations (not the eviction thresholds); `none` leaves it unlimited.
#[needs(pods)]
#[test]
fn node_allocatable_is_enforced_on_kubepods() {
    let node = Node::new();
    if !v1_host() {
        return;
    }
    let mut args = node.args();
    args.extend(
        ["--system-reserved", "cpu=500m,memory=1Gi,pid=1000", "--kube-reserved", "memory=512Mi"]
            .map(Into::into),
    );
    let agent = outpost_tests::agent::Agent::start_pods(&node.manifests(), &args);
    agent.wait_for_log("pods cgroup ready");
    let pods = node.kubepods();
    let total = mem_total();
    let expected = (total - (1 << 30) - (512 << 20)) / 4096 * 4096;
    assert_eq!(number("memory", &pods, "memory.limit_in_bytes"), expected);
    let pid_max = pid_limit();
    assert_eq!(number("pids", &pods, "pids.max"), pid_max - 1000);
    let cpus = u64::from(cpus());
    assert_eq!(number("cpu", &pods, "cpu.shares"), (cpus * 1000 - 500) * 1024 / 1000);
    agent.stop();

    let mut args = node.args();
    args.extend(["--enforce-node-allocatable", "none"].map(Into::into));
    let agent = outpost_tests::agent::Agent::start_pods(&node.manifests(), &args);
    agent.wait_for_log("pods cgroup ready");
    assert!(number("memory", &pods, "memory.limit_in_bytes") >= V1_UNLIMITED);
    assert_eq!(cg("pids", &pods, "pids.max"), "max");
    assert_eq!(number("cpu", &pods, "cpu.shares"), cpus * 1024);
}

/// The Node's allocatable through the API server: capacity less the reservations and
/// the default hard eviction thresholds.
#[needs(pods)]
#[test]
fn the_nodes_allocatable_is_capacity_less_reservations_and_thresholds() {
    let api = ApiNode::new();
    let _agent = api.start(&[
        "--system-reserved",
        "cpu=250m,memory=1Gi",
        "--kube-reserved",
        "cpu=250m,memory=512Mi,ephemeral-storage=1Gi",
    ]);
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        let node = api.server.get_typed::<ApiNodeObject>(None, "edge-1");
        if let Some(status) = node.ok().and_then(|n| n.status).filter(|s| s.allocatable.is_some()) {
            break status;
        }
        assert!(Instant::now() < deadline, "the Node was never registered");
        std::thread::sleep(Duration::from_millis(200));
    };
    let q =
        |map: &Option<BTreeMap<String, Quantity>>, key: &str| map.as_ref().unwrap()[key].0.clone();
    let cpus = u64::from(cpus());
    assert_eq!(q(&status.capacity, "cpu"), cpus.to_string());
    let free = cpus * 1000 - 500;
    let cpu = if free % 1000 == 0 { (free / 1000).to_string() } else { format!("{free}m") };
    assert_eq!(q(&status.allocatable, "cpu"), cpu);
    let total = mem_total();
    assert_eq!(q(&status.capacity, "memory"), format!("{}Ki", total / 1024));
    let memory = total - (1 << 30) - (512 << 20) - (100 << 20);
    assert_eq!(q(&status.allocatable, "memory"), format!("{}Ki", memory / 1024));
    let storage: u64 = q(&status.allocatable, "ephemeral-storage").parse().unwrap();
    let capacity: u64 =
        q(&status.capacity, "ephemeral-storage").trim_end_matches("Ki").parse::<u64>().unwrap()
            * 1024;
    // Test nodes run with `--eviction-hard memory.available<100Mi` (tests/src/pods.rs): as
    // with kubelet, giving evictionHard drops the default nodefs threshold, so only the
    // reservation comes off the disk.
    let expected = capacity - (1 << 30);
    assert!(storage.abs_diff(expected) < 1024, "{storage} vs {expected}");
}

fn mem_total() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

fn pid_limit() -> u64 {
    let read = |f: &str| std::fs::read_to_string(f).unwrap().trim().parse::<u64>().unwrap();
    read("/proc/sys/kernel/pid_max").min(read("/proc/sys/kernel/threads-max"))
}

fn cpus() -> u32 {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    online
        .trim()
        .split(',')
        .map(|range| match range.split_once('-') {
            Some((a, b)) => b.parse::<u32>().unwrap() - a.parse::<u32>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// `--cgroup-driver systemd` where systemd is not PID 1 (as on this machine): the agent
/// refuses to start and says why.
#[test]
fn the_systemd_driver_is_refused_where_systemd_is_not_pid_1() {
    let pid1 = std::fs::read_to_string("/proc/1/comm").unwrap_or_default();
    if pid1.trim() == "systemd" {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(outpost_tests::outpost_bin())
        .args(["run", "--node-name", "edge-1", "--listen", "127.0.0.1:0", "--ebpf", "false"])
        .arg("--manifest-dir")
        .arg(dir.path())
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--root-dir")
        .arg(dir.path().join("kubelet"))
        .args(["--containerd", "external", "--containerd-socket"])
        .arg(dir.path().join("no.sock"))
        .args(["--cgroup-driver", "systemd"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + LONG;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the agent started with --cgroup-driver systemd and no systemd");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(stderr.contains("needs systemd as PID 1"), "{stderr}");
    assert!(stderr.contains(&format!("{:?}", pid1.trim())), "names PID 1: {stderr}");
}
