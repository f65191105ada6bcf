//! O3 under refusal storms: the API server refuses every write for a while, as a real
//! cluster does (403 from the Node authorizer while its graph lags or RBAC changes, 429
//! from API Priority and Fairness with `Retry-After`, 503 during an upgrade), while the
//! node's pods change. Reads pass, so the agent sees what changes. Checked per storm:
//!
//! - no status is lost: once the server answers again, a pod created during the storm
//!   has its running status in the server, and a pod deleted during it is confirmed
//!   gone (the last state wins);
//! - the requests stay bounded during the storm: the agent backs off rather than spins
//!   (each second's count is reported, and bounded far below a spin);
//! - a `Retry-After` is honoured: no object's status is written more often than it asks;
//! - a 403 is not taken for lost credentials: the agent keeps its identity.
//!
//! The storms here last 20 s.

use std::time::{Duration, Instant};

use outpost_tests::api_pods::{Cluster, LONG, api_pod, state};
use outpost_tests::apiserver::Fault;
use outpost_tests::fleet::scenario::PerSecond;
use outpost_tests::pods::eventually;
use outpost_tests_needs::needs;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const STORM: Duration = Duration::from_secs(20);
/// A node with two pods that backs off sends a few requests a second (its Lease's
/// renewal, the pods' retries, the first second's burst of the new pod's Events); one
/// that retried at once would send what its token bucket lets through, 50 a second.
const MAX_PER_SECOND: u64 = 25;
/// Over the storm, on average (measured: 0.4 to 1.6).
const MEAN_PER_SECOND: f64 = 5.0;
/// 429's `Retry-After` in the storm: longer than the agent's first backoff steps.
const RETRY_AFTER: u64 = 5;

struct Storm {
    /// The highest count of requests in one second of the storm, and the mean.
    max_per_second: u64,
    mean_per_second: f64,
    /// Writes of the created pod's status during the storm.
    status_writes: u64,
}

fn storm(fault: Fault) -> Storm {
    let cluster = Cluster::start();
    let server = cluster.server();
    // No service account token: a TokenRequest is a write too, and a pod that needs one
    // cannot start until the storm ends (the pod worker's retry, not the status sync).
    let spec = json!({"automountServiceAccountToken": false});
    cluster.create_pod(api_pod("before", json!({}), spec.clone()));
    cluster.wait_running("before");

    server.storm(Some(fault));
    let started = Instant::now();
    let counting = CancellationToken::new();
    let counter = {
        let _rt = cluster.api.rt.enter();
        PerSecond::spawn(server.request_counts(), counting.clone())
    };
    // During the storm: one pod comes, one goes. The test's own writes do not go
    // through HTTP, so the storm does not refuse them.
    cluster.create_pod(api_pod("during", json!({}), spec));
    server.delete("pods", Some("default"), "before", Some(2)).expect("delete before");
    std::thread::sleep(STORM.saturating_sub(started.elapsed()));
    counting.cancel();
    let counts = cluster.api.rt.block_on(counter).expect("the request counter").totals();
    let status_writes = server.count_object("patch", "pods/status", "default/during")
        + server.count_object("update", "pods/status", "default/during");
    server.storm(None);
    let calmed = Instant::now();
    eventually("the pod created in the storm has its running status", LONG, || {
        server.get_pod("default", "during").is_ok_and(|p| state(&p, "main")["running"].is_object())
    });
    eventually("the pod deleted in the storm is confirmed gone", LONG, || {
        server.get_pod("default", "before").is_err()
    });
    let recovered = calmed.elapsed();
    let log = cluster.agent.as_ref().map(|a| a.log()).unwrap_or_default();
    assert!(!log.contains("bootstrap"), "a refusal was taken for lost credentials:\n{log}");
    // The authorizer's refusals were the storm's; the harness fails on any other.
    server.take_refusals();
    let max_per_second = counts.iter().copied().max().unwrap_or_default();
    let mean_per_second = counts.iter().sum::<u64>() as f64 / counts.len().max(1) as f64;
    eprintln!(
        "storm {fault:?}: requests per second max {max_per_second}, mean {mean_per_second:.2}; \
         status writes of the new pod {status_writes}; recovered {recovered:?}"
    );
    Storm { max_per_second, mean_per_second, status_writes }
}

fn assert_bounded(storm: &Storm) {
    assert!(
        storm.max_per_second <= MAX_PER_SECOND,
        "{} requests in one second of the storm (at most {MAX_PER_SECOND})",
        storm.max_per_second
    );
    assert!(
        storm.mean_per_second <= MEAN_PER_SECOND,
        "{:.2} requests a second over the storm (at most {MEAN_PER_SECOND})",
        storm.mean_per_second
    );
}

#[needs(pods)]
#[test]
fn o3_a_storm_of_403_from_the_node_authorizer_loses_no_status_and_does_not_spin() {
    assert_bounded(&storm(Fault::forbidden()));
}

#[needs(pods)]
#[test]
fn o3_a_storm_of_429_is_paced_by_its_retry_after_and_loses_no_status() {
    let storm = storm(Fault::too_many_requests().retry_after(RETRY_AFTER));
    assert_bounded(&storm);
    let most = STORM.as_secs() / RETRY_AFTER + 1;
    assert!(
        storm.status_writes <= most,
        "{} writes of one pod's status in {STORM:?} of Retry-After: {RETRY_AFTER} (at most {most})",
        storm.status_writes
    );
}

#[needs(pods)]
#[test]
fn o3_a_storm_of_503_loses_no_status_and_does_not_spin() {
    assert_bounded(&storm(Fault::unavailable()));
}
