use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use outpost_core::event_aggregate::{Limits, SPAM_BURST};

use super::*;

fn pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web-edge-1".into()),
            namespace: Some("default".into()),
            uid: Some("u1".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

#[test]
fn repeats_are_one_event_with_a_count() {
    let recorder = Recorder::default();
    let container = pod_ref(&pod(), Some("main"));
    for _ in 0..3 {
        recorder.emit(&container, EventType::Warning, reason::BACK_OFF, "Back-off restarting");
    }
    recorder.emit(&container, EventType::Normal, reason::STARTED, "Started container main");
    let recent = recorder.recent(10);
    assert_eq!(recent.len(), 2);
    let (key, series) = &recent[1];
    assert_eq!((key.reason.as_str(), series.count), ("BackOff", 3));
    assert_eq!(key.field_path, "spec.containers{main}");
    assert!(series.name.starts_with("web-edge-1."), "{}", series.name);
    assert_eq!(series.name.len(), "web-edge-1.".len() + 16);
    let stats = recorder.stats();
    assert_eq!((stats.emitted, stats.aggregated, stats.dropped), (4, 2, 0));
}

#[test]
fn event_names_are_unique_within_a_nanosecond() {
    let recorder = Recorder::default();
    let object = pod_ref(&pod(), None);
    // Different reasons: different messages of one reason would be combined past ten.
    for i in 0..20 {
        recorder.emit(&object, EventType::Normal, &format!("R{i}"), "message");
    }
    let names: std::collections::BTreeSet<String> =
        recorder.recent(100).into_iter().map(|(_, s)| s.name).collect();
    assert_eq!(names.len(), 20);
}

#[test]
fn without_a_writer_only_the_newest_are_kept_and_the_rest_counted() {
    let recorder = Recorder::new(Limits { backlog: 3, series: 3, objects: 10 });
    let object = node_ref("edge-1");
    for i in 0..(SPAM_BURST + 5) {
        recorder.emit(&object, EventType::Warning, &format!("Reason{i}"), "file");
    }
    let stats = recorder.stats();
    assert_eq!(stats.rate_limited, 5, "one object's burst");
    assert_eq!(stats.dropped, u64::from(SPAM_BURST) - 3);
    let recent = recorder.recent(10);
    assert_eq!(recent.len(), 3);
    assert_eq!(recent[0].0.reason, format!("Reason{}", SPAM_BURST - 1));
}

#[test]
fn many_rejected_manifests_are_combined_past_ten() {
    let recorder = Recorder::default();
    let object = node_ref("edge-1");
    for i in 0..12 {
        recorder.emit(&object, EventType::Warning, reason::FAILED_VALIDATION, format!("file {i}"));
    }
    let messages: Vec<String> = recorder.recent(20).into_iter().map(|(k, _)| k.message).collect();
    assert_eq!(messages.len(), 10, "{messages:#?}");
    assert_eq!(messages[0], "(combined from similar events): file 9");
    assert_eq!(recorder.stats().combined, 3);
}

#[test]
fn the_node_is_referenced_as_kubelet_does() {
    let node = node_ref("edge-1");
    assert_eq!(node.kind.as_deref(), Some("Node"));
    assert_eq!(node.name.as_deref(), Some("edge-1"));
    assert_eq!(node.uid.as_deref(), Some("edge-1"));
    assert_eq!(node.namespace, None);
}

#[test]
fn the_event_written_carries_what_kubectl_shows() {
    let recorder = Recorder::default();
    recorder.emit(
        &node_ref("edge-1"),
        EventType::Warning,
        reason::FAILED_VALIDATION,
        "bad.yaml: no name",
    );
    let (key, series) = recorder.recent(1).remove(0);
    let event = event(&key, &series, "edge-1");
    assert_eq!(event.metadata.namespace.as_deref(), Some("default"), "node events go to default");
    assert_eq!(event.involved_object.kind.as_deref(), Some("Node"));
    assert_eq!(event.involved_object.namespace, None);
    assert_eq!(event.involved_object.field_path, None);
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("FailedValidation"));
    assert_eq!(event.count, Some(1));
    assert_eq!(event.first_timestamp, event.last_timestamp);
    let source = event.source.unwrap_or_default();
    assert_eq!(source.component.as_deref(), Some(SOURCE_COMPONENT));
    assert_eq!(source.host.as_deref(), Some("edge-1"));
    assert_eq!(event.reporting_component.as_deref(), Some("outpost"));
    assert_eq!(event.reporting_instance.as_deref(), Some("edge-1"));
}

#[test]
fn an_init_containers_events_name_its_field_path_in_init_containers() {
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    let container = |name: &str| Container { name: name.into(), ..Container::default() };
    let mut pod = pod();
    pod.spec = Some(PodSpec {
        containers: vec![container("main")],
        init_containers: Some(vec![container("migrate")]),
        ..PodSpec::default()
    });
    let path = |name| pod_ref(&pod, Some(name)).field_path;
    assert_eq!(path("migrate").as_deref(), Some("spec.initContainers{migrate}"));
    assert_eq!(path("main").as_deref(), Some("spec.containers{main}"));
    assert_eq!(pod_ref(&pod, None).field_path, None);
}
