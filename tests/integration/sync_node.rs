//! Node registration, node status and the node Lease, through
//! the real agent running pods on a test node against the in-repo test API server:
//! the Node is registered with kubelet's labels, taints, addresses, capacity, nodeInfo
//! and conditions; its status is not re-sent when nothing changed; an existing Node is
//! adopted and a deleted one registered again; the Lease is renewed, stops while the
//! server is cut off and is renewed again once it is back (O3).

use outpost_tests::needs;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use outpost_tests::agent::Agent;
use outpost_tests::pods;
use outpost_tests::relay::Relay;
use serde_json::json;

use crate::api_source::Cluster;

/// The harness's `--node-name Edge-1`, lowercased by the agent.
const NODE: &str = "edge-1";
const LEASES: &str = "kube-node-lease";

/// The agent running pods on `node`, registered with `cluster`'s API server.
fn start(cluster: &Cluster, node: &pods::Node, extra: &[&str]) -> Agent {
    let mut args = node.args();
    args.push("--kubeconfig".into());
    args.push(cluster.dir.path().join("node-kubeconfig").into());
    args.extend(extra.iter().map(OsString::from));
    Agent::start_pods(&node.manifests(), &args)
}

/// Polls `check` until it returns something (a hang guard, not a timing assertion).
fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn node(cluster: &Cluster) -> Option<Node> {
    cluster.server.get_typed::<Node>(None, NODE).ok()
}

fn lease(cluster: &Cluster) -> Option<Lease> {
    cluster.server.get_typed::<Lease>(Some(LEASES), NODE).ok()
}

fn uid(node: &Node) -> String {
    node.metadata.uid.clone().unwrap_or_default()
}

fn renew_time(lease: &Lease) -> Option<Timestamp> {
    lease.spec.as_ref().and_then(|s| s.renew_time.as_ref()).map(|t| t.0)
}

/// The Node once it reports Ready with containerd's version.
fn ready_node(cluster: &Cluster) -> Node {
    wait_for("the Node to be Ready with containerd's version", || {
        let node = node(cluster)?;
        let status = node.status.as_ref()?;
        let version = &status.node_info.as_ref()?.container_runtime_version;
        let ready =
            status.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
        (ready && version.starts_with("containerd://")).then_some(node)
    })
}

#[needs(pods)]
#[test]
fn sync_node_registers_the_node_and_reports_only_changes() {
    let test_node = pods::Node::new();
    let cluster = Cluster::start();
    let _agent = start(
        &cluster,
        &test_node,
        &[
            "--node-labels",
            "role=edge,site=north",
            "--register-with-taints",
            "dedicated=edge:NoSchedule",
        ],
    );
    let node = ready_node(&cluster);

    let labels = node.metadata.labels.clone().unwrap_or_default();
    let arch = labels.get("kubernetes.io/arch").cloned().unwrap_or_default();
    assert!(["amd64", "arm64", "arm"].contains(&arch.as_str()), "Go's arch name: {arch}");
    for (key, value) in [
        ("role", "edge"),
        ("site", "north"),
        ("kubernetes.io/hostname", NODE),
        ("kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", &arch),
    ] {
        assert_eq!(labels.get(key).map(String::as_str), Some(value), "label {key}: {labels:?}");
    }
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    assert_eq!(taints.len(), 1, "{taints:?}");
    let taint = &taints[0];
    assert_eq!(
        (taint.key.as_str(), taint.value.as_deref(), taint.effect.as_str()),
        ("dedicated", Some("edge"), "NoSchedule")
    );

    let status = node.status.clone().unwrap_or_default();
    let addresses = status.addresses.clone().unwrap_or_default();
    assert!(addresses.iter().any(|a| a.type_ == "Hostname" && a.address == NODE), "{addresses:?}");
    // An API server proxies `kubectl exec` to the agent as WebSocket (KEP-4006).
    assert_eq!(status.declared_features.clone().unwrap_or_default(), ["ExtendWebSocketsToKubelet"]);
    let capacity = status.capacity.clone().unwrap_or_default();
    for resource in ["cpu", "memory", "pods", "ephemeral-storage"] {
        let quantity = capacity.get(resource).map(|q| q.0.clone()).unwrap_or_default();
        let number: u64 = quantity.trim_end_matches("Ki").parse().unwrap_or(0);
        assert!(number > 0, "capacity {resource} = {quantity:?}");
    }
    assert_eq!(capacity["pods"].0, "110");
    assert!(status.allocatable.as_ref().is_some_and(|a| a.contains_key("memory")));
    let info = status.node_info.clone().unwrap_or_default();
    assert_eq!(info.operating_system, "linux");
    assert_eq!(info.architecture, arch);
    assert!(
        info.kubelet_version.starts_with('v') && info.kubelet_version.contains("+outpost-"),
        "{}",
        info.kubelet_version
    );
    assert!(
        !info.boot_id.is_empty() && !info.kernel_version.is_empty() && !info.os_image.is_empty(),
        "{info:?}"
    );
    let conditions: Vec<(String, String)> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| (c.type_.clone(), c.reason.clone().unwrap_or_default()))
        .collect();
    let types: Vec<&str> = conditions.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]);
    assert!(conditions.iter().all(|(_, reason)| reason.starts_with("Kubelet")), "{conditions:?}");

    // Nothing changes on the machine: no status is sent over the next 10 s ticks.
    let reported = cluster.server.count("patch", "nodes/status");
    assert!((1..=3).contains(&reported), "registration, runtime up, its version: {reported}");
    std::thread::sleep(Duration::from_secs(15));
    assert_eq!(
        cluster.server.count("patch", "nodes/status"),
        reported,
        "{:?}",
        cluster.server.requests()
    );
    assert_eq!(cluster.server.count("create", "nodes"), 1);
}

