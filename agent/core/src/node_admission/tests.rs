use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node as ApiNode, Pod, Taint};
use serde_json::{Value, json};

use super::*;

fn pod(name: &str, spec: Value) -> Pod {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "c", "image": "i"}]);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": spec,
    }))
    .unwrap()
}

fn requesting(name: &str, requests: Value) -> Pod {
    pod(
        name,
        json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": requests}}]}),
    )
}

fn node() -> Node {
    Node {
        name: "edge-1".into(),
        labels: BTreeMap::from([
            ("kubernetes.io/hostname".into(), "edge-1".into()),
            ("kubernetes.io/os".into(), "linux".into()),
            ("zone".into(), "north".into()),
            ("gen".into(), "5".into()),
        ]),
        taints: Vec::new(),
        allocatable: BTreeMap::from([
            ("cpu".into(), 2000),
            ("memory".into(), 4 << 30),
            ("ephemeral-storage".into(), 10 << 30),
            ("pods".into(), 110),
        ]),
    }
}

fn admitted(pod: Pod, source: Source) -> Admitted {
    Admitted { uid: pod.metadata.uid.clone().unwrap(), pod: Arc::new(pod), source }
}

fn api(pod: &Pod) -> Admitted {
    admitted(pod.clone(), Source::Api)
}

fn rejected(verdict: Verdict) -> (String, String) {
    match verdict {
        Verdict::Reject(r) => (r.reason, r.message),
        other => panic!("not rejected: {other:?}"),
    }
}

fn affinity(terms: Value) -> Pod {
    pod(
        "p",
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
    )
}

fn matches(terms: Value) -> bool {
    let n = node();
    required_matches(&affinity(terms), &n.name, &n.labels)
}

#[test]
fn k4_a_plain_pod_is_admitted() {
    assert_eq!(admit(&node(), &[], &pod("p", json!({})), Source::Api), Verdict::Admit);
}

#[test]
fn k4_node_name_of_another_node() {
    let p = pod("p", json!({"nodeName": "edge-2"}));
    let (reason, message) = rejected(admit(&node(), &[], &p, Source::Api));
    assert_eq!(reason, "NodeName");
    assert_eq!(message, "Predicate NodeName failed: node(s) didn't match the requested node name");
    assert_eq!(
        admit(&node(), &[], &pod("p", json!({"nodeName": "edge-1"})), Source::Api),
        Verdict::Admit
    );
    // kubelet sets a static pod's nodeName to its own.
    assert_eq!(admit(&node(), &[], &p, Source::File), Verdict::Admit);
}

fn with_port(name: &str, port: Value) -> Pod {
    pod(name, json!({"containers": [{"name": "c", "image": "i", "ports": [port]}]}))
}

