//! Kubernetes Events end to end: the real agent runs real pods on a test [`Node`] and
//! writes kubelet's events to the test API server (core/v1 `events`): what a running pod,
//! a crash-looping one, a deleted one and a rejected manifest record, aggregation into
//! one Event with a `count`, events recorded offline arriving after a reconnect (O3),
//! one Event per pod and reason of what happened while away, and Events the server
//! refuses for load dropped, not retried.

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{container, eventually, wait_pod};
use serde_json::Value;

/// Generous: only there so that a broken agent fails instead of hanging.
const LONG: Duration = Duration::from_secs(90);

/// A script that runs until SIGTERM.
const SERVE: &str = "trap 'exit 0' TERM; while true; do sleep 0.1; done";

/// A node whose agent reports to a test API server.
struct Cluster {
    // Dropped first: the agent must be gone before the node's cleanup, or it restarts
    // the containers the cleanup kills.
    agent: Agent,
    api: ApiNode,
}

impl Cluster {
    fn start() -> Cluster {
        let api = ApiNode::new();
        let agent = api.start(&[]);
        Cluster { api, agent }
    }

    /// core/v1 Events about the object named `name` (all namespaces).
    fn events(&self, name: &str) -> Vec<Value> {
        let all = self.api.server.list("events", None).unwrap();
        all.into_iter().filter(|e| e["involvedObject"]["name"] == name).collect()
    }

    /// Waits for an Event about `name` with `reason` whose message contains `text`.
    fn wait_event(&self, name: &str, reason: &str, text: &str) -> Value {
        let find = || {
            self.events(name).into_iter().find(|e| {
                e["reason"] == reason && e["message"].as_str().unwrap_or("").contains(text)
            })
        };
        eventually(&format!("a {reason} event on {name} saying {text:?}"), LONG, || {
            find().is_some()
        });
        find().unwrap()
    }

    fn running(&self, name: &str) -> Value {
        wait_pod(&self.agent, name, LONG, |p| container(p)["state"]["running"].is_object())
    }
}

/// A pod of two containers that both run until SIGTERM.
fn pair(name: &str) -> String {
    let script = serde_json::to_string(SERVE).unwrap();
    let container = |c: &str| {
        format!(
            "  - name: {c}\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
        )
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n{}{}",
        container("a"),
        container("b")
    )
}

fn manifest(name: &str, script: &str) -> String {
    let script = serde_json::to_string(script).unwrap();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
    )
}

#[needs(pods)]
#[test]
fn a_static_pod_records_pulled_created_started_and_killing() {
    let c = Cluster::start();
    c.api.node.put("web.yaml", &manifest("web", SERVE));
    let pod = c.running("web-edge-1");
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let pulled = c.wait_event("web-edge-1", "Pulled", "already present on machine");
    assert!(pulled["message"].as_str().unwrap().contains(BUSYBOX_IMAGE), "{pulled}");
    let created = c.wait_event("web-edge-1", "Created", "Created container: main");
    let started = c.wait_event("web-edge-1", "Started", "Started container main");
    for event in [&pulled, &created, &started] {
        let object = &event["involvedObject"];
        assert_eq!(object["kind"], "Pod", "{event}");
        assert_eq!(object["namespace"], "default", "{event}");
        assert_eq!(object["uid"], uid, "{event}");
        assert_eq!(object["fieldPath"], "spec.containers{main}", "{event}");
        assert_eq!(event["type"], "Normal", "{event}");
        assert_eq!(event["count"], 1, "{event}");
        assert_eq!(event["source"]["component"], "kubelet", "{event}");
        assert_eq!(event["source"]["host"], "edge-1", "{event}");
        assert_eq!(event["reportingComponent"], "outpost", "{event}");
        assert!(event["metadata"]["name"].as_str().unwrap().starts_with("web-edge-1."));
        assert!(event["firstTimestamp"].is_string() && event["lastTimestamp"].is_string());
    }
    c.api.node.remove("web.yaml");
    let killing = c.wait_event("web-edge-1", "Killing", "Stopping container main");
    assert_eq!(killing["involvedObject"]["fieldPath"], "spec.containers{main}");
}

#[needs(pods)]
#[test]
fn a_crash_loop_is_one_back_off_event_with_a_count() {
    let c = Cluster::start();
    c.api.node.put("crash.yaml", &manifest("crash", "exit 1"));
    let backoff = |e: &Value| e["reason"] == "BackOff";
    eventually("a BackOff event counted at least twice", LONG, || {
        c.events("crash-edge-1")
            .iter()
            .filter(|e| backoff(e))
            .any(|e| e["count"].as_i64() >= Some(2))
    });
    let events = c.events("crash-edge-1");
    let backoffs: Vec<&Value> = events.iter().filter(|e| backoff(e)).collect();
    assert_eq!(backoffs.len(), 1, "repeats are one Event object: {backoffs:#?}");
    let event = backoffs[0];
    assert_eq!(event["type"], "Warning");
    let message = event["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("Back-off restarting failed container main in pod crash-edge-1_default("),
        "{message}"
    );
    assert_ne!(event["firstTimestamp"], Value::Null);
    // Started is recorded at each restart: one Event with a count, too.
    let started = events.iter().filter(|e| e["reason"] == "Started").count();
    assert_eq!(started, 1, "{events:#?}");
}

#[needs(pods)]
#[test]
fn a_rejected_manifest_is_failed_validation_on_the_node() {
    let c = Cluster::start();
    // S1: no metadata.name.
    c.api.node.put("bad.yaml", "apiVersion: v1\nkind: Pod\nspec:\n  containers: []\n");
    eventually("a FailedValidation event", LONG, || {
        c.api.server.list("events", None).unwrap().iter().any(|e| e["reason"] == "FailedValidation")
    });
    let events = c.api.server.list("events", Some("default")).unwrap();
    let event = events.iter().find(|e| e["reason"] == "FailedValidation").unwrap();
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["involvedObject"]["kind"], "Node");
    assert_eq!(event["involvedObject"]["name"], "edge-1");
    assert_eq!(event["involvedObject"]["uid"], "edge-1");
    let message = event["message"].as_str().unwrap();
    assert!(message.contains("bad.yaml"), "names the file: {message}");
    assert!(message.contains("name"), "names the error: {message}");
}

