//! B13's hollow nodes, end to end without containers: the real agent code on the
//! simulated runtime registers its Node, takes its Lease, runs its API pods and restarts
//! a container that exits on demand.

use std::time::Duration;

use serde_json::{Value, json};

use super::scenario::api_pod;
use super::{Fleet, node_name};
use crate::apiserver::TestApiServer;

/// How long a step that should happen at once may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `check` holds (a hang fails the test).
async fn until(what: &str, check: impl FnMut() -> bool) {
    crate::fleet::until(what, PATIENCE, check).await;
}

fn ready(node: &Value) -> bool {
    node.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|conditions| {
        conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn container_status(server: &TestApiServer, pod: &str) -> Option<Value> {
    let pod = server.get("pods", Some("default"), pod).ok()?;
    pod.pointer("/status/containerStatuses/0").cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b13_hollow_nodes_register_run_api_pods_and_restart_on_demand() {
    let server = TestApiServer::start().await.unwrap();
    let fleet = Fleet::start(&server, 3, "warn").await.unwrap();
    for index in 1..=3 {
        let name = node_name(index);
        until(&format!("{name} Ready"), || {
            server.get("nodes", None, &name).is_ok_and(|node| ready(&node))
        })
        .await;
        until(&format!("{name}'s Lease"), || {
            server.get("leases", Some("kube-node-lease"), &name).is_ok()
        })
        .await;
        server.create(api_pod(&format!("web-{index}"), &name)).unwrap();
    }
    for index in 1..=3 {
        let pod = format!("web-{index}");
        until(&format!("{pod} running"), || {
            container_status(&server, &pod).is_some_and(|s| s["ready"] == true)
        })
        .await;
    }
    // Each node watches its own pods; the objects and Services watches are the agent's.
    assert!(server.watchers("pods") >= 3, "pods watches: {}", server.watchers("pods"));

    // A restart on demand: the container of web-2 exits 1, and its node restarts it.
    assert!(fleet.nodes[1].exit("default", "web-2", "main", 1));
    until("web-2 restarted", || {
        container_status(&server, "web-2").is_some_and(|s| {
            s["restartCount"] == 1
                && s.pointer("/lastState/terminated/exitCode") == Some(&json!(1))
                && s["ready"] == true
        })
    })
    .await;
    assert_eq!(container_status(&server, "web-1").unwrap()["restartCount"], 0);
    assert!(fleet.nodes.iter().all(|node| !node.has_ended()));
    let stopped = fleet.stop().await;
    assert!(stopped.iter().all(Result::is_ok), "{stopped:?}");
}
