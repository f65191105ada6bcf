//! Mirror pods end to end (R1–R5, M11): the real agent runs static pods on its own test
//! node and keeps their mirrors in the in-repo test API server.
//!
//! The tests create the Node object before the agent starts, so they know the UID the
//! mirrors' owner reference must carry; the agent adopts that Node and learns its UID.

use outpost_tests::needs;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use outpost_tests::agent::Agent;
use outpost_tests::apiserver::Patch;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::eventually;
use serde_json::json;

const LONG: Duration = Duration::from_secs(60);
const NODE: &str = "edge-1";
const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";
const CONFIG_HASH: &str = "kubernetes.io/config.hash";

/// A test node, a test API server with the Node object in it, and a kubeconfig.
struct Cluster {
    api: ApiNode,
    node_uid: String,
}

impl Cluster {
    fn start() -> Cluster {
        let api = ApiNode::new();
        let mut object = KubeNode::default();
        object.metadata.name = Some(NODE.into());
        let node_uid = api.server.create_typed(&object).unwrap().metadata.uid.unwrap();
        Cluster { api, node_uid }
    }

    fn agent(&self) -> Agent {
        self.api.start(&[])
    }

    fn mirror(&self, name: &str) -> Option<Pod> {
        self.api.server.get_pod("default", name).ok()
    }

    /// Waits for the mirror `name` to satisfy `done`; returns it.
    fn wait_mirror(&self, name: &str, what: &str, done: impl Fn(&Pod) -> bool) -> Pod {
        eventually(what, LONG, || self.mirror(name).is_some_and(|p| done(&p)));
        self.mirror(name).unwrap()
    }

    fn wait_gone(&self, name: &str, what: &str) {
        eventually(what, LONG, || self.mirror(name).is_none());
    }

    fn patch(&self, name: &str, patch: serde_json::Value) {
        self.api.server.patch("pods", Some("default"), name, &Patch::Merge(patch), false).unwrap();
    }

    fn creates_and_deletes(&self) -> (u64, u64) {
        (self.api.server.count("create", "pods"), self.api.server.count("delete", "pods"))
    }

    fn wait_watch(&self) {
        self.api.rt.block_on(async {
            tokio::time::timeout(LONG, self.api.server.wait_for_watchers("pods", 1)).await.unwrap();
        });
    }
}

fn manifest(name: &str, label: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    app: {label}\nspec:\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"trap 'exit 0' TERM; while true; do sleep 0.1; done\"]\n"
    )
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// R1, R2, R5 and R3 on one static pod: created as a copy owned by the Node; restored
/// after an edit; recreated after a delete (at once or graceful); deleted with its
/// static pod.
#[needs(pods)]
#[test]
fn r1_r2_r3_r5_a_static_pod_keeps_exactly_its_mirror() {
    let c = Cluster::start();
    c.api.node.put("web.yaml", &manifest("web", "web"));
    let _agent = c.agent();
    let m = c.wait_mirror("web-edge-1", "R1: the mirror pod is created", |_| true);
    // R1: a copy with config.mirror = config.hash, controlled by the Node.
    let hash = annotation(&m, CONFIG_HASH).expect("config.hash copied").to_owned();
    assert_eq!(annotation(&m, CONFIG_MIRROR), Some(hash.as_str()));
    assert_eq!(annotation(&m, "kubernetes.io/config.source"), Some("file"));
    assert!(annotation(&m, "kubernetes.io/config.seen").is_some());
    assert_eq!(label(&m, "app"), Some("web"));
    let spec = m.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(NODE));
    assert_eq!(spec.containers[0].image.as_deref(), Some(BUSYBOX_IMAGE));
    let owners = m.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!((owners[0].kind.as_str(), owners[0].name.as_str()), ("Node", NODE));
    assert_eq!(owners[0].uid, c.node_uid);
    assert_eq!(owners[0].controller, Some(true));
    assert_ne!(uid(&m), hash, "the server gives the mirror its own UID");

    // R5: a label edited through the API is restored.
    c.patch("web-edge-1", json!({"metadata": {"labels": {"app": "hijacked"}}}));
    let m = c
        .wait_mirror("web-edge-1", "R5: the label is restored", |p| label(p, "app") == Some("web"));
    // R2: a config.mirror that is not the static pod's hash: replaced.
    let before = uid(&m);
    c.patch("web-edge-1", json!({"metadata": {"annotations": {CONFIG_MIRROR: "0000"}}}));
    let m = c.wait_mirror("web-edge-1", "R2: the outdated mirror is replaced", |p| {
        uid(p) != before && annotation(p, CONFIG_MIRROR) == Some(hash.as_str())
    });
    // Deleted at once: recreated.
    let before = uid(&m);
    c.api.server.delete_pod("default", "web-edge-1").unwrap();
    let m = c.wait_mirror("web-edge-1", "a deleted mirror is recreated", |p| uid(p) != before);
    // R2: deleted gracefully (deletionTimestamp): deleted at once and recreated.
    let before = uid(&m);
    c.api.server.delete("pods", Some("default"), "web-edge-1", Some(30)).unwrap();
    c.wait_mirror("web-edge-1", "R2: a mirror being deleted is replaced", |p| {
        uid(p) != before && p.metadata.deletion_timestamp.is_none()
    });
    // R3: the static pod goes, its mirror goes.
    c.api.node.remove("web.yaml");
    c.wait_gone("web-edge-1", "R3: the mirror of a removed static pod is deleted");
}

