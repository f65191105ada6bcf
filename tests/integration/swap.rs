//! End to end: swap (SEMANTICS.md D6) as kubelet treats it, with a real swap file turned
//! on for the test (`mkswap`, `swapon`; `swapoff` and removed when the test ends, also when
//! it fails). The agent refuses to start on a node with swap on, in kubelet's words,
//! unless `failSwapOn` is false; on this host's cgroup v1 memory controller every
//! container's memory and swap together are limited to its memory limit
//! (`memory.memsw.limit_in_bytes`), kubelet's `NoSwap` there.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::needs;
use outpost_tests::pods::{Node, container, wait_pod};
use outpost_tests::swap::SwapFile;
use outpost_tests::workload::delete_and_wait;
use outpost_tests::{outpost_bin, prerequisite};

const LONG: Duration = Duration::from_secs(60);

/// cgroup v1's memory-and-swap limit, which the memory controller has with swap
/// accounting.
const ROOT_MEMSW: &str = "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes";

/// A static pod: one busybox container `main` sleeping, with `resources` (a YAML flow
/// mapping).
fn manifest(name: &str, resources: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  \
         - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    \
         command: [\"sleep\", \"3600\"]\n    resources: {resources}\n"
    )
}

/// `outpost run` on `node` (its default settings): what it printed on stderr and its
/// exit code, once it exited (it must within a minute).
fn refused_start(node: &Node) -> (String, Option<i32>) {
    let mut child = Command::new(outpost_bin())
        .args(["run", "--node-name", "edge-1", "--listen", "127.0.0.1:0", "--manifest-dir"])
        .arg(node.manifests())
        .args(node.args())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the agent");
    let deadline = Instant::now() + LONG;
    while child.try_wait().expect("wait for the agent").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the agent started with swap on and failSwapOn true");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("the agent's output");
    (String::from_utf8_lossy(&out.stderr).into_owned(), out.status.code())
}

/// The memory limit and the memory-and-swap limit of the cgroup of `pod`'s container,
/// under one of the node's QoS cgroups.
fn limits(node: &Node, pod: &serde_json::Value) -> (u64, u64) {
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let id = container(pod)["containerID"].as_str().unwrap().trim_start_matches("containerd://");
    let cgroup = node
        .pod_cgroups(uid)
        .iter()
        .map(|pod| Path::new("/sys/fs/cgroup/memory").join(pod.trim_start_matches('/')).join(id))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| panic!("no memory cgroup of container {id}"));
    let read = |file: &str| -> u64 {
        let path = cgroup.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        text.trim().parse().unwrap()
    };
    (read("memory.limit_in_bytes"), read("memory.memsw.limit_in_bytes"))
}

/// D6: `failSwapOn` (true by default) refuses a node with swap on in kubelet's words;
/// `failSwapOn: false` (the config file's key) starts there. On cgroup v1 with swap
/// accounting, a Burstable and a Guaranteed container each get a memory-and-swap limit
/// equal to their memory limit: no swap beyond it (kubelet's `NoSwap` on v1).
#[needs(pods, swap)]
#[test]
fn d6_swap_on_refuses_the_start_unless_fail_swap_on_is_false_and_v1_limits_memsw() {
    let node = Node::new();
    let memsw = Path::new(ROOT_MEMSW).exists();
    prerequisite(
        memsw || !outpost_tests::in_ci(),
        "cgroup v1's memory controller with swap accounting (memory.memsw.limit_in_bytes)",
    );
    prerequisite(!outpost_tests::swap::is_on(), "a machine whose own swap is off");
    let mut swap = SwapFile::on(&node.path("swapfile"), 16);

    let (stderr, code) = refused_start(&node);
    assert_ne!(code, Some(0), "{stderr}");
    let words = "running with swap on is not supported, please disable swap or set \
                 --fail-swap-on flag to false";
    assert!(stderr.contains(words), "kubelet's words: {stderr}");

    let config = node.path("outpost.yaml");
    std::fs::write(&config, "failSwapOn: false\n").unwrap();
    let mut args = node.args();
    args.extend(["--config".into(), config.into()]);
    let agent = Agent::start_pods(&node.manifests(), &args);
    agent.wait_for_log("swap is on and failSwapOn is false");
    swap.off();
    if !memsw {
        return;
    }

    let mi = 1 << 20;
    let burstable = "{requests: {memory: 32Mi}, limits: {memory: 64Mi}}";
    let guaranteed = "{requests: {cpu: 100m, memory: 48Mi}, limits: {cpu: 100m, memory: 48Mi}}";
    node.put("burstable.yaml", &manifest("burstable", burstable));
    node.put("guaranteed.yaml", &manifest("guaranteed", guaranteed));
    for (name, limit) in [("burstable-edge-1", 64 * mi), ("guaranteed-edge-1", 48 * mi)] {
        let pod = wait_pod(&agent, name, LONG, |p| container(p)["state"]["running"].is_object());
        assert_eq!(limits(&node, &pod), (limit, limit), "{name}: memory and memory+swap");
    }
    delete_and_wait(
        &node,
        &agent,
        &[("burstable.yaml", "burstable-edge-1"), ("guaranteed.yaml", "guaranteed-edge-1")],
    );
}
