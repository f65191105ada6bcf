//! B13's scenario: the outage figures' arithmetic, and a small fleet through a whole
//! outage end to end (no containers: hollow nodes on the test API server).

use std::collections::BTreeMap;
use std::time::Duration;

use super::outage::Outage;
use super::{Client, Scenario, run};

fn second(entries: &[(&str, &str, u64)]) -> BTreeMap<(String, String), u64> {
    entries
        .iter()
        .map(|(verb, resource, count)| ((verb.to_string(), resource.to_string()), *count))
        .collect()
}

fn outage(seconds: Vec<BTreeMap<(String, String), u64>>, idle_qps: f64) -> Outage {
    let mut requests = BTreeMap::new();
    for second in &seconds {
        for (key, count) in second {
            *requests.entry(key.clone()).or_default() += count;
        }
    }
    Outage {
        length: Duration::from_secs(60),
        nodes: 2,
        pods: 4,
        idle_qps,
        seconds,
        requests,
        throttled: 0,
        leases_after: Some(Duration::from_secs(1)),
        nodes_after: Some(Duration::from_secs(2)),
        pods_after: Some(Duration::from_secs(3)),
        slowest_first_write: None,
        backoff_cap: Duration::from_secs(10),
        node_writes: 2,
        unsynced_nodes: 0,
        unsynced_pods: 0,
    }
}

/// The reconnect target (≤ 2 per pod + 5 per node beyond idle) and the peak second,
/// from per-second counts.
#[test]
fn b13_outage_counts_beyond_idle_against_the_reconnect_budget() {
    let seconds = vec![
        second(&[("watch", "pods", 2), ("patch", "pods/status", 4)]),
        second(&[("update", "leases", 2), ("patch", "nodes/status", 2)]),
        second(&[]),
        second(&[("update", "leases", 1)]),
    ];
    let outage = outage(seconds, 0.25);
    assert_eq!(outage.total(), 11);
    assert_eq!(outage.peak(), (0, 6));
    assert_eq!(outage.beyond_idle(), 10.0, "11 requests in 4 s, 1 of them idle");
    assert_eq!(outage.budget(), 18.0, "4 pods and 2 nodes");
    assert_eq!(outage.beyond_idle_except("pods"), 4.0, "pods and pods/status left out");
    assert_eq!(outage.synced_after(), Some(Duration::from_secs(3)), "the nodes' and the pods'");
}

/// A window quieter than idle is no negative cost, and the first of equal peaks wins.
#[test]
fn b13_outage_beyond_idle_is_never_negative() {
    let outage =
        outage(vec![second(&[("update", "leases", 1)]), second(&[("update", "leases", 1)])], 5.0);
    assert_eq!(outage.beyond_idle(), 0.0);
    assert_eq!(outage.peak(), (0, 1));
}

/// B13 end to end: three hollow nodes with two API pods each go through a whole-fleet
/// outage during which every container exits; after the restore every Lease is renewed,
/// every node is Ready and every pod's status shows its restart, and the reconnect's
/// requests are counted (the pods' status writes among them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b13_whole_fleet_outage_ends_with_every_node_and_pod_synced() {
    whole_fleet_outage(Client::Outpost).await;
}

/// The same scenario drives the kubelet-shaped model through the same outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b13_whole_fleet_outage_of_the_kubelet_model_ends_synced() {
    whole_fleet_outage(Client::Kubelet).await;
}

async fn whole_fleet_outage(client: Client) {
    let mut scenario = Scenario::new(client, 3);
    scenario.pods_per_node = 2;
    scenario.settle = Duration::from_secs(1);
    scenario.idle = Duration::from_secs(2);
    scenario.outages = vec![Duration::from_secs(3)];
    scenario.tail = Duration::from_secs(1);
    let figures = run(&scenario, &|line| println!("{line}")).await.expect("the scenario runs");
    let [outage] = figures.outages.as_slice() else { panic!("one outage: {:?}", figures.outages) };
    assert_eq!((outage.nodes, outage.pods), (3, 6));
    assert_eq!((outage.unsynced_nodes, outage.unsynced_pods), (0, 0), "{outage:?}");
    assert!(outage.synced_after().is_some() && outage.leases_after.is_some(), "{outage:?}");
    let status_writes = outage.requests.get(&("patch".into(), "pods/status".into()));
    assert!(
        status_writes.is_some_and(|writes| *writes >= 6),
        "every pod's restart written: {outage:?}"
    );
    assert!(outage.slowest_first_write.is_some(), "every node wrote its Lease: {outage:?}");
}
