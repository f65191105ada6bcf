//! Manifest decoding; each test names the SEMANTICS.md rule it checks.

use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, Toleration};

use super::*;
use crate::pod::{self, CONFIG_HASH, CONFIG_SOURCE};

mod admission;
mod dialect;
mod hostile;
mod positions;
mod validation;

const NODE: &str = "Edge-01";

fn file() -> Origin<'static> {
    Origin::File(Path::new("/etc/outpost/manifests/web.yaml"))
}

/// A valid pod manifest.
fn manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: app\n    image: nginx:1.27\n"
    )
}

fn decode_all(text: &str, origin: Origin<'_>) -> Vec<Pod> {
    match decode(text.as_bytes(), origin, NODE) {
        Ok(pods) => pods,
        Err(errors) => panic!("{text}\nwas rejected:\n{errors}"),
    }
}

fn decode_one(text: &str, origin: Origin<'_>) -> Pod {
    let mut pods = decode_all(text, origin);
    assert_eq!(pods.len(), 1, "{text}");
    pods.remove(0)
}

fn errors(text: &str) -> Vec<Error> {
    match decode(text.as_bytes(), file(), NODE) {
        Ok(pods) => panic!("{text}\nwas accepted: {pods:?}"),
        Err(errors) => errors.0,
    }
}

/// The single error of a manifest.
fn error(text: &str) -> Error {
    let mut errors = errors(text);
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors.remove(0)
}

fn names(pods: &[Pod]) -> Vec<&str> {
    pods.iter().map(|pod| pod.metadata.name.as_deref().unwrap_or_default()).collect()
}

fn is_no_execute_toleration(t: &Toleration) -> bool {
    t.operator.as_deref() == Some("Exists")
        && t.effect.as_deref() == Some("NoExecute")
        && t.key.is_none()
        && t.value.is_none()
        && t.toleration_seconds.is_none()
}

// S1
#[test]
fn s1_missing_name_is_rejected() {
    let text = manifest("web").replace("  name: web\n", "  labels: {app: web}\n");
    let error = error(&text);
    assert!(matches!(error, Error::MissingName { .. }), "{error:?}");
    assert_eq!(error.position(), Some((3, 1)), "at metadata, which has no name");
    assert!(error.to_string().contains("metadata.name: missing"), "{error}");
}

// S1
#[test]
fn s1_empty_name_is_rejected() {
    let error = error(&manifest("\"\""));
    assert!(matches!(error, Error::MissingName { .. }), "{error:?}");
}

// S1
#[test]
fn s1_a_nameless_pod_rejects_its_whole_manifest() {
    let nameless = manifest("x").replace("  name: x\n", "  namespace: web\n");
    let text = format!("{}---\n{nameless}", manifest("ok"));
    let error = error(&text);
    assert!(matches!(error, Error::MissingName { .. }), "{error:?}");
    assert_eq!(error.position(), Some((12, 1)), "the second document's metadata");
}

// S2
#[test]
fn s2_name_gets_lowercased_node_suffix() {
    let pod = decode_one(&manifest("web"), file());
    assert_eq!(pod.metadata.name.as_deref(), Some("web-edge-01"));
}

// S3
#[test]
fn s3_empty_namespace_becomes_default() {
    let absent = decode_one(&manifest("web"), file());
    assert_eq!(absent.metadata.namespace.as_deref(), Some("default"));

    let empty = manifest("web").replace("  name: web\n", "  name: web\n  namespace: \"\"\n");
    let empty = decode_one(&empty, file());
    assert_eq!(empty.metadata.namespace.as_deref(), Some("default"));

    let set = manifest("web").replace("  name: web\n", "  name: web\n  namespace: kube-system\n");
    let set = decode_one(&set, file());
    assert_eq!(set.metadata.namespace.as_deref(), Some("kube-system"));
}

// S4
#[test]
fn s4_node_name_is_set_and_phase_is_pending() {
    let text = format!("{}status:\n  phase: Running\n  hostIP: 10.0.0.1\n", manifest("web"));
    for text in [manifest("web"), text] {
        let pod = decode_one(&text, file());
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(NODE), "the node name as given");
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Pending"));
    }
}

