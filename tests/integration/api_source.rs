//! The API server source through the real binary (`outpost run --dry-run --kubeconfig`)
//! against the in-repo test API server: pods bound to the node appear, change and go;
//! mirror pods are ignored (R6); broken watches, 410 and a server down at start never
//! remove pods; the checkpoint brings API pods back with no network (O1, O2, O4).

use outpost_tests::needs;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use outpost_tests::agent::Agent;
use outpost_tests::apiserver::{Patch, TestApiServer};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// The agent's node name as the harness passes it (`Edge-1`), lowercased.
const NODE: &str = "edge-1";

/// A test API server on its own runtime, and the files an agent needs to reach it.
pub struct Cluster {
    pub rt: Runtime,
    pub server: TestApiServer,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::start_with(|b| b)
    }

    pub fn start_with(
        config: impl FnOnce(outpost_tests::apiserver::Config) -> outpost_tests::apiserver::Config,
    ) -> Cluster {
        let rt = Runtime::new().unwrap();
        let server = rt.block_on(config(TestApiServer::builder()).start()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
        server.node_kubeconfig(dir.path(), "edge-1").unwrap();
        Cluster { rt, server, dir }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// `outpost run --dry-run --kubeconfig … --state-dir …` with an empty manifest dir.
    pub fn agent(&self) -> Agent {
        let kubeconfig = self.dir.path().join("node-kubeconfig");
        Agent::start_args(
            &self.dir.path().join("manifests"),
            &[
                "--kubeconfig".as_ref(),
                kubeconfig.as_os_str(),
                "--state-dir".as_ref(),
                self.state_dir().as_os_str(),
            ],
        )
    }

    pub fn create(&self, name: &str, node: &str) -> Pod {
        self.server.create_pod(&pod(name, node)).unwrap()
    }

    pub fn cut(&self) {
        self.rt.block_on(self.server.cut());
    }

    pub fn restore(&self) {
        self.rt.block_on(self.server.restore()).unwrap();
    }

    /// Waits until the agent watches pods.
    pub fn wait_for_watch(&self) {
        self.rt
            .block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(30),
                    self.server.wait_for_watchers("pods", 1),
                )
                .await
            })
            .expect("the agent never watched pods");
    }
}

pub fn pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default", "labels": { "app": name } },
        "spec": {
            "nodeName": node,
            "containers": [{ "name": "main", "image": "busybox:1" }],
        },
    }))
    .unwrap()
}

pub fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap()
}

/// Deltas until `n` have been read: (op, name, uid, source) each.
pub fn deltas(agent: &Agent, n: usize) -> Vec<(String, String, String, String)> {
    (0..n)
        .map(|_| {
            let d = agent.delta();
            let field = |k: &str| d[k].as_str().unwrap_or_default().to_owned();
            (field("op"), field("name"), field("uid"), field("source"))
        })
        .collect()
}

/// The ops of the next `n` deltas by pod name.
pub fn ops_by_name(agent: &Agent, n: usize) -> BTreeMap<String, String> {
    deltas(agent, n).into_iter().map(|(op, name, _, _)| (name, op)).collect()
}

/// No delta shows up for a while (a quiet period, not a timing assertion).
pub fn quiet(agent: &Agent) {
    if let Some(d) = agent.delta_within(Duration::from_millis(1500)) {
        panic!("unexpected delta: {d}");
    }
}

fn readyz_line(agent: &Agent, source: &str) -> String {
    let (_, body) = agent.get("/readyz?verbose");
    body.lines().find(|l| l.contains(&format!("source-{source} "))).unwrap_or_default().to_owned()
}

pub fn wait_readyz(agent: &Agent, source: &str, needle: &str) -> String {
    let (_, body) = agent.poll("/readyz?verbose", |_, body| {
        body.lines().any(|l| l.contains(&format!("source-{source} ")) && l.contains(needle))
    });
    body
}

fn checkpoint_path(state_dir: &Path) -> PathBuf {
    state_dir.join("checkpoints/api.json")
}