/// R3: a mirror pod of no static pod is deleted; M11: of two files with one pod name,
/// only the winner (the first seen) has a mirror.
#[needs(pods)]
#[test]
fn r3_orphans_go_and_m11_only_the_winner_is_mirrored() {
    let c = Cluster::start();
    c.api.node.put("a.yaml", &manifest("web", "first"));
    let mut orphan = Pod::default();
    orphan.metadata.name = Some("ghost-edge-1".into());
    orphan.metadata.namespace = Some("default".into());
    orphan.metadata.annotations = Some([(CONFIG_MIRROR.to_owned(), "feed".to_owned())].into());
    orphan.spec = Some(k8s_openapi::api::core::v1::PodSpec {
        node_name: Some(NODE.into()),
        containers: vec![k8s_openapi::api::core::v1::Container {
            name: "main".into(),
            image: Some(BUSYBOX_IMAGE.into()),
            ..Default::default()
        }],
        ..Default::default()
    });
    c.api.server.create_pod(&orphan).unwrap();
    let agent = c.agent();
    c.wait_mirror("web-edge-1", "the winner's mirror is created", |p| {
        label(p, "app") == Some("first")
    });
    c.wait_gone("ghost-edge-1", "R3: the orphan mirror is deleted");
    c.api.node.put("b.yaml", &manifest("web", "second"));
    agent.wait_for_log("two pods with one name");
    // The loser never gets a mirror: the one mirror stays the winner's, untouched.
    let m = c.mirror("web-edge-1").unwrap();
    let creates = c.creates_and_deletes();
    // A window for a wrong create or delete (it can only let a bug pass, never fail).
    std::thread::sleep(Duration::from_secs(3));
    let after = c.mirror("web-edge-1").unwrap();
    assert_eq!(label(&after, "app"), Some("first"));
    assert_eq!(uid(&after), uid(&m));
    assert_eq!(c.creates_and_deletes(), creates);
    assert_eq!(c.api.server.pods().unwrap().len(), 1, "one mirror only");
}

/// K5: a pod of another node holds the mirror pod's name. The create is refused
/// (AlreadyExists), and the look at the pod that holds the name is refused too, as the
/// Node authorizer refuses a node any pod not bound to it: the agent takes it for a pod
/// that is not its mirror, leaves it alone, and says so.
#[needs(pods)]
#[test]
fn k5_a_name_held_by_another_node_s_pod_is_left_alone() {
    let c = Cluster::start();
    let mut other = Pod::default();
    other.metadata.name = Some("web-edge-1".into());
    other.metadata.namespace = Some("default".into());
    other.spec = Some(k8s_openapi::api::core::v1::PodSpec {
        node_name: Some("edge-2".into()),
        containers: vec![k8s_openapi::api::core::v1::Container {
            name: "main".into(),
            image: Some(BUSYBOX_IMAGE.into()),
            ..Default::default()
        }],
        ..Default::default()
    });
    let held = c.api.server.create_pod(&other).unwrap();
    c.api.node.put("web.yaml", &manifest("web", "web"));
    let agent = c.agent();
    agent.wait_for_log("another pod holds the static pod's name");
    let after = c.mirror("web-edge-1").unwrap();
    assert_eq!(uid(&after), uid(&held), "the other node's pod is left alone");
    assert_eq!(annotation(&after, CONFIG_MIRROR), None);
    assert_eq!(c.api.server.count("delete", "pods"), 0);
    // The only refusals: the node's look at a pod not bound to it.
    for refusal in c.api.server.take_refusals() {
        assert_eq!((refusal.verb.as_str(), refusal.resource.as_str()), ("get", "pods"));
        assert_eq!(refusal.object, "default/web-edge-1");
        assert!(refusal.message.contains("no relationship found"), "{refusal}");
    }
}

/// R4: an agent restarted while its mirror is up to date neither deletes nor creates.
#[needs(pods)]
#[test]
fn r4_a_restart_keeps_the_up_to_date_mirror() {
    let c = Cluster::start();
    c.api.node.put("web.yaml", &manifest("web", "web"));
    let agent = c.agent();
    let m = c.wait_mirror("web-edge-1", "the mirror is created", |_| true);
    agent.stop();
    let counts = c.creates_and_deletes();
    let agent = c.agent();
    c.wait_watch();
    agent.wait_for_log("mirror pods in sync mirrored=1");
    let after = c.mirror("web-edge-1").expect("the mirror is still there");
    assert_eq!(uid(&after), uid(&m), "R4: the same mirror");
    assert_eq!(c.creates_and_deletes(), counts, "R4: no create, no delete");
}
