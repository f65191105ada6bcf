//! Support for the end-to-end tests that run real workloads through probes, lifecycle
//! hooks and exec (`probes`, `lifecycle` and `etcd` in the integration tests): a node
//! whose agent takes a bearer token (exec changes state, so it needs one), `outpost exec`,
//! a pod's Events and containers by name, and free loopback ports.

// Test support fails by panicking, with a message saying what went wrong.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::agent::Agent;
use crate::containerd::test_image;
use crate::pods::{Node, eventually};
use crate::{outpost_bin, write_private};

/// An agent running pods on a node, with the token `outpost exec` sends.
#[derive(Debug)]
pub struct Workload {
    pub agent: Agent,
    pub token: PathBuf,
}

impl Workload {
    /// `outpost run` on `node`, with `--token-file` (reads stay anonymous on loopback).
    pub fn start(node: &Node) -> Workload {
        Workload::start_with(node, &[])
    }

    /// [`Workload::start`] with `extra` flags.
    pub fn start_with(node: &Node, extra: &[&str]) -> Workload {
        let token = node.path("token");
        write_private(&token, "e2e-workload-token\n");
        let mut args = node.args();
        args.push("--token-file".into());
        args.push(token.clone().into());
        args.extend(extra.iter().map(Into::into));
        let agent = Agent::start_pods(&node.manifests(), &args);
        Workload { agent, token }
    }

    /// `outpost exec NAMESPACE/POD [-c CONTAINER] --server .. --token-file .. -- COMMAND`.
    pub fn exec(&self, pod: &str, container: Option<&str>, command: &[&str]) -> Output {
        let mut exec = Command::new(outpost_bin());
        exec.args(["exec", pod]);
        if let Some(container) = container {
            exec.args(["-c", container]);
        }
        exec.args(["--server", &format!("http://{}", self.agent.addr)])
            .arg("--token-file")
            .arg(&self.token)
            .arg("--")
            .args(command);
        exec.output().expect("run outpost exec")
    }

    /// What a container wrote to its log, through the agent's `/containerLogs`.
    pub fn logs(&self, namespace: &str, pod: &str, container: &str) -> String {
        let path = format!("/containerLogs/{namespace}/{pod}/{container}");
        let (status, body) = self.agent.get(&path);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// The Events the agent recorded about a pod (`/pods/{ns}/{name}/events`), oldest first.
    pub fn events(&self, namespace: &str, name: &str) -> Vec<Value> {
        let (status, body) = self.agent.get(&format!("/pods/{namespace}/{name}/events"));
        assert_eq!(status, 200, "GET /pods/{namespace}/{name}/events: {body}");
        let list: Value = serde_json::from_str(&body).expect("an EventList");
        list["items"].as_array().cloned().unwrap_or_default()
    }
}

/// Removes the manifests of `pods` (`(file, pod name)`) and waits until those pods are
/// gone: from `/pods`, from containerd (no container left in the node's namespace: name
/// every pod the node runs) and from the host ([`Node::leftovers`]). Tests end this way
/// rather than by dropping a busy agent.
pub fn delete_and_wait(node: &Node, agent: &Agent, pods: &[(&str, &str)]) {
    let long = std::time::Duration::from_secs(60);
    let mut uids = Vec::new();
    for (file, name) in pods {
        let pod = crate::pods::pod(agent, name).unwrap_or_else(|| panic!("no pod {name}"));
        uids.push(pod["metadata"]["uid"].as_str().unwrap_or_default().to_owned());
        node.remove(file);
    }
    for (_, name) in pods {
        eventually(&format!("{name} is gone from /pods"), long, || {
            crate::pods::pod(agent, name).is_none()
        });
    }
    eventually("containerd has no container left", long, || node.containers().is_empty());
    eventually("no containerd shim is left for the node's namespace", long, || {
        shims(&node.namespace).is_empty()
    });
    for uid in uids {
        eventually(&format!("nothing of pod {uid} is left on the host"), long, || {
            node.leftovers(&uid).is_empty()
        });
    }
}

/// The PIDs of the containerd shims serving the containerd namespace `namespace`.
pub fn shims(namespace: &str) -> Vec<u32> {
    let wanted = format!("\0-namespace\0{namespace}\0");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline);
            (cmdline.starts_with("/usr/bin/containerd-shim") && cmdline.contains(&wanted))
                .then_some(pid)
        })
        .collect()
}

/// Imports the test image tarball `name` (e.g. `etcd-oci.tar`) into the node's containerd
/// namespace (the node's drop removes every image there).
pub fn import(node: &Node, name: &str) {
    let tarball = test_image(name);
    let out = Command::new(outpost_bin())
        .args(["images", "import", "--containerd-socket"])
        .arg(&node.socket)
        .args(["--containerd-namespace", &node.namespace])
        .arg(&tarball)
        .output()
        .expect("run outpost images import");
    assert!(out.status.success(), "importing {}: {}", tarball.display(), text(&out));
}

/// The first Event with `reason` whose message starts with `prefix`.
pub fn find_event<'a>(events: &'a [Value], reason: &str, prefix: &str) -> Option<&'a Value> {
    events.iter().find(|e| {
        e["reason"] == reason && e["message"].as_str().is_some_and(|m| m.starts_with(prefix))
    })
}

/// How many times that Event happened (its `count`, 1 when it has none).
pub fn event_count(events: &[Value], reason: &str, prefix: &str) -> i64 {
    events
        .iter()
        .filter(|e| {
            e["reason"] == reason && e["message"].as_str().is_some_and(|m| m.starts_with(prefix))
        })
        .map(|e| e["count"].as_i64().unwrap_or(1))
        .sum()
}

/// The status of the container `name` of a pod (`Value::Null` if it has none yet).
pub fn status_of<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["name"] == name))
        .unwrap_or(&Value::Null)
}

/// The status (`"True"`/`"False"`) of the pod condition `kind`, if the pod has it.
pub fn condition<'a>(pod: &'a Value, kind: &str) -> Option<&'a str> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str())
}

/// Whether the container runs (state `running`).
pub fn is_running(container: &Value) -> bool {
    container["state"]["running"].is_object()
}

/// The container's restart count (0 when absent).
pub fn restarts(container: &Value) -> i64 {
    container["restartCount"].as_i64().unwrap_or(0)
}

/// The container's ID in containerd (its status's `containerID` without the scheme).
pub fn container_id(container: &Value) -> String {
    let id = container["containerID"].as_str().unwrap_or_default();
    id.trim_start_matches("containerd://").to_owned()
}

/// The host PID of the init process of the task `id` (`ctr tasks list` in the node's
/// namespace).
pub fn task_pid(node: &Node, id: &str) -> Option<i32> {
    node.ctr(&["tasks", "list"]).lines().skip(1).find_map(|l| {
        let fields: Vec<&str> = l.split_whitespace().collect();
        (fields.first() == Some(&id)).then(|| fields.get(1)?.parse().ok()).flatten()
    })
}

/// `N` distinct loopback TCP ports that were free a moment ago (the OS picks them).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    std::array::from_fn(|n| listeners[n].local_addr().expect("a local address").port())
}

/// A directory under the node's temp dir for a hostPath volume (made here).
pub fn host_dir(node: &Node, name: &str) -> PathBuf {
    let dir = node.path(name);
    std::fs::create_dir_all(&dir).expect("create a hostPath dir");
    dir
}

/// The lines of a file (none when it does not exist yet).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// A command's stdout and stderr, for messages.
pub fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Pretty JSON, for messages.
pub fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}
