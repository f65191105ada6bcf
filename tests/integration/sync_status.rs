//! The pod status manager through the real binary, with real pods, against the test API
//! server: API pods' status follows their containers; while the server is cut off the
//! changes are kept and sent once per pod (O3); a pod replaced under the same name is
//! never patched; 500 and 429 back off (honouring `Retry-After`); a deleted pod gets
//! its final status and is then removed (grace 0); a static pod's status goes to its
//! mirror pod.

use outpost_tests::needs;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use outpost_tests::agent::Agent;
use outpost_tests::apiserver::Fault;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{eventually, wait_pod};
use serde_json::{Value, json};

/// The harness runs the agent as `--node-name Edge-1`.
const NODE: &str = "edge-1";
const LONG: Duration = Duration::from_secs(60);
/// Runs until SIGTERM (as PID 1, sh only dies of a trapped signal).
const SERVE: &str = "trap 'exit 0' TERM; while true; do sleep 0.1; done";

/// A node with real pods, and a test API server the agent reports to.
struct Cluster {
    // Dropped first: the agent must be gone before the node's cleanup, or it restarts
    // the containers the cleanup kills.
    agent: Agent,
    api: ApiNode,
}

impl Cluster {
    fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// With more `run` flags.
    fn start_with(extra: &[&str]) -> Cluster {
        let api = ApiNode::new();
        let agent = api.start(extra);
        api.rt.block_on(async {
            tokio::time::timeout(LONG, api.server.wait_for_watchers("pods", 1)).await.unwrap();
        });
        Cluster { api, agent }
    }

    /// Creates an API pod bound to this node: one busybox container running `script`.
    fn create(&self, name: &str, script: &str, extra: Value) -> Pod {
        self.api.server.create_pod(&api_pod(name, NODE, script, extra)).unwrap()
    }

    fn get(&self, name: &str) -> Option<Pod> {
        self.api.server.get_pod("default", name).ok()
    }

    /// Waits until the server's pod `name` satisfies `done`; returns it.
    fn wait(&self, name: &str, done: impl Fn(&Pod) -> bool) -> Pod {
        eventually(&format!("pod {name} in the API server"), LONG, || {
            self.get(name).is_some_and(|p| done(&p))
        });
        self.get(name).unwrap()
    }

    fn cut(&self) {
        self.api.rt.block_on(self.api.server.cut());
    }

    fn restore(&self) {
        self.api.rt.block_on(self.api.server.restore()).unwrap();
    }

    fn status_patches(&self) -> u64 {
        self.api.server.count("patch", "pods/status")
    }
}

fn api_pod(name: &str, node: &str, script: &str, extra: Value) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default" },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", script],
            }],
        },
    });
    let command = pod["spec"]["containers"][0]["command"].take();
    merge(&mut pod, extra);
    // A container list in `extra` replaces the default one, but keeps `script`.
    pod["spec"]["containers"][0]["command"] = command;
    serde_json::from_value(pod).unwrap()
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

/// The first container's state, as JSON.
fn state(pod: &Pod) -> Value {
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref());
    statuses
        .and_then(|c| c.first())
        .and_then(|c| serde_json::to_value(&c.state).ok())
        .unwrap_or_default()
}

fn exit_code(pod: &Pod) -> Option<i64> {
    state(pod)["terminated"]["exitCode"].as_i64()
}

/// Waits for the file `/w/go` (see [`waits_in`]).
const WAIT_FOR_GO: &str = "while [ ! -e /w/go ]; do sleep 0.1; done";

/// restartPolicy Never, and `dir` mounted at `/w`: the test ends the container by
/// writing `dir/go`.
fn waits_in(dir: &std::path::Path) -> Value {
    json!({
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{
                "name": "w",
                "hostPath": { "path": dir.to_str().unwrap(), "type": "DirectoryOrCreate" },
            }],
            "containers": [{
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", "placeholder"],
                "volumeMounts": [{ "name": "w", "mountPath": "/w" }],
            }],
        },
    })
}

fn never() -> Value {
    json!({ "spec": { "restartPolicy": "Never" } })
}

#[needs(pods)]
#[test]
fn api_pod_status_follows_its_containers() {
    let c = Cluster::start();
    let created = c.create("web", SERVE, json!({}));
    assert_eq!(phase(&created), "Pending");
    c.create("fails", "exit 3", never());
    let web = c.wait("web", |p| phase(p) == "Running" && state(p)["running"].is_object());
    let status = web.status.as_ref().unwrap();
    assert!(status.pod_ip.is_some(), "{status:?}");
    let ready = status.conditions.iter().flatten().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "True");
    let fails = c.wait("fails", |p| phase(p) == "Failed");
    assert_eq!(exit_code(&fails), Some(3));
    assert_eq!(state(&fails)["terminated"]["reason"], "Error");
}