#[test]
fn k4_host_ports_in_use() {
    let active = [api(&with_port("a", json!({"containerPort": 80, "hostPort": 8080})))];
    let p = with_port("p", json!({"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}));
    let (reason, message) = rejected(admit(&node(), &active, &p, Source::Api));
    assert_eq!(reason, "NodePorts");
    assert_eq!(
        message,
        "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
    );
    let fits =
        |port: Value| admit(&node(), &active, &with_port("p", port), Source::Api) == Verdict::Admit;
    assert!(fits(json!({"containerPort": 80, "hostPort": 8081})));
    assert!(fits(json!({"containerPort": 80, "hostPort": 8080, "protocol": "UDP"})));
    assert!(fits(json!({"containerPort": 8080})), "no host port");
    assert!(
        !fits(json!({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"})),
        "the other binds all"
    );
    let on_ip = [api(&with_port(
        "a",
        json!({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}),
    ))];
    let fits_ip =
        |port: Value| admit(&node(), &on_ip, &with_port("p", port), Source::Api) == Verdict::Admit;
    assert!(fits_ip(json!({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.2"})));
    assert!(!fits_ip(json!({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"})));
    assert!(!fits_ip(json!({"containerPort": 80, "hostPort": 8080})), "this one binds all");
}

fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint { key: key.into(), value: value.map(Into::into), effect: effect.into(), time_added: None }
}

#[test]
fn k4_untolerated_no_execute_taint() {
    let mut n = node();
    n.taints = vec![
        taint("edge", Some("true"), "NoSchedule"),
        taint("dedicated", Some("db"), "NoExecute"),
    ];
    let (reason, message) = rejected(admit(&n, &[], &pod("p", json!({})), Source::Api));
    assert_eq!(reason, "TaintToleration");
    assert_eq!(
        message,
        "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
    );
    // Not for static pods.
    assert_eq!(admit(&n, &[], &pod("p", json!({})), Source::File), Verdict::Admit);
    let tolerates = |tolerations: Value| {
        admit(&n, &[], &pod("p", json!({"tolerations": tolerations})), Source::Api)
            == Verdict::Admit
    };
    assert!(tolerates(json!([{"key": "dedicated", "value": "db", "effect": "NoExecute"}])));
    assert!(tolerates(json!([{"key": "dedicated", "operator": "Equal", "value": "db"}])));
    assert!(tolerates(json!([{"key": "dedicated", "operator": "Exists"}])));
    assert!(tolerates(json!([{"operator": "Exists"}])), "an empty key with Exists tolerates all");
    assert!(!tolerates(json!([{"key": "dedicated", "value": "web"}])));
    assert!(!tolerates(
        json!([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}])
    ));
    assert!(!tolerates(json!([{"key": "other", "operator": "Exists"}])));
    assert!(!tolerates(json!([{"key": "dedicated", "operator": "Gt", "value": "db"}])));
    // NoSchedule and PreferNoSchedule taints alone do not concern kubelet.
    n.taints.pop();
    assert_eq!(admit(&n, &[], &pod("p", json!({})), Source::Api), Verdict::Admit);
}

#[test]
fn k4_out_of_cpu_memory_storage_with_kubelets_message() {
    let (reason, message) =
        rejected(admit(&node(), &[], &requesting("p", json!({"cpu": "3"})), Source::Api));
    assert_eq!(reason, "OutOfcpu");
    assert_eq!(
        message,
        "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"
    );
    let first = api(&requesting("a", json!({"memory": "3Gi"})));
    let (reason, message) =
        rejected(admit(&node(), &[first], &requesting("p", json!({"memory": "2Gi"})), Source::Api));
    assert_eq!(reason, "OutOfmemory");
    assert_eq!(
        message,
        format!(
            "Node didn't have enough resource: memory, requested: {}, used: {}, capacity: {}",
            2u64 << 30,
            3u64 << 30,
            4u64 << 30
        )
    );
    let (reason, _) = rejected(admit(
        &node(),
        &[],
        &requesting("p", json!({"ephemeral-storage": "20Gi"})),
        Source::Api,
    ));
    assert_eq!(reason, "OutOfephemeral-storage");
    // Exactly what is left fits.
    let first = api(&requesting("a", json!({"cpu": "1500m"})));
    assert_eq!(
        admit(&node(), &[first], &requesting("p", json!({"cpu": "500m"})), Source::Api),
        Verdict::Admit
    );
}

#[test]
fn k4_the_first_shortage_is_reported_in_kubelets_order() {
    let p = requesting("p", json!({"cpu": "3", "memory": "8Gi"}));
    let (reason, _) = rejected(admit(&node(), &[], &p, Source::Api));
    assert_eq!(reason, "OutOfcpu");
    let mut n = node();
    n.allocatable.insert("pods".into(), 0);
    let (reason, message) = rejected(admit(&n, &[], &p, Source::Api));
    assert_eq!(reason, "OutOfpods");
    assert_eq!(
        message,
        "Node didn't have enough resource: pods, requested: 1, used: 0, capacity: 0"
    );
    // Resources come before affinity.
    let p = pod(
        "p",
        json!({"nodeSelector": {"zone": "south"}, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "3"}}}]}),
    );
    assert_eq!(rejected(admit(&node(), &[], &p, Source::Api)).0, "OutOfcpu");
}

#[test]
fn k4_max_pods_counts_every_pod() {
    let mut n = node();
    n.allocatable.insert("pods".into(), 2);
    let active = [api(&pod("a", json!({}))), api(&pod("b", json!({})))];
    assert_eq!(admit(&n, &active[..1], &pod("c", json!({})), Source::Api), Verdict::Admit);
    let (reason, message) = rejected(admit(&n, &active, &pod("c", json!({})), Source::Api));
    assert_eq!(reason, "OutOfpods");
    assert_eq!(
        message,
        "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
    );
}

#[test]
fn k4_pods_without_requests_request_nothing() {
    let full = api(&requesting("a", json!({"cpu": "2"})));
    assert_eq!(admit(&node(), &[full], &pod("p", json!({})), Source::Api), Verdict::Admit);
    // A limit stands for a missing request.
    let p = pod(
        "p",
        json!({"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "3"}}}]}),
    );
    assert_eq!(rejected(admit(&node(), &[], &p, Source::Api)).0, "OutOfcpu");
}

#[test]
fn k4_pod_requests_as_kubelets_pod_requests() {
    let p = pod(
        "p",
        json!({
            "initContainers": [
                {"name": "big-init", "image": "i", "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}},
                {"name": "sidecar", "image": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}},
                {"name": "late-init", "image": "i", "resources": {"requests": {"cpu": "900m"}}},
            ],
            "containers": [
                {"name": "a", "image": "i", "resources": {"requests": {"cpu": "300m", "memory": "50Mi"}}},
                {"name": "b", "image": "i", "resources": {"requests": {"cpu": "100m"}}},
            ],
            "overhead": {"cpu": "50m", "memory": "10Mi"},
        }),
    );
    let requests = pod_requests(&p);
    // cpu: max(1000, 200 + 900, 300 + 100 + 200) + 50.
    assert_eq!(requests["cpu"], 1150);
    // memory: max(100Mi, 50Mi) + 10Mi.
    assert_eq!(requests["memory"], 110 << 20);
}

#[test]
fn k4_extended_resources() {
    let mut n = node();
    let p = requesting("p", json!({"example.com/dongle": "2"}));
    // A resource the node does not have at all is a cluster-level one: not counted.
    assert_eq!(admit(&n, &[], &p, Source::Api), Verdict::Admit);
    n.allocatable.insert("example.com/dongle".into(), 1);
    let (reason, message) = rejected(admit(&n, &[], &p, Source::Api));
    assert_eq!(reason, "OutOfexample.com/dongle");
    assert_eq!(
        message,
        "Node didn't have enough resource: example.com/dongle, requested: 2, used: 0, capacity: 1"
    );
    n.allocatable.insert("example.com/dongle".into(), 3);
    let other = api(&requesting("a", json!({"example.com/dongle": "2"})));
    assert_eq!(rejected(admit(&n, &[other], &p, Source::Api)).0, "OutOfexample.com/dongle");
    // Hugepages are not extended resources: the node lacking them is short of them.
    let p = requesting("p", json!({"hugepages-2Mi": "4Mi", "memory": "4Mi"}));
    assert_eq!(rejected(admit(&n, &[], &p, Source::Api)).0, "OutOfhugepages-2Mi");
}

#[test]
fn k4_os_label_and_field() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"kubernetes.io/os": "windows"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }))
    .unwrap();
    let (reason, message) = rejected(admit(&node(), &[], &p, Source::Api));
    assert_eq!(reason, "PodOSSelectorNodeLabelDoesNotMatch");
    assert_eq!(
        message,
        "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
    );
    let p = pod("p", json!({"os": {"name": "windows"}}));
    assert_eq!(rejected(admit(&node(), &[], &p, Source::Api)).0, "PodOSNotSupported");
    assert_eq!(
        admit(&node(), &[], &pod("p", json!({"os": {"name": "linux"}})), Source::Api),
        Verdict::Admit
    );
}

#[test]
fn k4_rejection_status_message() {
    let r = Rejection { reason: "OutOfpods".into(), message: "m".into() };
    assert_eq!(r.status_message(), "Pod was rejected: m");
}

#[test]
fn k4_node_from_the_api() {
    let api: ApiNode = serde_json::from_value(json!({
        "metadata": {"name": "edge-1", "labels": {"zone": "north"}},
        "spec": {"taints": [{"key": "k", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "1500m", "memory": "2Gi", "pods": "12", "example.com/dongle": "3"}},
    }))
    .unwrap();
    let n = Node::from_api(&api);
    assert_eq!(n.name, "edge-1");
    assert_eq!(n.labels["zone"], "north");
    assert_eq!(n.taints.len(), 1);
    assert_eq!(n.allocatable["cpu"], 1500);
    assert_eq!(n.allocatable["memory"], 2 << 30);
    assert_eq!(n.allocatable["pods"], 12);
    assert_eq!(n.allocatable["example.com/dongle"], 3);
}

mod affinity;
mod preemption;