#[needs(pods)]
#[test]
fn pods_of_this_node_appear_change_and_go() {
    let cluster = Cluster::start();
    let web = cluster.create("web", NODE);
    cluster.create("elsewhere", "other-node");
    let agent = cluster.agent();
    let add = agent.delta();
    assert_eq!((add["op"].as_str(), add["name"].as_str()), (Some("ADD"), Some("web")), "{add}");
    assert_eq!(add["source"], "api");
    assert_eq!(add["uid"], uid(&web).as_str(), "API pods keep their UID");
    cluster.wait_for_watch();
    wait_readyz(&agent, "api", "live");

    // M4: a label change is an UPDATE.
    let mut changed = cluster.server.get_pod("default", "web").unwrap();
    changed.metadata.labels.get_or_insert_default().insert("tier".into(), "front".into());
    cluster.server.update(serde_json::to_value(&changed).unwrap()).unwrap();
    assert_eq!(deltas(&agent, 1)[0].0, "UPDATE");

    // M5: a status-only change is a RECONCILE.
    let patch = Patch::Merge(json!({ "status": { "message": "hello" } }));
    cluster.server.patch("pods", Some("default"), "web", &patch, true).unwrap();
    assert_eq!(deltas(&agent, 1)[0].0, "RECONCILE");

    // A new pod for this node is an ADD; one for another node is nothing.
    cluster.create("db", NODE);
    cluster.create("cache", "other-node");
    assert_eq!(deltas(&agent, 1)[0].1, "db");

    // R6: a mirror pod bound to this node is never a desired pod.
    let mut mirror = pod("mirror", NODE);
    mirror
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("kubernetes.io/config.mirror".into(), "abc".into());
    cluster.server.create_pod(&mirror).unwrap();

    // A graceful delete is a DELETE (deletionTimestamp set); the final delete a REMOVE.
    cluster.server.delete("pods", Some("default"), "web", Some(30)).unwrap();
    let (op, name, ..) = deltas(&agent, 1).remove(0);
    assert_eq!((op.as_str(), name.as_str()), ("DELETE", "web"));
    cluster.server.delete_pod("default", "web").unwrap();
    let (op, name, ..) = deltas(&agent, 1).remove(0);
    assert_eq!((op.as_str(), name.as_str()), ("REMOVE", "web"));
    quiet(&agent);
    let (_, pods) = agent.get("/pods");
    let pods: Value = serde_json::from_str(&pods).unwrap();
    let names: Vec<_> =
        pods["items"].as_array().unwrap().iter().map(|p| p["metadata"]["name"].clone()).collect();
    assert_eq!(names, [json!("db")]);
    assert_eq!(pods["items"][0]["metadata"]["annotations"]["kubernetes.io/config.source"], "api");
}

#[needs(pods)]
#[test]
fn a_broken_watch_resumes_and_removes_nothing() {
    let cluster = Cluster::start();
    cluster.create("web", NODE);
    let agent = cluster.agent();
    assert_eq!(deltas(&agent, 1)[0].0, "ADD");
    cluster.wait_for_watch();
    let lists = cluster.server.count("list", "pods");

    cluster.cut();
    wait_readyz(&agent, "api", "failing");
    let (status, _) = agent.get("/readyz?verbose");
    assert_eq!(status, 200, "a source that was seen stays seen while unreachable");
    quiet(&agent);

    cluster.restore();
    cluster.wait_for_watch();
    // The re-established watch clears the failure (the state stayed `live` throughout).
    agent.poll("/readyz?verbose", |_, body| {
        body.lines().any(|l| l.contains("source-api ok: live") && !l.contains("failing"))
    });
    cluster.create("db", NODE);
    assert_eq!(deltas(&agent, 1)[0].1, "db", "the watch goes on after the cut");
    assert_eq!(
        cluster.server.count("list", "pods"),
        lists,
        "a broken watch resumes from its resourceVersion, without a new list"
    );
}

#[needs(pods)]
#[test]
fn a_410_relists_and_the_fresh_list_replaces_the_old_set() {
    let cluster = Cluster::start();
    let web = cluster.create("web", NODE);
    cluster.create("db", NODE);
    let agent = cluster.agent();
    ops_by_name(&agent, 2);
    cluster.wait_for_watch();

    cluster.cut();
    cluster.server.delete_pod("default", "web").unwrap();
    cluster.create("cache", NODE);
    cluster.server.compact();
    let lists = cluster.server.count("list", "pods");
    cluster.restore();

    let ops = ops_by_name(&agent, 2);
    assert_eq!(ops.get("web").map(String::as_str), Some("REMOVE"), "{ops:?}");
    assert_eq!(ops.get("cache").map(String::as_str), Some("ADD"), "{ops:?}");
    assert!(cluster.server.count("list", "pods") > lists, "410 → a new list");
    quiet(&agent);
    let _ = web;
}