// S5
#[test]
fn s5_uid_is_32_lowercase_hex_and_the_same_on_every_decode() {
    let first = decode_one(&manifest("web"), file());
    let uid = pod::uid(&first);
    assert_eq!(uid.len(), 32, "{uid}");
    assert!(uid.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')), "{uid}");
    for _ in 0..3 {
        assert_eq!(pod::uid(&decode_one(&manifest("web"), file())), uid);
    }
}

// S5
#[test]
fn s5_uid_ignores_formatting_but_not_content_node_location_or_index() {
    let uid_of = |text: &str, origin: Origin<'_>, node: &str| {
        let pods = decode(text.as_bytes(), origin, node).unwrap();
        pods.iter().map(|pod| pod::uid(pod).to_owned()).collect::<Vec<_>>()
    };
    let base = uid_of(&manifest("web"), file(), NODE);

    // Comments, spacing and key order are not content.
    let reformatted = "# web server\nkind: Pod\napiVersion: v1\nspec:\n  containers:\n    - image: nginx:1.27\n      name: app\nmetadata: {name: web}\n";
    assert_eq!(uid_of(reformatted, file(), NODE), base);

    let content = manifest("web").replace("nginx:1.27", "nginx:1.28");
    let changed = [
        uid_of(&content, file(), NODE),
        uid_of(&manifest("web"), file(), "edge-02"),
        uid_of(
            &manifest("web"),
            Origin::File(Path::new("/etc/outpost/manifests/other.yaml")),
            NODE,
        ),
        uid_of(&manifest("web"), Origin::Url("http://config/web.yaml"), NODE),
        uid_of(&manifest("web"), Origin::Push("web"), NODE),
    ];
    for uids in &changed {
        assert_ne!(uids, &base);
    }

    // Two identical documents of one stream are two pods.
    let stream = uid_of(&format!("{0}---\n{0}", manifest("web")), file(), NODE);
    assert_eq!(stream[0], base[0]);
    assert_ne!(stream[1], stream[0]);
}

// S5
#[test]
fn s5_uid_hashes_the_pod_as_written_not_as_defaulted() {
    // The same pod after defaulting, written two ways: the UIDs differ.
    let explicit = manifest("web").replace("  name: web\n", "  name: web\n  namespace: default\n");
    let implicit = decode_one(&manifest("web"), file());
    let explicit = decode_one(&explicit, file());
    assert_eq!(explicit.metadata.namespace, implicit.metadata.namespace);
    assert_ne!(pod::uid(&explicit), pod::uid(&implicit));
}

// S5
#[test]
fn s5_an_explicit_uid_is_kept() {
    let text = manifest("web").replace("  name: web\n", "  name: web\n  uid: 1234-abcd\n");
    let pod = decode_one(&text, file());
    assert_eq!(pod::uid(&pod), "1234-abcd");
}

// S6
#[test]
fn s6_config_hash_annotation_is_the_uid() {
    let generated = decode_one(&manifest("web"), file());
    assert_eq!(pod::annotation(&generated, CONFIG_HASH), Some(pod::uid(&generated)));

    let text = manifest("web").replace("  name: web\n", "  name: web\n  uid: given\n");
    let explicit = decode_one(&text, file());
    assert_eq!(pod::annotation(&explicit, CONFIG_HASH), Some("given"));
}

// S7
#[test]
fn s7_file_pods_tolerate_no_execute_taints() {
    let pod = decode_one(&manifest("web"), file());
    let tolerations = pod.spec.unwrap().tolerations.unwrap_or_default();
    assert_eq!(tolerations.len(), 1);
    assert!(is_no_execute_toleration(&tolerations[0]), "{tolerations:?}");
}

// S7
#[test]
fn s7_url_and_push_pods_get_no_toleration() {
    for origin in [Origin::Url("http://config/web.yaml"), Origin::Push("web")] {
        let pod = decode_one(&manifest("web"), origin);
        assert_eq!(pod.spec.unwrap().tolerations, None, "{origin:?}");
    }
}

// S7
#[test]
fn s7_the_toleration_is_not_duplicated_and_others_are_kept() {
    let text = format!(
        "{}  tolerations:\n  - key: dedicated\n    operator: Equal\n    value: edge\n  - operator: Exists\n    effect: NoExecute\n    tolerationSeconds: 300\n",
        manifest("web")
    );
    let pod = decode_one(&text, file());
    let tolerations = pod.spec.unwrap().tolerations.unwrap();
    assert_eq!(tolerations.len(), 2, "{tolerations:?}");
    assert_eq!(tolerations[0].key.as_deref(), Some("dedicated"));
    // As kubelet does, the matching toleration is replaced: no eviction after 300 s.
    assert!(is_no_execute_toleration(&tolerations[1]), "{tolerations:?}");
}

// M1
#[test]
fn config_source_annotation_names_the_source() {
    let cases = [
        (file(), "file"),
        (Origin::Url("http://config/web.yaml"), "http"),
        (Origin::Push("web"), "http"),
    ];
    for (origin, source) in cases {
        let pod = decode_one(&manifest("web"), origin);
        assert_eq!(pod::annotation(&pod, CONFIG_SOURCE), Some(source));
        assert_eq!(pod::annotation(&pod, crate::pod::CONFIG_SEEN), None);
    }
}

#[test]
fn origin_location_and_source() {
    assert_eq!(file().location(), "file:/etc/outpost/manifests/web.yaml");
    assert_eq!(Origin::Url("http://c/p").location(), "url:http://c/p");
    assert_eq!(Origin::Push("ns/web").location(), "push:ns/web");
    assert_eq!(file().source(), crate::pod::Source::File);
    assert_eq!(Origin::Url("u").source(), crate::pod::Source::Url);
    assert_eq!(Origin::Push("p").source(), crate::pod::Source::Push);
}