/// O3: changes made while the server is cut off are coalesced: after the restore, at
/// most one status patch per changed pod (two allowed), none for an unchanged pod, and
/// the server ends with the latest status.
#[needs(pods)]
#[test]
fn offline_changes_are_sent_once_per_pod_after_reconnect() {
    let c = Cluster::start();
    // Each runs until a file appears in its own volume, then exits with its code.
    let finishing = [("done-0", 0), ("done-3", 3), ("done-7", 7)];
    for (name, code) in finishing {
        c.create(name, &format!("{WAIT_FOR_GO}; exit {code}"), waits_in(&c.api.node.path(name)));
    }
    c.create("steady", SERVE, json!({}));
    for name in ["done-0", "done-3", "done-7", "steady"] {
        c.wait(name, |p| phase(p) == "Running" && state(p)["running"].is_object());
    }
    c.cut();
    for (name, _) in finishing {
        std::fs::write(c.api.node.path(name).join("go"), "").unwrap();
    }
    for (name, _) in finishing {
        let terminal =
            |p: &Value| matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
        wait_pod(&c.agent, name, LONG, terminal);
    }
    // /metrics says the server is unreachable and the updates wait (the lease's probe
    // or the watch's retry may take a moment to notice the cut).
    let metric = |line: &str| {
        let (_, text) = c.agent.get("/metrics");
        text.lines().any(|l| l == line)
    };
    eventually("/metrics shows the cut", LONG, || metric("outpost_apiserver_reachable 0"));
    assert!(!metric("outpost_pod_status_updates_queued 0"), "{:?}", c.agent.get("/metrics"));
    c.api.server.reset_requests();
    c.restore();
    for (name, code) in finishing {
        let pod = c.wait(name, |p| exit_code(p).is_some());
        assert_eq!(exit_code(&pod), Some(code), "{name}");
        assert_eq!(phase(&pod), if code == 0 { "Succeeded" } else { "Failed" }, "{name}");
    }
    for (name, _) in finishing {
        let patches = c.api.server.count_object("patch", "pods/status", &format!("default/{name}"));
        assert!((1..=2).contains(&patches), "{patches} status patches for {name}");
    }
    eventually("/metrics shows the backlog sent", LONG, || {
        metric("outpost_apiserver_reachable 1") && metric("outpost_pod_status_updates_queued 0")
    });
    let steady = c.api.server.count_object("patch", "pods/status", "default/steady");
    assert_eq!(steady, 0, "the unchanged pod's status is not sent again");
    assert_eq!(phase(&c.get("steady").unwrap()), "Running");
}

/// A pod deleted and created again under the same name while the node is cut off: the
/// old pod's status never lands on the new one (the UID precondition).
#[needs(pods)]
#[test]
fn a_pod_replaced_while_offline_is_never_patched() {
    let c = Cluster::start();
    let old = c.create("swap", "sleep 2; exit 0", never());
    c.wait("swap", |p| phase(p) == "Running");
    c.cut();
    wait_pod(&c.agent, "swap", LONG, |p| p["status"]["phase"] == "Succeeded");
    c.api.server.delete_pod("default", "swap").unwrap();
    // Bound to another node: nothing here writes its status.
    let new = c.api.server.create_pod(&api_pod("swap", "elsewhere", SERVE, json!({}))).unwrap();
    assert_ne!(new.metadata.uid, old.metadata.uid);
    c.restore();
    // The fresh list removes the old pod from the agent.
    eventually("the old pod is removed", LONG, || {
        outpost_tests::pods::pod(&c.agent, "swap").is_none()
    });
    let now = c.get("swap").unwrap();
    assert_eq!(now.metadata.uid, new.metadata.uid);
    assert_eq!(now.metadata.resource_version, new.metadata.resource_version, "never written");
    assert_eq!(phase(&now), "Pending");
    // K5: until the fresh list removes the old pod, the agent may read its objects again
    // (the kube-root-ca.crt ConfigMap of its kube-api-access volume) and send its final
    // status: the pod of that name is no longer bound to the node, so the Node authorizer
    // refuses the read and NodeRestriction the status, as a real server does (kubelet
    // meets the same). Only such requests may have been refused; the status never lands.
    for refusal in c.api.server.take_refusals() {
        let read = matches!(refusal.verb.as_str(), "list" | "watch" | "get")
            && matches!(refusal.resource.as_str(), "configmaps" | "secrets")
            && refusal.message.contains("no relationship found");
        let status = refusal.resource == "pods/status"
            && refusal.object == "default/swap"
            && refusal
                .message
                .contains("can only update pod status for pods with spec.nodeName set to itself");
        assert!(read || status, "{refusal}");
    }
}

