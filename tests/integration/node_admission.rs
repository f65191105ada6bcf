//! End to end: kubelet's admission of pods on the node (SEMANTICS.md K4), through the
//! real binary, real pods and the test API server. A pod whose `nodeSelector` does not
//! match the node's labels, one asking for more cpu than the node has, one past
//! `--max-pods` and one that does not tolerate a `NoExecute` taint are `Failed` with
//! kubelet's reason and `Pod was rejected: <message>`, a Warning Event, and never run; a
//! pod whose required node affinity matches runs; a critical static pod preempts an API
//! pod when cpu is short; a label and a taint given to the Node on the server count as
//! soon as its watch tells them. (A pod bound to another node never reaches this node: the API
//! source watches `spec.nodeName=<this node>`, as kubelet; the `NodeName` check is unit
//! tested in `outpost_core::node_admission`.)

use outpost_tests::needs;

use outpost_tests::api_pods::{Cluster, LONG, NODE, SERVE, api_pod, phase};
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{eventually, wait_pod};
use serde_json::{Value, json};

/// What these tests do with a [`Cluster`] beyond the shared harness.
trait NodeAdmission {
    /// Waits until the pod is Failed; asserts kubelet's rejection: its reason, the
    /// status message, the Warning Event, and that no container ran.
    fn assert_rejected(&self, name: &str, reason: &str, message: &str);

    /// The Node as the API server has it, once the agent registered it.
    fn node(&self) -> Value;
}

impl NodeAdmission for Cluster {
    fn assert_rejected(&self, name: &str, reason: &str, message: &str) {
        let pod = self.wait(name, "rejected", |p| phase(p) == "Failed");
        let status = pod.status.clone().unwrap();
        assert_eq!(status.reason.as_deref(), Some(reason), "{status:?}");
        let said = status.message.unwrap_or_default();
        assert!(said.starts_with(&format!("Pod was rejected: {message}")), "{said}");
        assert!(
            status.container_statuses.unwrap_or_default().iter().all(|c| c.container_id.is_none())
        );
        eventually(&format!("pod {name}: the {reason} Event"), LONG, || {
            let events = self.api.server.list("events", Some("default")).unwrap();
            events.iter().any(|e| {
                e["involvedObject"]["name"] == name
                    && e["reason"] == reason
                    && e["type"] == "Warning"
                    && e["message"].as_str().is_some_and(|m| m.starts_with(message))
            })
        });
    }

    fn node(&self) -> Value {
        eventually("the Node is registered", LONG, || {
            self.api.server.get("nodes", None, NODE).is_ok()
        });
        self.api.server.get("nodes", None, NODE).unwrap()
    }
}

#[needs(pods)]
#[test]
fn k4_a_pod_whose_node_selector_does_not_match_is_rejected_and_a_matching_affinity_runs() {
    let c = Cluster::start();
    c.create_pod(api_pod("ssd-only", json!({}), json!({"nodeSelector": {"disk": "ssd"}})));
    c.assert_rejected(
        "ssd-only",
        "NodeAffinity",
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
    );
    let here = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["elsewhere"]}]},
            {"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]},
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            ]},
        ],
    }}});
    c.create_pod(api_pod("here", json!({}), json!({"affinity": here})));
    c.wait_running("here");
    let rejected = c.api.server.get_pod("default", "ssd-only").unwrap();
    assert_eq!(phase(&rejected), "Failed", "still rejected, never run");
}

#[needs(pods)]
#[test]
fn k4_a_pod_asking_for_more_cpu_than_allocatable_is_out_of_cpu() {
    let c = Cluster::start();
    let allocatable = c.node()["status"]["allocatable"]["cpu"].as_str().unwrap().to_owned();
    c.create_pod(api_pod("greedy", json!({"resources": {"requests": {"cpu": "1000"}}}), json!({})));
    c.assert_rejected(
        "greedy",
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 1000000, used: 0, capacity: ",
    );
    let message =
        c.api.server.get_pod("default", "greedy").unwrap().status.unwrap().message.unwrap();
    let capacity: u64 = message.rsplit(' ').next().unwrap().parse().unwrap();
    let cores: u64 = allocatable.trim_end_matches('m').parse().unwrap();
    let expected = if allocatable.ends_with('m') { cores } else { cores * 1000 };
    assert_eq!(capacity, expected, "the Node's allocatable cpu, in millicores");
}

