use k8s_openapi::jiff::Timestamp;

use super::render;
use crate::api::status::{AgentStatus, ApiServerStatus, PodCounts, RuntimeStatus, SourceStatus};
use crate::podconfig::SourceState;
use crate::source::problems::ManifestProblem;

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn fixture() -> AgentStatus {
    AgentStatus {
        certificates: Vec::new(),
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
                problems: Vec::new(),
            },
            SourceStatus {
                name: "url".to_owned(),
                state: SourceState::Checkpoint,
                last_error: Some("GET http://cfg/pods: connection refused".to_owned()),
                last_success: None,
                problems: Vec::new(),
            },
            SourceStatus {
                name: "api".to_owned(),
                state: SourceState::NeverSeen,
                last_error: None,
                last_success: None,
                problems: Vec::new(),
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

#[test]
fn each_manifest_with_problems_is_listed_with_its_first_problem() {
    let mut status = fixture();
    let bad = ["/m/bad.yaml:3:5: metadata.name: missing".to_owned(), "x".to_owned()];
    let warned = ["web:4:3: warning: spec.nodeSelector: not checked".to_owned()];
    status.sources[0].problems =
        ManifestProblem::rejected("/m/bad.yaml", &bad).into_iter().collect();
    status.sources[1].name = "push".to_owned();
    status.sources[1].problems = ManifestProblem::warned("web", &warned).into_iter().collect();
    let text = render(&status);
    let want = "\
Manifest problems:
  SOURCE   MANIFEST   FIRST PROBLEM
  file     rejected   /m/bad.yaml:3:5: metadata.name: missing (+1 more)
  push     warned     web:4:3: warning: spec.nodeSelector: not checked
";
    assert!(text.ends_with(want), "{text}");
    assert!(!render(&fixture()).contains("Manifest problems"), "none: no section");
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["sources"][0]["problems"][0]["severity"], "rejected");
    assert_eq!(json["sources"][0]["problems"][0]["manifest"], "/m/bad.yaml");
    let back: AgentStatus = serde_json::from_value(json).unwrap();
    assert_eq!(back, status);
}

#[test]
fn a_status_without_problems_from_an_older_agent_still_reads() {
    let mut json = serde_json::to_value(fixture()).unwrap();
    for source in json["sources"].as_array_mut().unwrap() {
        source.as_object_mut().unwrap().remove("problems");
    }
    let back: AgentStatus = serde_json::from_value(json).unwrap();
    assert_eq!(back, fixture());
}

/// J2: each managed certificate's expiry; inside 7 days it is a warning.
#[test]
fn j2_certificates_show_their_expiry_and_warn_inside_seven_days() {
    use crate::api::status::CertificateInfo;
    use crate::certificates::CertificateStatus;
    use std::time::{Duration, SystemTime};
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let days = |n: u64| Duration::from_secs(n * 24 * 3600);
    let status = |left: Duration| CertificateStatus {
        not_before: Some(now - days(300)),
        not_after: Some(now + left),
        rotation_deadline: Some(now + left / 2),
        ..CertificateStatus::default()
    };
    let valid = CertificateInfo::of("client", &status(days(30)), now);
    assert_eq!(valid.state, "valid");
    let soon = CertificateInfo::of("client", &status(days(6)), now);
    assert_eq!(soon.state, "expiring-soon");
    let mut expired = CertificateInfo::of(
        "client",
        &CertificateStatus { not_after: Some(now - days(1)), ..status(days(1)) },
        now,
    );
    assert_eq!(expired.state, "expired");
    expired.problem = Some("the bootstrap token was refused".into());
    let none = CertificateInfo::of("client", &CertificateStatus::default(), now);
    assert_eq!(none.state, "none");
    let text = render(&AgentStatus { certificates: vec![soon], ..fixture() });
    assert!(
        text.contains("Certificates:\n  client: WARNING: expires within 7 days, at 2027-01-21T"),
        "{text}"
    );
    assert!(text.contains(", renewal at 2027-01-"), "{text}");
    let text = render(&AgentStatus { certificates: vec![expired], ..fixture() });
    assert!(
        text.contains("  client: EXPIRED at ")
            && text.contains("(the bootstrap token was refused)"),
        "{text}"
    );
    let text = render(&AgentStatus { certificates: vec![valid], ..fixture() });
    assert!(text.contains("  client: valid until "), "{text}");
}
