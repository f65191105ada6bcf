//! End to end, RuntimeClasses (D5) with real containerd and runc: the node has two
//! handlers, the default one (runc) and `wrapped`, the runc shim running a wrapper of
//! runc that a test writes (it appends each command line it is run with to a file, then
//! runs runc), given as the handler's `BinaryName`. A pod whose class leads to `wrapped`
//! is made through the wrapper (the file names its containers); a pod without a class is
//! not. A static pod names the handler itself; an API pod names a RuntimeClass of the
//! test API server, whose RuntimeClass admission copies the class's overhead into the
//! pod. An unknown class or handler leaves the pod waiting with kubelet's reason and
//! message. A pod's overhead is in its pod cgroup's limits (this host's cgroup v1 files).
//! Offline, an API pod keeps the class it read.

use outpost_tests::needs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use outpost_tests::agent::Agent;
use outpost_tests::api_pods::{Cluster, api_pod, container_id, state};
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, container, eventually, wait_pod};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(60);
const SERVE: &str = "trap 'exit 0' TERM; while true; do sleep 0.1; done";
/// The handler the wrapper is, as the node's config names it.
const WRAPPED: &str = "wrapped";

/// The wrapper of runc on `node`: its path, and the file it appends its command lines to.
struct Wrapper {
    binary: PathBuf,
    calls: PathBuf,
}

impl Wrapper {
    /// Writes the wrapper into `node`'s directory (removed with the node, after its
    /// containers: containerd's shim runs the wrapper to delete them too).
    fn new(node: &Node) -> Wrapper {
        let runc = outpost::host::on_path("runc").expect("runc on PATH (#[needs(runc)])");
        let binary = node.path("runc-wrapper");
        let calls = node.path("runc-wrapper.calls");
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            calls.display(),
            runc.display()
        );
        std::fs::write(&binary, script).unwrap();
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        Wrapper { binary, calls }
    }

    /// `--runtime-handler wrapped=<wrapper>`.
    fn flag(&self) -> [String; 2] {
        ["--runtime-handler".to_owned(), format!("{WRAPPED}={}", self.binary.display())]
    }

    /// Whether the wrapper created the container `id` (`runc ... create ... <id>`).
    fn created(&self, id: &str) -> bool {
        let calls = std::fs::read_to_string(&self.calls).unwrap_or_default();
        calls.lines().any(|line| line.contains(" create ") && line.ends_with(id))
    }
}

/// A static pod: one busybox container `main`, with `pod_extra` lines under `spec:` and
/// `resources` (a YAML flow mapping).
fn manifest(name: &str, pod_extra: &str, resources: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  \
         terminationGracePeriodSeconds: 2\n{pod_extra}  containers:\n  - name: main\n    \
         image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \
         \"-c\", {SERVE:?}]\n    resources: {resources}\n"
    )
}

fn running(p: &Value) -> bool {
    container(p)["state"]["running"].is_object()
}

fn static_container_id(p: &Value) -> String {
    outpost_tests::workload::container_id(container(p))
}

/// The pod condition `kind` of a pod's status as JSON.
fn condition(status: &Value, kind: &str) -> Value {
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    conditions.into_iter().find(|c| c["type"] == kind).unwrap_or_default()
}

/// Whether the pod's sandbox failed with kubelet's `CreatePodSandboxError` and `message`,
/// its container waiting to be created.
fn sandbox_failed(status: &Value, message: &str) -> bool {
    let ready = condition(status, "PodReadyToStartContainers");
    let waiting = &status["containerStatuses"][0]["state"]["waiting"];
    ready["status"] == "False"
        && ready["reason"] == "CreatePodSandboxError"
        && ready["message"] == message
        && waiting["reason"] == "ContainerCreating"
}

/// Skips (or fails under CI) where the controllers are on cgroup v2: the overhead checks
/// read v1 files, what this machine has (as the QoS tests).
fn v1_host() -> bool {
    let v1 = std::path::Path::new("/sys/fs/cgroup/cpu/cpu.shares").exists();
    if !v1 && std::env::var_os("CI").is_some() {
        panic!("these tests read cgroup v1 files; this host has its controllers on v2");
    }
    v1
}