#[needs(pods)]
#[test]
fn k4_max_pods_is_the_nodes_pod_capacity_and_a_pod_beyond_it_is_out_of_pods() {
    let c = Cluster::with(ApiNode::new(), &["--max-pods", "2"]);
    eventually("the Node reports pods: 2", LONG, || {
        c.node()["status"]["capacity"]["pods"] == "2"
            && c.node()["status"]["allocatable"]["pods"] == "2"
    });
    for name in ["one", "two"] {
        c.create_pod(api_pod(name, json!({}), json!({})));
        c.wait_running(name);
    }
    c.create_pod(api_pod("three", json!({}), json!({})));
    c.assert_rejected(
        "three",
        "OutOfpods",
        "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2",
    );
}

#[needs(pods)]
#[test]
fn k4_a_no_execute_taint_the_pod_does_not_tolerate_rejects_it() {
    let c = Cluster::with(ApiNode::new(), &["--register-with-taints", "dedicated=db:NoExecute"]);
    c.create_pod(api_pod("web", json!({}), json!({})));
    c.assert_rejected(
        "web",
        "TaintToleration",
        "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
    );
    let tolerates =
        json!([{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoExecute"}]);
    c.create_pod(api_pod("db", json!({}), json!({"tolerations": tolerates})));
    c.wait_running("db");
}

/// K4: a label and a taint an administrator gives the Node on the server are what the
/// node admits against once its watch of the Node tells them (as kubelet's node
/// informer), not at its next status report.
#[needs(pods)]
#[test]
fn k4_labels_and_taints_given_to_the_node_on_the_server_are_admitted_against() {
    let c = Cluster::start();
    let mut node = c.node();
    node["metadata"]["labels"]["disk"] = json!("ssd");
    node["spec"]["taints"] =
        json!([{"key": "maintenance", "value": "true", "effect": "NoExecute"}]);
    c.server().update(node).unwrap();
    let agent = c.agent.as_ref().unwrap();
    agent.wait_for_log("maintenance=true:NoExecute");

    let tolerates = json!([{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]);
    let ssd = json!({"nodeSelector": {"disk": "ssd"}, "tolerations": tolerates});
    c.create_pod(api_pod("on-ssd", json!({}), ssd));
    c.wait_running("on-ssd");
    c.create_pod(api_pod("web", json!({}), json!({})));
    c.assert_rejected(
        "web",
        "TaintToleration",
        "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
    );
}

#[needs(pods)]
#[test]
fn k4_a_critical_static_pod_preempts_a_lower_priority_api_pod() {
    let c = Cluster::start();
    let allocatable = c.node()["status"]["allocatable"]["cpu"].as_str().unwrap().to_owned();
    let milli: u64 = match allocatable.strip_suffix('m') {
        Some(m) => m.parse().unwrap(),
        None => allocatable.parse::<u64>().unwrap() * 1000,
    };
    // The API pod takes all but 100m; the static pod asks for 500m.
    let low = api_pod(
        "low",
        json!({"resources": {"requests": {"cpu": format!("{}m", milli - 100)}}}),
        json!({}),
    );
    c.create_pod(low);
    c.wait_running("low");
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: critical\n  namespace: default\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, \"{SERVE}\"]\n    resources:\n      requests: {{cpu: 500m}}\n"
    );
    c.api.node.put("critical.yaml", &manifest);
    let agent = c.agent.as_ref().unwrap();
    let name = format!("critical-{NODE}");
    wait_pod(agent, &name, LONG, |p| p["status"]["phase"] == "Running");
    let low = c.wait("low", "preempted", |p| {
        phase(p) == "Failed"
            && p.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Preempting")
    });
    let status = low.status.unwrap();
    assert_eq!(status.message.as_deref(), Some("Preempted in order to admit critical pod"));
    let conditions = status.conditions.unwrap_or_default();
    let disruption = conditions.iter().find(|c| c.type_ == "DisruptionTarget").unwrap();
    assert_eq!(disruption.reason.as_deref(), Some("TerminationByKubelet"));
    assert_eq!(
        disruption.message.as_deref(),
        Some("Pod was preempted by Kubelet to accommodate a critical pod.")
    );
    eventually("the Preempting Event", LONG, || {
        let events = c.api.server.list("events", Some("default")).unwrap();
        events.iter().any(|e| e["involvedObject"]["name"] == "low" && e["reason"] == "Preempting")
    });
}
