//! Inputs made to hurt: alias bombs, deep nesting, arbitrary bytes.

use proptest::prelude::*;

use super::*;

fn assert_rejected(text: &str, what: &str) {
    let errors = errors(text);
    let display = Errors(errors).to_string();
    assert!(display.contains(what), "{display}");
}

#[test]
fn billion_laughs_is_rejected() {
    let mut text = manifest("web");
    text.push_str("  hostAliases:\n  - ip: 10.0.0.1\n    hostnames: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let previous = format!("*a{}", i - 1);
        let refs = [previous.as_str(); 10].join(", ");
        text.push_str(&format!("  - ip: 10.0.0.{}\n    hostnames: &a{i} [{refs}]\n", i + 1));
    }
    let errors = errors(&text);
    assert!(!errors.is_empty());
}

#[test]
fn one_large_value_aliased_many_times_is_rejected() {
    let big = "x".repeat(64 * 1024);
    let mut text = manifest("web")
        .replace("  name: web\n", &format!("  name: web\n  labels:\n    big: &big {big}\n"));
    text.push_str("    args: [");
    text.push_str(&"*big, ".repeat(10_000));
    text.push_str("]\n");
    assert_rejected(&text, "aliases expand the manifest to more than twice its size");
}

#[test]
fn aliases_and_merge_keys_within_reason_are_accepted() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: &labels {app: web, tier: edge}\n  annotations: *labels\nspec:\n  containers:\n  - &app {name: app, image: nginx}\n  initContainers:\n  - <<: *app\n    name: init\n";
    let pod = decode_one(text, file());
    assert_eq!(
        pod.metadata.labels,
        pod.metadata.annotations.map(|mut a| {
            a.retain(|k, _| !k.starts_with("kubernetes.io/"));
            a
        })
    );
    let init = &pod.spec.unwrap().init_containers.unwrap()[0];
    assert_eq!((init.name.as_str(), init.image.as_deref()), ("init", Some("nginx")));
}

#[test]
fn deep_nesting_is_rejected() {
    let depth = 100_000;
    let yaml_sequences =
        format!("{}  command: {}{}\n", manifest("web"), "[".repeat(depth), "]".repeat(depth));
    assert_rejected(&yaml_sequences, "nest more than 64 deep");
    let yaml_mappings =
        format!("{}  labels: {}{}\n", manifest("web"), "{a: ".repeat(depth), "}".repeat(depth));
    assert_rejected(&yaml_mappings, "nest more than 64 deep");
    let yaml_blocks = format!("{}    command:\n    {}x\n", manifest("web"), "- ".repeat(depth));
    assert!(!errors(&yaml_blocks).is_empty());
    let json = format!(
        "{{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {{\"name\": \"web\"}}, \"spec\": {}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    assert!(!errors(&json).is_empty());
}

#[test]
fn brackets_in_strings_comments_and_block_scalars_do_not_add_up_as_nesting() {
    // Each string nests 40 deep, balanced; there are many; the comment is not balanced.
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    let script = format!("\n      {deep}").repeat(20);
    let quoted = format!("\n    - \"{deep}\"\n    - '{deep}'").repeat(20);
    let text = format!(
        "# {{{{{{ {}\n{}    args:{quoted}\n    - |{script}\n    - >-{script}\n    - plain [x] {{y}}\n",
        "[".repeat(100),
        manifest("web")
    );
    let pod = decode_one(&text, file());
    let args = pod.spec.unwrap().containers[0].args.clone().unwrap();
    assert_eq!(args.len(), 43);
    assert_eq!(args[0], deep);
}

#[test]
fn nesting_of_a_normal_depth_is_accepted() {
    let nested = format!("{}x{}", "[".repeat(60), "]".repeat(60));
    let text = format!("{}  hostAliases: []\nextra: {nested}\n", manifest("web"));
    decode_one(&text, file());
}

/// Documents to mutate: every shape `decode` accepts.
fn valid_manifests() -> Vec<String> {
    vec![
        manifest("web"),
        format!("{0}---\n{0}", manifest("web")),
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, labels: &l {x: y}, annotations: *l}\n  spec: {containers: [{name: app, image: nginx, ports: [{containerPort: 80}]}]}\n".to_owned(),
        r#"{"apiVersion": "v1", "kind": "PodList", "items": [{"metadata": {"name": "a"}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "volumes": [{"name": "d", "emptyDir": {}}]}}]}"#.to_owned(),
    ]
}

#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, u8),
    Delete(usize),
    Replace(usize, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    let byte = prop_oneof![
        prop::sample::select(b"[]{}:,-?'\"#|>&*!%@` \t\n\r\\0123456789ab\xff\xc3".to_vec()),
        any::<u8>(),
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(at, b)| Edit::Insert(at, b)),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), byte).prop_map(|(at, b)| Edit::Replace(at, b)),
    ]
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for edit in edits {
        let len = bytes.len();
        match *edit {
            Edit::Insert(at, b) => bytes.insert(at % (len + 1), b),
            Edit::Delete(at) if len > 0 => {
                bytes.remove(at % len);
            }
            Edit::Replace(at, b) if len > 0 => bytes[at % len] = b,
            Edit::Delete(_) | Edit::Replace(..) => {}
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        let _ = decode(&bytes, file(), NODE);
    }

    #[test]
    fn decode_never_panics_on_yaml_like_text(text in "[\\[\\]{}:,\\-?'\"#|>&*!<%@ \t\na-z0-9]{0,300}") {
        let _ = decode(text.as_bytes(), Origin::Url("u"), NODE);
    }

    #[test]
    fn decode_never_panics_on_a_mutated_manifest(
        which in 0..4usize,
        edits in prop::collection::vec(edit(), 1..8),
    ) {
        let bytes = apply(valid_manifests()[which].clone().into_bytes(), &edits);
        if let Err(errors) = decode(&bytes, Origin::Push("p"), NODE) {
            prop_assert!(!errors.0.is_empty());
            let _ = errors.to_string();
        }
    }
}
