//! End to end: the admission policy per source (`admissionPolicy` in the config file) on
//! a running agent with real containerd. A pod its source may not run is Failed with
//! reason CapabilitiesForbidden in `/pods` (the message names the source, the field and
//! the config key), with a Warning Event and a `refused` entry in the manifest audit;
//! the other pods of the same manifest run; the same pod from the manifest directory
//! runs; a config that allows it runs it.

use outpost_tests::needs;
use std::path::Path;
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::manifest_server::ManifestServer;
use outpost_tests::pods::{Node, eventually, pod, wait_pod};
use outpost_tests::workload::{Workload, find_event, host_dir, shims};
use outpost_tests::write_private;
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(60);
const TOKEN: &str = "e2e-admission-policy-token";
const FORBIDDEN: &str = "CapabilitiesForbidden";

/// A busybox pod that sleeps (and stops at once on SIGTERM), with `spec` merged in.
fn sleeper(name: &str, spec: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "3600"],
            }],
        },
    });
    for (key, value) in spec.as_object().into_iter().flatten() {
        pod["spec"][key] = value.clone();
    }
    pod
}

fn privileged(name: &str) -> Value {
    let mut pod = sleeper(name, json!({}));
    pod["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    pod
}

/// A pod with the hostPath volume `path` mounted at /data.
fn with_host_path(name: &str, path: &Path) -> Value {
    let mut pod = sleeper(name, json!({"volumes": [{"name": "data", "hostPath": {"path": path}}]}));
    pod["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    pod
}

fn pod_list(pods: &[Value]) -> String {
    json!({"apiVersion": "v1", "kind": "PodList", "items": pods}).to_string()
}

/// `outpost run` on `node` with the push endpoint (a bearer token), `config` as the
/// config file when given, and `extra` arguments.
fn start(node: &Node, config: Option<&str>, extra: &[&str]) -> Workload {
    let token = node.path("token");
    write_private(&token, format!("{TOKEN}\n"));
    let mut args = node.args();
    args.push("--token-file".into());
    args.push(token.clone().into());
    if let Some(config) = config {
        let path = node.path("outpost.yaml");
        std::fs::write(&path, config).expect("write the config file");
        args.push("--config".into());
        args.push(path.into());
    }
    args.extend(extra.iter().map(std::ffi::OsString::from));
    Workload { agent: Agent::start_pods(&node.manifests(), &args), token }
}

/// `PUT /manifests/{key}` (or DELETE, with no body) → (status, JSON answer).
fn push(agent: &Agent, method: &str, key: &str, body: &str) -> (u16, Value) {
    let auth = format!("Bearer {TOKEN}");
    let path = format!("/manifests/{key}");
    let (status, answer) =
        agent.request(method, &path, &[("Authorization", &auth)], body.as_bytes());
    let answer = serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{answer}: {e}"));
    (status, answer)
}

/// The manifest audit's `refused` entries.
fn refused_entries(agent: &Agent) -> Vec<Value> {
    let (status, body) = agent.get("/manifests/audit");
    assert_eq!(status, 200, "GET /manifests/audit: {body}");
    let list: Value = serde_json::from_str(&body).expect("a ManifestAuditList");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items.into_iter().filter(|e| e["action"] == "refused").collect()
}

/// Waits for `name` to be refused: Failed with CapabilitiesForbidden, a message holding
/// each of `says`, and a Warning Event saying the same; returns the pod.
fn assert_refused(w: &Workload, name: &str, says: &[&str]) -> Value {
    let p = wait_pod(&w.agent, name, LONG, |p| p["status"]["phase"] == "Failed");
    assert_eq!(p["status"]["reason"], FORBIDDEN, "{}", p["status"]);
    let message = p["status"]["message"].as_str().unwrap_or_default();
    for part in says {
        assert!(message.contains(part), "{part:?} in the status message: {message}");
    }
    let events = w.events("default", name);
    let event = find_event(&events, FORBIDDEN, says[0]);
    assert!(event.is_some_and(|e| e["type"] == "Warning"), "a Warning Event: {events:#?}");
    p
}

fn assert_running(agent: &Agent, name: &str) -> Value {
    wait_pod(agent, name, LONG, |p| {
        assert_ne!(p["status"]["phase"], "Failed", "{name} failed: {}", p["status"]);
        p["status"]["phase"] == "Running"
    })
}

/// Waits until `names` are gone from `/pods` and nothing of the node's pods is left in
/// containerd or on the host.
fn assert_gone(node: &Node, w: &Workload, pods: &[(&str, String)]) {
    for (name, _) in pods {
        eventually(&format!("{name} is gone from /pods"), LONG, || pod(&w.agent, name).is_none());
    }
    eventually("containerd has no container left", LONG, || node.containers().is_empty());
    eventually("no shim is left for the node", LONG, || shims(&node.namespace).is_empty());
    for (name, uid) in pods {
        eventually(&format!("nothing of {name} is left on the host"), LONG, || {
            node.leftovers(uid).is_empty()
        });
    }
}

fn uid(pod: &Value) -> String {
    pod["metadata"]["uid"].as_str().unwrap_or_default().to_owned()
}

#[needs(pods)]
#[test]
fn a_privileged_pushed_pod_is_refused_its_neighbour_runs_and_as_a_file_pod_it_runs() {
    let node = Node::new();
    let w = start(&node, None, &[]);
    let body = pod_list(&[privileged("priv"), sleeper("plain", json!({}))]);
    let (status, answer) = push(&w.agent, "PUT", "apps", &body);
    assert_eq!(status, 201, "{answer}");
    let listed = answer["refused"].as_array().cloned().unwrap_or_default();
    assert_eq!(listed.len(), 1, "the PUT lists the refusal: {answer}");
    assert!(listed[0].as_str().unwrap_or_default().starts_with("pod default/priv-edge-1: "));

    let refused = assert_refused(
        &w,
        "priv-edge-1",
        &[
            "spec.containers[0].securityContext.privileged",
            "the push endpoint (source push)",
            "admissionPolicy.push.privileged: true",
        ],
    );
    let plain = assert_running(&w.agent, "plain-edge-1");
    assert_eq!(node.containers().len(), 1, "only the plain pod's container runs");

    let entries = refused_entries(&w.agent);
    let [entry] = &entries[..] else { panic!("one refused entry: {entries:#?}") };
    assert_eq!(entry["source"], "push");
    assert_eq!(entry["file"], "apps");
    assert_eq!(entry["path"], "/manifests/apps");
    assert_eq!(entry["cause"], "push");
    assert_eq!(entry["pods"], json!(["default/priv-edge-1"]));
    let error = entry["error"].as_str().unwrap_or_default();
    assert!(error.contains("admissionPolicy.push.privileged: true"), "{error}");
    assert!(
        entry["writer"]["summary"].as_str().is_some_and(|s| s.contains("the bearer token")),
        "{entry}"
    );

    // The same pod from the manifest directory runs (after the pushed one is gone: the
    // first static pod of a name wins, M11).
    let (status, answer) = push(&w.agent, "DELETE", "apps", "");
    assert_eq!(status, 200, "{answer}");
    assert_gone(&node, &w, &[("priv-edge-1", uid(&refused)), ("plain-edge-1", uid(&plain))]);
    node.put("priv.yaml", &privileged("priv").to_string());
    let running = assert_running(&w.agent, "priv-edge-1");
    assert_eq!(refused_entries(&w.agent).len(), 1, "nothing refused from the file source");
    node.remove("priv.yaml");
    assert_gone(&node, &w, &[("priv-edge-1", uid(&running))]);
}

#[needs(pods)]
#[test]
fn a_url_pod_with_a_host_path_outside_the_allowed_list_is_refused_and_inside_runs() {
    let node = Node::new();
    let allowed = host_dir(&node, "allowed");
    let inside = host_dir(&node, "allowed/app");
    // Beside the allowed directory, and under a name it is a prefix of.
    let outside = host_dir(&node, "allowedx");
    let config =
        format!("admissionPolicy:\n  url:\n    allowedHostPaths: [{}/]\n", allowed.display());
    let server = ManifestServer::start(&pod_list(&[
        with_host_path("inside", &inside),
        with_host_path("outside", &outside),
        with_host_path("dotdot", &inside.join("../../allowedx")),
    ]));
    let url = server.url();
    let w = start(&node, Some(&config), &["--manifest-url", &url]);

    let running = assert_running(&w.agent, "inside-edge-1");
    let key = "admissionPolicy.url.allowedHostPaths";
    let outside_pod = assert_refused(
        &w,
        "outside-edge-1",
        &["spec.volumes[0].hostPath.path", "the manifest URL (source url)", key],
    );
    let dotdot = assert_refused(&w, "dotdot-edge-1", &["spec.volumes[0].hostPath.path", key]);
    assert_eq!(node.containers().len(), 1, "only the allowed pod's container runs");

    let entries = refused_entries(&w.agent);
    let [entry] = &entries[..] else { panic!("one refused entry: {entries:#?}") };
    assert_eq!(entry["source"], "url");
    assert_eq!(entry["file"], url.as_str());
    assert_eq!(entry["cause"], "fetch");
    assert_eq!(entry["pods"], json!(["default/outside-edge-1", "default/dotdot-edge-1"]));

    server.set(&pod_list(&[]));
    assert_gone(
        &node,
        &w,
        &[
            ("inside-edge-1", uid(&running)),
            ("outside-edge-1", uid(&outside_pod)),
            ("dotdot-edge-1", uid(&dotdot)),
        ],
    );
}

#[needs(pods)]
#[test]
fn a_config_that_allows_privileged_pushed_pods_runs_them() {
    let node = Node::new();
    let w = start(&node, Some("admissionPolicy:\n  push:\n    privileged: true\n"), &[]);
    let (status, answer) = push(&w.agent, "PUT", "priv", &privileged("priv").to_string());
    assert_eq!(status, 201, "{answer}");
    assert!(answer.get("refused").is_none(), "nothing refused: {answer}");
    let running = assert_running(&w.agent, "priv-edge-1");
    assert!(refused_entries(&w.agent).is_empty());

    let (status, answer) = push(&w.agent, "DELETE", "priv", "");
    assert_eq!(status, 200, "{answer}");
    assert_gone(&node, &w, &[("priv-edge-1", uid(&running))]);
}
