//! What the end-to-end tests of API pods share: an agent on an [`ApiNode`] whose pods come
//! from the test API server ([`Cluster`]), the pod they start from ([`api_pod`]), and what
//! they read of pods and of their containers.

// A harness fails the test by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde_json::{Value, json};

use crate::agent::Agent;
use crate::apiserver::TestApiServer;
use crate::cluster::ApiNode;
use crate::containerd::BUSYBOX_IMAGE;
use crate::pods::{eventually, wait_pod};
use crate::workload::task_pid;

/// The node's name: the harness runs the agent as `--node-name Edge-1`.
pub const NODE: &str = "edge-1";
/// How long a test waits for what it expects.
pub const LONG: Duration = Duration::from_secs(60);
/// Runs until SIGTERM (as PID 1, sh only dies of a trapped signal).
pub const SERVE: &str = "trap 'exit 0' TERM; while true; do sleep 0.1; done";

/// An agent on a test node, its pods from the test API server.
#[derive(Debug)]
pub struct Cluster {
    // Dropped first: the agent must be gone before the node's cleanup.
    pub agent: Option<Agent>,
    pub api: ApiNode,
    /// What the agent's environment has besides the harness's (each start's).
    pub env: Vec<(String, PathBuf)>,
}

impl Cluster {
    /// A plain-HTTP API server and an agent with no extra flags.
    pub fn start() -> Cluster {
        Cluster::with(ApiNode::new(), &[])
    }

    /// An agent with `flags` on `api`'s node, once it watches its pods.
    pub fn with(api: ApiNode, flags: &[&str]) -> Cluster {
        Cluster::with_env(api, flags, Vec::new())
    }

    /// [`Cluster::with`], the agent (this one and every one after a reboot) with `env`.
    pub fn with_env(api: ApiNode, flags: &[&str], env: Vec<(String, PathBuf)>) -> Cluster {
        let agent = api.start_env(flags, &env);
        api.rt.block_on(async {
            tokio::time::timeout(LONG, api.server.wait_for_watchers("pods", 1)).await.unwrap();
        });
        Cluster { agent: Some(agent), api, env }
    }

    pub fn server(&self) -> &TestApiServer {
        &self.api.server
    }

    pub fn create(&self, object: Value) -> Value {
        self.server().create(object).unwrap()
    }

    pub fn create_pod(&self, pod: Value) -> Pod {
        self.server().create_pod(&serde_json::from_value(pod).unwrap()).unwrap()
    }

    /// The API server's pod `namespace/name`.
    pub fn pod_in(&self, namespace: &str, name: &str) -> Pod {
        self.server().get_pod(namespace, name).unwrap()
    }

    /// The API server's pod `name` of `default`.
    pub fn pod(&self, name: &str) -> Pod {
        self.pod_in("default", name)
    }

    /// Waits until the API server's pod `namespace/name` satisfies `done`; the pod.
    pub fn wait_in(
        &self,
        namespace: &str,
        name: &str,
        what: &str,
        done: impl Fn(&Pod) -> bool,
    ) -> Pod {
        eventually(&format!("pod {namespace}/{name}: {what}"), LONG, || {
            self.server().get_pod(namespace, name).is_ok_and(|p| done(&p))
        });
        self.pod_in(namespace, name)
    }

    /// [`Cluster::wait_in`] for a pod of `default`.
    pub fn wait(&self, name: &str, what: &str, done: impl Fn(&Pod) -> bool) -> Pod {
        self.wait_in("default", name, what, done)
    }

    /// Waits until the pod `name` of `default` has its container `main` running.
    pub fn wait_running(&self, name: &str) -> Pod {
        self.wait(name, "main running", |p| state(p, "main")["running"].is_object())
    }

    /// The host PID of the running container `container` of `namespace/name` (its root
    /// is the container's).
    pub fn pid_of(&self, namespace: &str, name: &str, container: &str) -> i32 {
        let what = format!("{container} running");
        let running = |p: &Pod| state(p, container)["running"].is_object();
        let pod = self.wait_in(namespace, name, &what, running);
        let id = container_id(&pod, container);
        task_pid(&self.api.node, &id).unwrap_or_else(|| panic!("no task {id}"))
    }

