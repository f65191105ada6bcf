use super::*;
use k8s_openapi::api::core::v1::{PodSpec, PodStatus};

fn pod() -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some("web".into());
    pod.metadata.namespace = Some("default".into());
    pod.spec = Some(PodSpec::default());
    pod
}

#[test]
fn m4_bookkeeping_annotations_do_not_change_the_semantic_fingerprint() {
    let plain = Fingerprint::of(&pod());
    let mut stamped = pod();
    set_annotation(&mut stamped, CONFIG_SOURCE, "file");
    set_annotation(&mut stamped, CONFIG_SEEN, "2026-11-21T00:00:00Z");
    set_annotation(&mut stamped, CONFIG_MIRROR, "abc");
    assert_eq!(Fingerprint::of(&stamped), plain);
}

#[test]
fn m4_spec_labels_annotations_and_deletion_change_the_semantic_fingerprint() {
    let base = Fingerprint::of(&pod()).semantic;
    let mut changed = Vec::new();
    let mut p = pod();
    p.spec.get_or_insert_with(Default::default).hostname = Some("h".into());
    changed.push(p);
    let mut p = pod();
    p.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
    changed.push(p);
    let mut p = pod();
    set_annotation(&mut p, "example.com/owner", "ops");
    changed.push(p);
    let mut p = pod();
    p.metadata.deletion_grace_period_seconds = Some(30);
    changed.push(p);
    let mut p = pod();
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    changed.push(p);
    for p in changed {
        assert_ne!(Fingerprint::of(&p).semantic, base, "{:?}", p.metadata);
    }
}

#[test]
fn m5_status_only_changes_only_the_status_fingerprint() {
    let before = Fingerprint::of(&pod());
    let mut p = pod();
    p.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
    let after = Fingerprint::of(&p);
    assert_eq!(after.semantic, before.semantic);
    assert_ne!(after.status, before.status);
}

#[test]
fn source_names_match_kubelet_annotations() {
    assert_eq!(Source::File.config_source(), "file");
    assert_eq!(Source::Url.config_source(), "http");
    assert_eq!(Source::Push.config_source(), "http");
    assert_eq!(Source::Api.config_source(), "api");
    let all = [Source::File, Source::Url, Source::Push, Source::Api];
    assert!(all.iter().filter(|s| !s.is_static()).eq([&Source::Api]));
}