#[needs(pods)]
#[test]
fn events_recorded_offline_arrive_after_the_reconnect() {
    let c = Cluster::start();
    c.api.node.put("first.yaml", &manifest("first", SERVE));
    c.wait_event("first-edge-1", "Started", "Started container main");
    c.api.rt.block_on(c.api.server.cut());
    c.api.node.put("second.yaml", &manifest("second", SERVE));
    c.running("second-edge-1");
    c.api.node.remove("first.yaml");
    eventually("the first pod is gone", LONG, || {
        outpost_tests::pods::pod(&c.agent, "first-edge-1").is_none()
    });
    assert!(c.events("second-edge-1").is_empty(), "nothing is written while offline");
    c.api.rt.block_on(c.api.server.restore()).unwrap();
    // Nothing lost below the bound: every event of the offline period arrives.
    for reason in ["Pulled", "Created", "Started"] {
        c.wait_event("second-edge-1", reason, "");
    }
    c.wait_event("first-edge-1", "Killing", "Stopping container main");
}

/// `outpost_events_dropped_total` in a `/metrics` answer.
fn dropped(metrics: &str) -> u64 {
    let line = metrics.lines().find_map(|l| l.strip_prefix("outpost_events_dropped_total "));
    line.and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// Cuts the API server off and starts the pod `pair` (containers a and b) meanwhile.
fn pair_started_while_away(c: &Cluster) {
    c.api.rt.block_on(c.api.server.cut());
    c.api.node.put("pair.yaml", &pair("pair"));
    wait_pod(&c.agent, "pair-edge-1", LONG, |p| {
        let statuses = p["status"]["containerStatuses"].as_array().cloned().unwrap_or_default();
        statuses.len() == 2 && statuses.iter().all(|s| s["state"]["running"].is_object())
    });
}

#[needs(pods)]
#[test]
fn what_happened_while_away_is_one_event_per_pod_and_reason() {
    let c = Cluster::start();
    pair_started_while_away(&c);
    c.api.rt.block_on(c.api.server.restore()).unwrap();
    // Both containers were created and started while away: one Event each per reason,
    // the newest (container b's).
    let started = c.wait_event("pair-edge-1", "Started", "Started container b");
    assert_eq!(started["involvedObject"]["fieldPath"], "spec.containers{b}");
    c.wait_event("pair-edge-1", "Created", "Created container: b");
    // One of each pair was left unwritten (containers a's Pulled, Created, Started).
    c.agent.poll("/metrics", |_, body| dropped(body) >= 3);
    let events = c.events("pair-edge-1");
    for reason in ["Pulled", "Created", "Started"] {
        let of_reason: Vec<&Value> = events.iter().filter(|e| e["reason"] == reason).collect();
        assert_eq!(of_reason.len(), 1, "one {reason} Event for the pod: {of_reason:#?}");
    }
}

#[needs(pods)]
#[test]
fn an_event_refused_for_load_is_dropped_not_retried() {
    let c = Cluster::start();
    // The node's first Event write gets a 429 with `Retry-After: 1`.
    let refusal = outpost_tests::apiserver::Fault::too_many_requests();
    c.api.server.fail_next(1, "create", "events", refusal);
    c.api.node.put("web.yaml", &manifest("web", SERVE));
    c.running("web-edge-1");
    c.wait_event("web-edge-1", "Started", "Started container main");
    c.agent.poll("/metrics", |_, body| dropped(body) == 1);
    assert_eq!(c.api.server.faults_remaining(), 0);
    // Every create but the refused one made an Event: the refused one was not sent again.
    let events = c.api.server.list("events", None).unwrap();
    let created = c.api.server.count("create", "events");
    assert_eq!(created, events.len() as u64 + 1, "{events:#?}");
}

/// O3, B13: the first Event the server refuses for load after a reconnect takes the
/// `Normal` Events of what happened while away with it; what happens after is written.
#[needs(pods)]
#[test]
fn o3_the_first_refusal_after_a_reconnect_sheds_the_normal_events_of_while_away() {
    let c = Cluster::start();
    pair_started_while_away(&c);
    let refusal = outpost_tests::apiserver::Fault::too_many_requests();
    c.api.server.fail_next(1, "create", "events", refusal);
    c.api.rt.block_on(c.api.server.restore()).unwrap();
    // Lost: three collapsed (container a's), the refused one and at least two shed.
    c.agent.poll("/metrics", |_, body| dropped(body) >= 6);
    assert_eq!(c.api.server.faults_remaining(), 0);
    // Written in order: once a pod started after the refusal has its Event, nothing of
    // while away is still waiting.
    c.api.node.put("web.yaml", &manifest("web", SERVE));
    c.running("web-edge-1");
    c.wait_event("web-edge-1", "Started", "Started container main");
    let events = c.events("pair-edge-1");
    let normal: Vec<&Value> = events.iter().filter(|e| e["type"] == "Normal").collect();
    assert!(normal.is_empty(), "shed with the refused one: {normal:#?}");
}