// S8
#[test]
fn s8_more_than_10_mib_is_rejected_before_parsing() {
    // Not UTF-8 either: the size is checked first.
    let bytes = vec![0xff; MAX_MANIFEST_BYTES + 1];
    let errors = decode(&bytes, file(), NODE).unwrap_err().0;
    assert_eq!(errors.len(), 1);
    assert!(matches!(errors[0], Error::TooLarge { size, .. } if size == MAX_MANIFEST_BYTES + 1));
    let message = errors[0].to_string();
    assert!(message.contains("10485761 bytes") && message.contains("10 MiB"), "{message}");
}

// S8
#[test]
fn s8_exactly_10_mib_is_parsed() {
    let mut text = manifest("web");
    text.push('#');
    text.push_str(&"x".repeat(MAX_MANIFEST_BYTES - text.len()));
    assert_eq!(text.len(), MAX_MANIFEST_BYTES);
    assert_eq!(decode_all(&text, file()).len(), 1);
}

// S9
#[test]
fn s9_a_single_pod() {
    let pods = decode_all(&manifest("web"), file());
    assert_eq!(names(&pods), ["web-edge-01"]);
}

// S9
#[test]
fn s9_a_yaml_stream_of_pods_in_order_skipping_empty_documents() {
    let text = format!(
        "---\n{}---\n# nothing here\n---\n{}---\n{}---\n",
        manifest("a"),
        manifest("b"),
        manifest("c")
    );
    assert_eq!(names(&decode_all(&text, file())), ["a-edge-01", "b-edge-01", "c-edge-01"]);
}

// S9
#[test]
fn s9_a_pod_list() {
    let text = "apiVersion: v1\nkind: PodList\nmetadata: {}\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: app, image: nginx}]}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: b}\n  spec: {containers: [{name: app, image: nginx}]}\n";
    let pods = decode_all(text, Origin::Url("http://config/pods"));
    assert_eq!(names(&pods), ["a-edge-01", "b-edge-01"]);
    assert_ne!(pod::uid(&pods[0]), pod::uid(&pods[1]));
    // The list's own fields are not unknown (S12).
    let decoded = decode_with_warnings(text.as_bytes(), Origin::Url("http://config/pods"), NODE);
    assert_eq!(decoded.unwrap().warnings, []);
}

// S9
#[test]
fn s9_a_v1_list_of_pods() {
    let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n  spec: {containers: [{name: app, image: nginx}]}\n";
    assert_eq!(names(&decode_all(text, Origin::Push("p"))), ["a-edge-01"]);
}

// S9
#[test]
fn s9_list_items_must_be_pods() {
    let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n";
    let error = error(text);
    assert_eq!(error.position(), Some((4, 3)), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("items[0]: invalid value: string \"ConfigMap\", expected Pod"),
        "{message}"
    );
}

// S9
#[test]
fn s9_an_empty_manifest_has_no_pods() {
    for text in ["", "\n\n", "# only a comment\n", "---\n", "---\n...\n", "null\n", "\u{feff}"] {
        assert_eq!(decode_all(text, file()).len(), 0, "{text:?}");
    }
}

// S9
#[test]
fn s9_other_kinds_are_rejected_with_their_line() {
    let text = format!(
        "{}---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\n",
        manifest("web")
    );
    let error = error(&text);
    assert_eq!(error.position(), Some((11, 1)), "the kind's line");
    let message = error.to_string();
    assert!(message.starts_with("11:1: "), "{message}");
    assert!(message.contains("Deployment") && message.contains("apps/v1"), "{message}");
}

// S9: like kubelet's decoder, `kind` and `apiVersion: v1` are required.
#[test]
fn s9_kind_and_api_version_are_required() {
    let no_kind = manifest("web").replace("kind: Pod\n", "");
    assert!(matches!(error(&no_kind), Error::MissingKind { .. }));

    let no_version = manifest("web").replace("apiVersion: v1\n", "");
    assert!(matches!(error(&no_version), Error::ApiVersion { found: None, .. }));

    let wrong = manifest("web").replace("apiVersion: v1", "apiVersion: apps/v1");
    let error = error(&wrong);
    assert!(matches!(&error, Error::ApiVersion { found: Some(v), .. } if v == "apps/v1"));
    assert!(error.to_string().contains("needs `apiVersion: v1`"), "{error}");
}

// S9
#[test]
fn s9_json_pod_and_pod_list() {
    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}}"#;
    assert_eq!(names(&decode_all(pod, file())), ["web-edge-01"]);

    let list = format!(r#"{{"apiVersion": "v1", "kind": "PodList", "items": [{pod}, {pod}]}}"#);
    assert_eq!(names(&decode_all(&list, file())), ["web-edge-01", "web-edge-01"]);
}

// S9: a flow mapping is YAML, not JSON.
#[test]
fn s9_yaml_flow_mapping() {
    let text = "{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {containers: [{name: app, image: nginx}]}}\n";
    assert_eq!(names(&decode_all(text, file())), ["web-edge-01"]);
}

#[test]
fn s12_a_repeated_key_is_an_error_naming_both_lines() {
    let text = manifest("web")
        .replace("    image: nginx:1.27\n", "    image: nginx:1.26\n    image: nginx:1.27\n");
    let error = error(&text);
    assert_eq!(error.position(), Some((9, 5)), "{error}");
    assert!(error.to_string().contains("\"image\" already defined at line 8"), "{error}");
}
