//! B13's kubelet-shaped client model against the test API server, without timings:
//! three model nodes register, hold their Leases, run API pods, restart a container on
//! demand, delete a pod the cluster deletes, and come back from an API server restart
//! (the network cut, the watch history gone) with kubelet's requests: re-LISTs, the
//! Lease read back and renewed, the node status checked in the informer's cache (not
//! re-sent), and the pod status the outage kept pending written with its GET.

use std::time::Duration;

use serde_json::{Value, json};

use super::KubeletModel;
use crate::apiserver::TestApiServer;
use crate::fleet::scenario::api_pod;
use crate::fleet::{Nodes, node_name};

/// How long a step that should happen within a few periods may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(90);

/// Waits until `check` holds (a hang fails the test).
async fn until(what: &str, check: impl FnMut() -> bool) {
    crate::fleet::until(what, PATIENCE, check).await;
}

fn condition(object: &Value, kind: &str) -> Option<String> {
    let conditions = object.pointer("/status/conditions")?.as_array()?;
    let found = conditions.iter().find(|c| c["type"] == kind)?;
    found["status"].as_str().map(str::to_owned)
}

/// The harness's "synced" check: the container running with `restarts` restarts, the
/// pod Ready.
fn synced(server: &TestApiServer, pod: &str, restarts: u64) -> bool {
    let Ok(pod) = server.get("pods", Some("default"), pod) else { return false };
    let Some(status) = pod.pointer("/status/containerStatuses/0") else { return false };
    status["restartCount"] == restarts
        && status.pointer("/state/running/startedAt").is_some()
        && status["ready"] == true
        && status["started"] == true
        && condition(&pod, "Ready").as_deref() == Some("True")
        && pod.pointer("/status/phase") == Some(&json!("Running"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b13_kubelet_model_registers_runs_pods_restarts_and_relists_after_a_restart() {
    let server = TestApiServer::start().await.unwrap();
    let model = KubeletModel::start(&server, 3).unwrap();
    assert_eq!(model.names(), [node_name(1), node_name(2), node_name(3)]);
    for index in 1..=3 {
        let name = node_name(index);
        until(&format!("{name} Ready"), || {
            server
                .get("nodes", None, &name)
                .is_ok_and(|n| condition(&n, "Ready").as_deref() == Some("True"))
        })
        .await;
        until(&format!("{name}'s Lease, owned by its Node"), || {
            server.get("leases", Some("kube-node-lease"), &name).is_ok_and(|lease| {
                lease.pointer("/spec/holderIdentity") == Some(&json!(name))
                    && lease.pointer("/metadata/ownerReferences/0/name") == Some(&json!(name))
            })
        })
        .await;
        server.create(api_pod(&format!("web-{index}"), &name)).unwrap();
    }
    for index in 1..=3 {
        let pod = format!("web-{index}");
        until(&format!("{pod} running"), || synced(&server, &pod, 0)).await;
    }
    // Three informers per node: its pods, its Node, every Service.
    for resource in ["pods", "nodes", "services"] {
        let watchers = || server.watchers(resource);
        until(&format!("3 {resource} watches"), || watchers() >= 3).await;
    }

    // A restart on demand: the status shows the exit, then the container running again.
    assert!(model.exit(1, "default", "web-2", "main", 1));
    assert!(!model.exit(1, "default", "web-1", "main", 1), "web-1 is not on node 2");
    until("web-2 restarted", || synced(&server, "web-2", 1)).await;
    let web2 = server.get("pods", Some("default"), "web-2").unwrap();
    assert_eq!(
        web2.pointer("/status/containerStatuses/0/lastState/terminated/exitCode"),
        Some(&json!(1))
    );
    assert_eq!(
        server.get("pods", Some("default"), "web-1").unwrap()["status"]["containerStatuses"][0]["restartCount"],
        0
    );

    // The cluster deletes web-3: its node kills it, writes the final status and removes it.
    server.delete("pods", Some("default"), "web-3", Some(30)).unwrap();
    until("web-3 gone", || server.get("pods", Some("default"), "web-3").is_err()).await;

    // An API server restart: the network cut for longer than a Lease period, a
    // container exits meanwhile, the cluster moves on (a write) and the watch history
    // is gone when the server comes back.
    server.reset_requests();
    server.cut().await;
    assert!(model.exit(0, "default", "web-1", "main", 2));
    tokio::time::sleep(Duration::from_secs(12)).await;
    let moved_on = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "written-during-the-outage", "namespace": "default" },
    });
    server.create(moved_on).unwrap();
    server.compact();
    server.restore().await.unwrap();
    until("web-1's exit written after the restore", || synced(&server, "web-1", 1)).await;
    let web1 = server.get("pods", Some("default"), "web-1").unwrap();
    assert_eq!(
        web1.pointer("/status/containerStatuses/0/lastState/terminated/exitCode"),
        Some(&json!(2))
    );
    for resource in ["pods", "nodes", "services"] {
        let watchers = || server.watchers(resource);
        until(&format!("3 {resource} watches again"), || watchers() >= 3).await;
        // Each node's reflector found its resourceVersion gone (410) and listed again.
        assert!(server.count("list", resource) >= 3, "{resource} lists: {:?}", server.requests());
    }
    for index in 1..=3 {
        let name = node_name(index);
        let lease = format!("kube-node-lease/{name}");
        until(&format!("{name}'s Lease read back and renewed"), || {
            server.count_object("get", "leases", &lease) >= 1
                && server.count_object("update", "leases", &lease) >= 1
        })
        .await;
        assert_eq!(server.count_object("patch", "nodes/status", &name), 0, "{name}");
    }
    // The pending status was written as kubelet writes: a GET of the pod, then its PATCH.
    assert!(server.count_object("get", "pods", "default/web-1") >= 1);
    assert!(server.count_object("patch", "pods/status", "default/web-1") >= 1);
    assert_eq!(
        server.count_object("patch", "pods/status", "default/web-2"),
        0,
        "{:?}",
        server.requests()
    );

    assert_eq!(model.ended(), None);
    let stopped = Box::new(model).stop().await;
    assert!(stopped.iter().all(Result::is_ok), "{stopped:?}");
}