    /// [`Cluster::pid_of`] the container `main` of a pod of `default`.
    pub fn pid(&self, name: &str) -> i32 {
        self.pid_of("default", name, "main")
    }

    /// The agent stops (its pods keep running), the API server is cut off and the node
    /// reboots (every task is gone, and all that was on tmpfs); a new agent starts, and
    /// brings back the pod `name` of `default` (UID `uid`) from what it kept. The host
    /// PID of the pod's new container `main`, seen through the agent's own `/pods` (the
    /// API server is away). The server stays cut off.
    pub fn reboot_offline(&mut self, name: &str, uid: &str) -> i32 {
        self.power_off();
        self.power_on(name, uid)
    }

    /// The first half of [`Cluster::reboot_offline`]: the agent stops, the API server is
    /// cut off, the node's tasks and tmpfs mounts are gone. What is left on the node's
    /// disk is what a powered-off box has.
    pub fn power_off(&mut self) {
        if let Some(agent) = self.agent.take() {
            agent.stop();
        }
        self.api.rt.block_on(self.server().cut());
        self.api.node.reboot();
    }

    /// The second half of [`Cluster::reboot_offline`].
    pub fn power_on(&mut self, name: &str, uid: &str) -> i32 {
        let agent = self.api.start_env(&[], &self.env);
        let running = |p: &Value| {
            p["status"]["containerStatuses"][0]["state"]["running"].is_object()
                && p["metadata"]["uid"] == uid
        };
        let local = wait_pod(&agent, name, LONG, running);
        let id = crate::workload::container_id(&local["status"]["containerStatuses"][0]);
        self.agent = Some(agent);
        task_pid(&self.api.node, &id).unwrap_or_else(|| panic!("no task {id}"))
    }

    /// The Events of `default` about the object `name`.
    pub fn events(&self, name: &str) -> Vec<Value> {
        let events = self.server().list("events", Some("default")).unwrap();
        events.into_iter().filter(|e| e["involvedObject"]["name"] == name).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The agent goes first; its pods with it, before the node's cleanup.
        if let Some(agent) = self.agent.take() {
            drop(agent);
        }
    }
}

/// An API pod of `default` bound to this node: one busybox container `main` serving
/// until SIGTERM, with `container` merged into it and `spec` into the pod's spec.
pub fn api_pod(name: &str, container: Value, spec: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", SERVE],
            }],
        },
    });
    for (key, value) in container.as_object().into_iter().flatten() {
        pod["spec"]["containers"][0][key] = value.clone();
    }
    for (key, value) in spec.as_object().into_iter().flatten() {
        pod["spec"][key] = value.clone();
    }
    pod
}

/// The pod's phase (`""` before it has one).
pub fn phase(pod: &Pod) -> String {
    pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

/// The status of the container or init container `container`.
pub fn container_status<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    let all = status.container_statuses.iter().chain(status.init_container_statuses.iter());
    all.flatten().find(|c| c.name == container)
}

/// The container's state as JSON (`Null` before it has a status).
pub fn state(pod: &Pod, container: &str) -> Value {
    container_status(pod, container)
        .and_then(|s| serde_json::to_value(&s.state).ok())
        .unwrap_or(Value::Null)
}

/// The container's containerd ID (`""` before it has one).
pub fn container_id(pod: &Pod, container: &str) -> String {
    let status = container_status(pod, container);
    let id = status.and_then(|s| s.container_id.clone()).unwrap_or_default();
    id.trim_start_matches("containerd://").to_owned()
}

/// A path inside the container whose init is `pid`, seen from the host.
pub fn inside(pid: i32, path: &str) -> PathBuf {
    Path::new(&format!("/proc/{pid}/root")).join(path.trim_start_matches('/'))
}

/// The file `path` inside the container whose init is `pid`.
pub fn read(pid: i32, path: &str) -> String {
    let file = inside(pid, path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The environment of the process `pid` (a container's init).
pub fn environment(pid: i32) -> BTreeMap<String, String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    raw.split(|b| *b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (name, value) = entry.split_once('=')?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect()
}
