use k8s_openapi::jiff::Timestamp;

use super::render;
use crate::api::status::{AgentStatus, ApiServerStatus, PodCounts, RuntimeStatus, SourceStatus};
use crate::podconfig::SourceState;

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn fixture() -> AgentStatus {
    AgentStatus {
        node_name: "edge-1".to_owned(),
        version: "0.1.0".to_owned(),
        started: t(-7500),
        now: t(0),
        ready: false,
        sources: vec![
            SourceStatus {
                name: "file".to_owned(),
                state: SourceState::Live,
                last_error: None,
                last_success: Some(t(-5)),
            },
            SourceStatus {
                name: "url".to_owned(),
                state: SourceState::Checkpoint,
                last_error: Some("GET http://cfg/pods: connection refused".to_owned()),
                last_success: None,
            },
            SourceStatus {
                name: "api".to_owned(),
                state: SourceState::NeverSeen,
                last_error: None,
                last_success: None,
            },
        ],
        api_server: ApiServerStatus {
            configured: true,
            reachable: false,
            queued_status_updates: 3,
        },
        runtime: Some(RuntimeStatus {
            connected: true,
            socket: "/run/containerd/containerd.sock".into(),
            namespace: "outpost".to_owned(),
            managed: false,
        }),
        watcher: "fanotify".to_owned(),
        pods: PodCounts { total: 4, pending: 1, running: 2, succeeded: 0, failed: 1, failing: 2 },
    }
}

#[test]
fn the_status_reads_at_a_glance() {
    let want = "\
Node:       edge-1
Version:    0.1.0
Uptime:     125m
Ready:      no
API server: unreachable, 3 pod status update(s) queued
Runtime:    containerd connected (external, /run/containerd/containerd.sock, namespace outpost)
Watcher:    fanotify
Pods:       4 total, 2 running, 1 pending, 0 succeeded, 1 failed, 2 failing
Sources:
  SOURCE   STATE        LAST SUCCESS   LAST ERROR
  file     live         5s ago         -
  url      checkpoint   never          GET http://cfg/pods: connection refused
  api      never seen   never          -
";
    assert_eq!(render(&fixture()), want);
}

#[test]
fn a_dry_run_without_api_server_says_so() {
    let status = AgentStatus {
        runtime: None,
        api_server: ApiServerStatus::default(),
        ready: true,
        ..fixture()
    };
    let text = render(&status);
    assert!(text.contains("API server: not configured (no kubeconfig)\n"), "{text}");
    assert!(text.contains("Runtime:    none (dry run)\n"), "{text}");
    assert!(text.contains("Ready:      yes\n"), "{text}");
}

#[test]
fn the_status_shape_round_trips_through_json() {
    let status = fixture();
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["sources"][2]["state"], "neverSeen");
    assert_eq!(json["apiServer"]["queuedStatusUpdates"], 3);
    let back: AgentStatus = serde_json::from_value(json).unwrap();
    assert_eq!(back, status);
}