#[needs(pods)]
#[test]
fn sync_node_adopts_an_existing_node_and_registers_a_deleted_one() {
    let test_node = pods::Node::new();
    let cluster = Cluster::start();
    let existing = cluster
        .server
        .create(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": NODE,
                "labels": { "kubernetes.io/arch": "sparc", "owner": "ops" },
            },
        }))
        .unwrap();
    let existing_uid = existing["metadata"]["uid"].as_str().unwrap().to_owned();
    let _agent = start(&cluster, &test_node, &[]);

    let adopted = ready_node(&cluster);
    assert_eq!(uid(&adopted), existing_uid, "the existing Node is kept");
    let labels = adopted.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("owner").map(String::as_str), Some("ops"), "other labels are kept");
    assert_ne!(
        labels.get("kubernetes.io/arch").map(String::as_str),
        Some("sparc"),
        "well-known labels are set right"
    );
    assert_eq!(labels.get("kubernetes.io/hostname").map(String::as_str), Some(NODE));
    wait_for("the Lease to be owned by the adopted Node", || {
        let owners = lease(&cluster)?.metadata.owner_references?;
        owners.iter().any(|o| o.kind == "Node" && o.uid == existing_uid).then_some(())
    });

    // Deleted behind the agent's back: its next status write (once back from a time
    // offline) finds it gone and registers it again.
    cluster.server.delete("nodes", None, NODE, None).unwrap();
    cluster.cut();
    std::thread::sleep(Duration::from_secs(2));
    cluster.restore();
    let registered = wait_for("the Node to be registered again", || {
        node(&cluster).filter(|n| uid(n) != existing_uid)
    });
    let new_uid = uid(&registered);
    wait_for("the Lease to be owned by the new Node", || {
        let owners = lease(&cluster)?.metadata.owner_references?;
        owners.iter().any(|o| o.kind == "Node" && o.uid == new_uid).then_some(())
    });
}

#[needs(pods)]
#[test]
fn sync_node_lease_is_renewed_stops_offline_and_resumes_when_back() {
    let test_node = pods::Node::new();
    let cluster = Cluster::start();
    let _agent = start(&cluster, &test_node, &[]);

    let node_uid = uid(&ready_node(&cluster));
    let first = wait_for("the Lease with its ownerReference", || {
        let lease = lease(&cluster)?;
        let owners = lease.metadata.owner_references.clone()?;
        owners
            .iter()
            .any(|o| {
                o.api_version == "v1" && o.kind == "Node" && o.name == NODE && o.uid == node_uid
            })
            .then_some(lease)
    });
    let spec = first.spec.clone().unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some(NODE));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let renewed = wait_for("a renewal", || {
        let lease = lease(&cluster)?;
        (renew_time(&lease) > renew_time(&first)).then_some(lease)
    });
    assert!(
        cluster.server.count("update", "leases") >= 1,
        "renewed by update: {:?}",
        cluster.server.requests()
    );

    cluster.cut();
    let offline = renew_time(&lease(&cluster).unwrap());
    std::thread::sleep(Duration::from_secs(12));
    assert_eq!(renew_time(&lease(&cluster).unwrap()), offline, "not renewed while cut off");
    assert!(offline >= renew_time(&renewed));

    let back = Instant::now();
    cluster.restore();
    wait_for("a renewal once the server is back", || {
        (renew_time(&lease(&cluster)?) > offline).then_some(())
    });
    eprintln!("renewed {:?} after the server came back", back.elapsed());
}