/// A cgroup v1 file's number: `/sys/fs/cgroup/<controller>/<cgroup>/<file>`.
fn number(controller: &str, cgroup: &str, file: &str) -> i64 {
    let path = format!("/sys/fs/cgroup/{controller}/{}/{file}", cgroup.trim_start_matches('/'));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.trim().parse().unwrap_or_else(|e| panic!("{path}: {text:?}: {e}"))
}

/// The cpu shares, CFS quota and memory limit of a Guaranteed pod's cgroup.
fn pod_limits(node: &Node, uid: &str) -> (i64, i64, i64) {
    let cgroup = format!("{}/pod{uid}", node.kubepods());
    (
        number("cpu", &cgroup, "cpu.shares"),
        number("cpu", &cgroup, "cpu.cfs_quota_us"),
        number("memory", &cgroup, "memory.limit_in_bytes"),
    )
}

/// The limits of the pods below (200m and 64Mi) with the classes' overhead (100m, 32Mi):
/// kubelet's ResourceConfigForPod adds the overhead to the requests and set limits.
const LIMITS: &str = "{limits: {cpu: 200m, memory: 64Mi}}";
const WITH_OVERHEAD: (i64, i64, i64) = (307, 30_000, 96 << 20);
const WITHOUT_OVERHEAD: (i64, i64, i64) = (204, 20_000, 64 << 20);

/// D5: a static pod's `runtimeClassName` names the node's handler: its container is
/// made through the wrapper, a pod without a class is not; its `spec.overhead` is in its
/// pod cgroup; a handler the node does not have gets kubelet's (containerd's) error.
#[needs(pods, runc)]
#[test]
fn d5_a_static_pods_class_is_a_handler_of_the_node() {
    let node = Node::new();
    let wrapper = Wrapper::new(&node);
    let mut args = node.args();
    args.extend(wrapper.flag().map(Into::into));
    let agent = Agent::start_pods(&node.manifests(), &args);
    let overhead = "  overhead: {cpu: 100m, memory: 32Mi}\n";
    let class = format!("  runtimeClassName: {WRAPPED}\n{overhead}");
    node.put("wrapped.yaml", &manifest("wrapped", &class, LIMITS));
    node.put("plain.yaml", &manifest("plain", "", LIMITS));
    node.put("unknown.yaml", &manifest("unknown", "  runtimeClassName: kata\n", "{}"));

    let wrapped = wait_pod(&agent, "wrapped-edge-1", LONG, running);
    let plain = wait_pod(&agent, "plain-edge-1", LONG, running);
    assert!(wrapper.created(&static_container_id(&wrapped)), "the wrapper made its container");
    assert!(!wrapper.created(&static_container_id(&plain)), "a pod without a class: runc");

    let message = "rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime \
                   for \"kata\" is configured";
    let unknown =
        wait_pod(&agent, "unknown-edge-1", LONG, |p| sandbox_failed(&p["status"], message));
    assert_eq!(unknown["status"]["phase"], "Pending", "{unknown}");

    if v1_host() {
        let uid = |p: &Value| p["metadata"]["uid"].as_str().unwrap().to_owned();
        assert_eq!(pod_limits(&node, &uid(&wrapped)), WITH_OVERHEAD);
        assert_eq!(pod_limits(&node, &uid(&plain)), WITHOUT_OVERHEAD);
    }
}

/// An API pod of `default` bound to the node with the container limits above, of class
/// `class` (none: `None`).
fn limited(name: &str, class: Option<&str>) -> Value {
    let resources = json!({"resources": {"limits": {"cpu": "200m", "memory": "64Mi"}}});
    let spec = class.map_or_else(|| json!({}), |class| json!({"runtimeClassName": class}));
    api_pod(name, resources, spec)
}

fn runtime_class(name: &str, handler: &str, overhead: Option<Value>) -> Value {
    let mut class = json!({
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": name}, "handler": handler,
    });
    if let Some(pod_fixed) = overhead {
        class["overhead"] = json!({"podFixed": pod_fixed});
    }
    class
}