#[needs(pods)]
#[test]
fn a_server_down_at_start_holds_readiness_until_it_answers() {
    let cluster = Cluster::start_with(|b| b.down());
    cluster.create("web", NODE);
    let agent = cluster.agent();
    // The reason is shown beside the state.
    let body = wait_readyz(&agent, "api", "failing");
    assert!(readyz_line(&agent, "api").contains("never seen"), "{body}");
    let (status, _) = agent.get("/readyz?verbose");
    assert_eq!(status, 503, "M9: not ready before the API source's first SET");

    cluster.restore();
    let (op, name, ..) = deltas(&agent, 1).remove(0);
    assert_eq!((op.as_str(), name.as_str()), ("ADD", "web"));
    agent.poll("/readyz?verbose", |status, _| status == 200);
}

#[needs(pods)]
#[test]
fn o2_api_pods_come_back_from_the_checkpoint_with_no_network() {
    let cluster = Cluster::start();
    let web = cluster.create("web", NODE);
    let db = cluster.create("db", NODE);
    let agent = cluster.agent();
    ops_by_name(&agent, 2);
    cluster.wait_for_watch();
    // O1: the checkpoint is on disk before the pods are acted on.
    assert!(checkpoint_path(&cluster.state_dir()).is_file());
    agent.stop();

    // Reboot with no network.
    cluster.cut();
    let agent = cluster.agent();
    let mut back = deltas(&agent, 2);
    back.sort();
    let mut want = vec![
        ("ADD".to_owned(), "db".to_owned(), uid(&db), "api".to_owned()),
        ("ADD".to_owned(), "web".to_owned(), uid(&web), "api".to_owned()),
    ];
    want.sort();
    assert_eq!(back, want, "O2: same pods, same UIDs, from the checkpoint");
    let body = wait_readyz(&agent, "api", "from checkpoint");
    let (status, _) = agent.get("/readyz?verbose");
    assert_eq!(status, 200, "a replayed checkpoint counts as seen (M9): {body}");
    quiet(&agent);

    // O4: the API server comes back without `web` → only `web` stops, and only now.
    cluster.server.delete_pod("default", "web").unwrap();
    cluster.restore();
    let (op, name, ..) = deltas(&agent, 1).remove(0);
    assert_eq!((op.as_str(), name.as_str()), ("REMOVE", "web"));
    wait_readyz(&agent, "api", "live");
    quiet(&agent);
}

#[needs(pods)]
#[test]
fn a_corrupt_checkpoint_is_reported_and_ignored() {
    let cluster = Cluster::start();
    cluster.create("web", NODE);
    let path = checkpoint_path(&cluster.state_dir());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"outpost-checkpoint v1 len=3 xxh3=00\n{}").unwrap();
    cluster.cut();

    let agent = cluster.agent();
    let line = agent.wait_for_log("corrupt");
    assert!(line.contains("api.json"), "the report names the file: {line}");
    // The log line comes first; the failure reaches readiness a moment later.
    let (_, body) = agent.poll("/readyz?verbose", |_, body| {
        body.contains("never seen") && (body.contains("corrupt") || body.contains("failing"))
    });
    assert!(body.contains("source-api"), "{body}");

    cluster.restore();
    assert_eq!(deltas(&agent, 1)[0].1, "web");
    agent.poll("/readyz?verbose", |status, _| status == 200);
    // The next good list rewrote the checkpoint.
    let text = std::fs::read(&path).unwrap();
    assert!(text.starts_with(b"outpost-checkpoint v1 len=") && text.len() > 100);
}

#[needs(pods)]
#[test]
fn tls_and_a_bearer_token_from_the_kubeconfig() {
    let cluster = Cluster::start_with(|b| b.tls().token("s3cret-token"));
    cluster.create("web", NODE);
    let agent = cluster.agent();
    let (op, name, ..) = deltas(&agent, 1).remove(0);
    assert_eq!((op.as_str(), name.as_str()), ("ADD", "web"));
    assert!(cluster.server.count("list", "pods") >= 1);
}