/// K5: a label NodeRestriction would refuse on the Node stops the agent at start, with
/// kubelet's message, before it asks the API server anything (kubelet refuses it the
/// same way), instead of a registration refused over and over.
#[test]
fn k5_a_node_role_label_stops_the_agent_with_kubelets_message() {
    let cluster = Cluster::start();
    let kubeconfig = cluster.dir.path().join("node-kubeconfig");
    let out = std::process::Command::new(outpost_tests::outpost_bin())
        .args(["run", "--dry-run", "--node-name", NODE, "--node-labels"])
        .arg("node-role.kubernetes.io/edge=,site=north")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--manifest-dir")
        .arg(cluster.dir.path().join("manifests"))
        .arg("--state-dir")
        .arg(cluster.dir.path().join("state"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: \
             [node-role.kubernetes.io/edge]"
        ),
        "{stderr}"
    );
    assert_eq!(cluster.server.total_requests(), 0, "nothing was asked");
}

/// A node holds one connection to a TLS API server, as kubelet does: its watches (pods,
/// its Node) and its writes (the Node, its status, the Lease) are streams of one HTTP/2
/// connection, chosen by ALPN, where HTTP/1.1 took a connection for each watch.
#[needs(pods)]
#[test]
fn one_http2_connection_carries_the_node_s_watches_and_writes() {
    let test_node = pods::Node::new();
    let cluster = Cluster::start_with(|b| b.tls());
    let _agent = start(&cluster, &test_node, &[]);
    ready_node(&cluster);
    wait_for("a Lease renewed", || renew_time(&lease(&cluster)?));
    let watched = wait_for("the watches of pods and of its Node", || {
        let watchers = cluster.server.all_watchers();
        ["pods", "nodes"]
            .iter()
            .all(|r| watchers.get(*r).is_some_and(|n| *n > 0))
            .then_some(watchers)
    });
    let connections = cluster.server.connections();
    assert_eq!(
        (connections.h2, connections.http1),
        (1, 0),
        "{connections:?} with the watches {watched:?} and the requests {:?}",
        cluster.server.requests()
    );
}

/// O3, a connection that died silently (a NAT forgot it: no FIN, no RST, no answer):
/// the one HTTP/2 connection carries everything, so the client pings it after 30 s
/// without a read and drops it when the ping goes unanswered, and the Lease is renewed
/// over a new connection, as client-go's transport does.
#[needs(pods)]
#[test]
fn o3_a_connection_that_dies_silently_is_dropped_and_the_lease_renewed_on_a_new_one() {
    let test_node = pods::Node::new();
    let cluster = Cluster::start_with(|b| b.tls());
    let relay = cluster.rt.block_on(Relay::start(cluster.server.addr())).unwrap();
    let kubeconfig = cluster.dir.path().join("node-kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(text.contains(&cluster.server.url()), "{text}");
    let text = text.replace(&cluster.server.url(), &format!("https://{}", relay.addr()));
    std::fs::write(&kubeconfig, text).unwrap();
    let _agent = start(&cluster, &test_node, &[]);
    ready_node(&cluster);
    wait_for("a Lease renewed", || renew_time(&lease(&cluster)?));
    let before = cluster.server.connections();
    relay.stall();
    let stalled = Timestamp::now();
    wait_for("the Lease renewed after the connection died", || {
        renew_time(&lease(&cluster)?).filter(|renewed| *renewed > stalled)
    });
    assert!(relay.stalled() >= 1);
    let after = cluster.server.connections();
    assert!(after.accepted > before.accepted, "{before:?} then {after:?}");
}

/// O3: a renewal the server refuses for load is tried again from the Lease the agent
/// holds, with no read first, and a `Retry-After` longer than the renew interval holds
/// it for the renew interval only (an hour here; the 40 s Lease would lapse).
#[needs(pods)]
#[test]
fn o3_a_lease_renewal_refused_for_load_is_retried_from_the_held_lease() {
    let test_node = pods::Node::new();
    let cluster = Cluster::start();
    let _agent = start(&cluster, &test_node, &[]);
    ready_node(&cluster);
    wait_for("a Lease renewed by update", || {
        (cluster.server.count("update", "leases") >= 1).then_some(())
    });
    let gets = cluster.server.count("get", "leases");
    let updates = cluster.server.count("update", "leases");
    let refusal = outpost_tests::apiserver::Fault::too_many_requests().retry_after(3600);
    cluster.server.fail_next(2, "update", "leases", refusal);
    let armed = Timestamp::now();
    // An update after the faults were armed that landed came after both refusals.
    wait_for("the Lease renewed after two refusals", || {
        renew_time(&lease(&cluster)?).filter(|renewed| *renewed > armed)
    });
    assert_eq!(cluster.server.faults_remaining(), 0);
    assert!(cluster.server.count("update", "leases") >= updates + 3, "two refused, one renewed");
    assert_eq!(cluster.server.count("get", "leases"), gets, "{:?}", cluster.server.requests());
}