fn status(pod: &Pod) -> Value {
    serde_json::to_value(pod.status.clone().unwrap_or_default()).unwrap()
}

/// D5: an API pod's RuntimeClass (read from the API server, as the Node authorizer
/// allows) leads to the handler its containers are made with, and the overhead the API
/// server's admission copied from the class is in its pod cgroup; a class deleted before
/// the pod reached the node, and a class whose handler the node lacks, leave the pod
/// with kubelet's reason, message and Event. After a reboot without the API server the
/// pod comes back with the class it read before.
#[needs(pods, runc)]
#[test]
fn d5_an_api_pods_runtime_class_leads_to_its_handler() {
    let api = ApiNode::new();
    let wrapper = Wrapper::new(&api.node);
    let server = &api.server;
    let overhead = json!({"cpu": "100m", "memory": "32Mi"});
    server.create(runtime_class("gpu", WRAPPED, Some(overhead.clone()))).unwrap();
    server.create(runtime_class("sandboxed", "kata", None)).unwrap();
    server.create(runtime_class("gone", WRAPPED, None)).unwrap();
    // Created while its class exists (the API server's admission refuses it otherwise),
    // the class deleted before the node runs it.
    let gone = serde_json::from_value(limited("gone", Some("gone"))).unwrap();
    server.create_pod(&gone).unwrap();
    server.delete("runtimeclasses", None, "gone", None).unwrap();
    let [flag, value] = wrapper.flag();
    let c = Cluster::with(api, &[flag.as_str(), value.as_str()]);

    let created = c.create_pod(limited("gpu", Some("gpu")));
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(serde_json::to_value(&spec.overhead).unwrap(), overhead, "the class's overhead");
    c.create_pod(limited("plain", None));
    c.create_pod(limited("sandboxed", Some("sandboxed")));
    let gpu = c.wait_running("gpu");
    let plain = c.wait_running("plain");
    assert!(wrapper.created(&container_id(&gpu, "main")), "the wrapper made its container");
    assert!(!wrapper.created(&container_id(&plain, "main")), "a pod without a class: runc");
    if v1_host() {
        let uid = |p: &Pod| p.metadata.uid.clone().unwrap();
        assert_eq!(pod_limits(&c.api.node, &uid(&gpu)), WITH_OVERHEAD);
        assert_eq!(pod_limits(&c.api.node, &uid(&plain)), WITHOUT_OVERHEAD);
    }

    for (name, message) in [
        ("gone", "runtimeclass.node.k8s.io \"gone\" not found".to_owned()),
        (
            "sandboxed",
            "rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \
             \"kata\" is configured"
                .to_owned(),
        ),
    ] {
        let pod = c.wait(name, "its sandbox failed", |p| sandbox_failed(&status(p), &message));
        assert_eq!(state(&pod, "main")["waiting"]["reason"], "ContainerCreating");
        let event = format!("Failed to create pod sandbox: {message}");
        eventually(&format!("{name}'s FailedCreatePodSandBox Event"), LONG, || {
            c.events(name)
                .iter()
                .any(|e| e["reason"] == "FailedCreatePodSandBox" && e["message"] == event)
        });
    }

    // A reboot without the API server: the class read before is kept (V3), and the pod
    // comes back through the wrapper.
    let mut c = c;
    if let Some(agent) = c.agent.take() {
        agent.stop();
    }
    c.api.rt.block_on(c.server().cut());
    c.api.node.reboot();
    let agent = c.api.start(&[flag.as_str(), value.as_str()]);
    let uid = gpu.metadata.uid.clone().unwrap();
    let back = |p: &Value| running(p) && p["metadata"]["uid"] == uid.as_str();
    let local = wait_pod(&agent, "gpu", LONG, back);
    let id = static_container_id(&local);
    assert_ne!(id, container_id(&gpu, "main"), "a new container after the reboot");
    assert!(wrapper.created(&id), "offline, the kept class still leads to the wrapper");
    c.agent = Some(agent);
}