/// 429 with Retry-After and 500: the pod backs off, is not retried before Retry-After
/// has passed, and its latest status gets through.
#[needs(pods)]
#[test]
fn server_errors_back_off_honouring_retry_after() {
    let c = Cluster::start();
    let dir = c.api.node.path("slow");
    c.create("slow", &format!("{WAIT_FOR_GO}; exit 0"), waits_in(&dir));
    c.wait("slow", |p| phase(p) == "Running" && state(p)["running"].is_object());
    c.api.server.reset_requests();
    c.api.server.fail_next(1, "patch", "pods/status", Fault::too_many_requests().retry_after(4));
    c.api.server.fail_next(1, "patch", "pods/status", Fault::internal_error());
    std::fs::write(dir.join("go"), "").unwrap();
    eventually("the first patch (429)", LONG, || c.status_patches() >= 1);
    // Well inside the 4 s the server asked for: no retry yet.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.status_patches(), 1, "retried before Retry-After");
    let pod = c.wait("slow", |p| phase(p) == "Succeeded");
    assert_eq!(exit_code(&pod), Some(0));
    assert_eq!(c.api.server.faults_remaining(), 0, "the 500 was met too");
    assert!(c.status_patches() >= 3, "429, 500, then the status");
}

/// A pod deleted through the API: once its containers are gone, its final status is
/// written, then the agent deletes it (grace 0, once). A finalizer keeps the object
/// readable after that delete.
#[needs(pods)]
#[test]
fn a_deleted_pod_gets_its_final_status_then_is_removed() {
    let c = Cluster::start();
    c.create("gone", SERVE, json!({ "metadata": { "finalizers": ["example.com/keep"] } }));
    c.wait("gone", |p| phase(p) == "Running");
    c.api.server.delete("pods", Some("default"), "gone", Some(5)).unwrap();
    let last = c.wait("gone", |p| p.metadata.deletion_grace_period_seconds == Some(0));
    assert_eq!(c.api.server.count("delete", "pods"), 1, "one delete, by the agent");
    assert!(matches!(phase(&last), "Failed" | "Succeeded"), "final phase: {}", phase(&last));
    assert!(state(&last)["terminated"].is_object(), "{}", state(&last));
    let ready =
        last.status.iter().flat_map(|s| s.conditions.iter().flatten()).find(|c| c.type_ == "Ready");
    assert_eq!(ready.map(|c| c.status.as_str()), Some("False"));
    // The finalizer goes: the pod is removed, and the agent deletes nothing more.
    let patch =
        outpost_tests::apiserver::Patch::Merge(json!({ "metadata": { "finalizers": null } }));
    c.api.server.patch("pods", Some("default"), "gone", &patch, false).unwrap();
    eventually("the pod is removed", LONG, || c.get("gone").is_none());
    eventually("the agent forgets the pod", LONG, || {
        outpost_tests::pods::pod(&c.agent, "gone").is_none()
    });
    assert_eq!(c.api.server.count("delete", "pods"), 1);
}

/// A static pod's status goes to the mirror pod the agent made for it (R1).
#[needs(pods)]
#[test]
fn a_static_pods_status_goes_to_its_mirror_pod() {
    let c = Cluster::start();
    let script = serde_json::to_string(SERVE).unwrap();
    c.api.node.put(
        "static.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static\nspec:\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
        ),
    );
    let name = format!("static-{NODE}");
    let local = wait_pod(&c.agent, &name, LONG, |p| p["status"]["phase"] == "Running");
    let hash = local["metadata"]["annotations"]["kubernetes.io/config.hash"].as_str().unwrap();
    // The agent creates the mirror pod (R1); its status is the static pod's.
    let got = c.wait(&name, |p| phase(p) == "Running" && state(p)["running"].is_object());
    let annotations = got.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("kubernetes.io/config.mirror").map(String::as_str), Some(hash));
    assert!(got.status.unwrap().pod_ip.is_some());
}

/// Node shutdown with `--stop-pods-on-shutdown`: the pods are stopped,
/// and their last status (Failed, reason Terminated, DisruptionTarget) and the Node's
/// Ready=False "node is shutting down" reach the API server before the agent exits.
#[needs(pods)]
#[test]
fn a_node_shutdown_reports_pods_terminated_and_the_node_not_ready() {
    let c = Cluster::start_with(&["--stop-pods-on-shutdown"]);
    c.create("web", SERVE, json!({}));
    c.wait("web", |p| phase(p) == "Running");
    let Cluster { api, agent } = c;
    agent.signal("TERM");
    agent.wait_for_log("node shutdown: every pod is stopped");
    // A second SIGTERM changes nothing: stop() waits for the agent's own exit.
    agent.stop();
    let server = &api.server;
    let pod = server.get_pod("default", "web").unwrap();
    let status = pod.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Terminated"));
    let disruption = status.conditions.iter().flatten().find(|c| c.type_ == "DisruptionTarget");
    assert_eq!(disruption.map(|c| c.status.as_str()), Some("True"), "{:?}", status.conditions);
    let terminated = status.container_statuses.unwrap()[0].state.clone().unwrap().terminated;
    assert_eq!(terminated.map(|t| t.exit_code), Some(0), "SIGTERM, then a clean exit");
    let node: k8s_openapi::api::core::v1::Node = server.get_typed(None, NODE).unwrap();
    let ready = node.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "Ready");
    let ready = ready.unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.message.as_deref()),
        ("False", Some("node is shutting down"))
    );
}
