use proptest::prelude::*;

use super::super::parse::two_pass_yaml;
use super::*;

const SPEC: &str = "spec:\n  containers:\n  - name: app\n    image: nginx:1\n";

/// A pod document with its top-level keys in the given order.
fn pod_doc(order: &[usize], name: &str) -> String {
    let parts = [
        "apiVersion: v1\n".to_owned(),
        "kind: Pod\n".to_owned(),
        format!("metadata:\n  name: {name}\n  labels: {{app: {name}}}\n"),
        SPEC.to_owned(),
        "status:\n  phase: Running\n".to_owned(),
    ];
    order.iter().map(|&i| parts[i].as_str()).collect()
}

fn list_doc(kind: &str, names: &[&str]) -> String {
    let mut doc =
        format!("apiVersion: v1\nkind: {kind}\nmetadata: {{resourceVersion: \"1\"}}\nitems:\n");
    for name in names {
        doc.push_str(&format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: {name}\n  spec:\n    containers:\n    - name: app\n      image: i\n"
        ));
    }
    doc
}

/// Whenever the single pass answers, it answers what the two-pass reader does.
#[track_caller]
fn agrees(text: &str) -> bool {
    match yaml(text) {
        Some(fast) => {
            let slow = two_pass_yaml(text);
            assert!(slow.errors.is_empty(), "single pass accepted what two passes reject: {text}");
            assert_eq!(fast, slow.pods, "{text}");
            true
        }
        None => false,
    }
}

#[test]
fn the_usual_layouts_are_read_in_one_pass() {
    assert!(agrees(&pod_doc(&[0, 1, 2, 3], "web")));
    assert!(agrees(&format!(
        "{}---\n{}---\n",
        pod_doc(&[0, 1, 2, 3], "a"),
        pod_doc(&[1, 0, 2, 3, 4], "b")
    )));
    assert!(agrees(&list_doc("PodList", &["a", "b"])));
    assert!(agrees(&list_doc("List", &[])));
    assert!(agrees("# only a comment\n---\n# and another\n"));
    assert_eq!(
        json(r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#)
            .map(|pods| pods.len()),
        Some(1)
    );
}

#[test]
fn anything_unusual_is_left_to_the_two_pass_reader() {
    // Kind after the content.
    assert!(!agrees(&pod_doc(&[2, 3, 0, 1], "late")));
    // Not a pod; a wrong apiVersion; a repeated kind; a type error; a scalar document.
    assert!(!agrees("apiVersion: apps/v1\nkind: Deployment\nspec: {replicas: 1}\n"));
    assert!(!agrees(&format!("apiVersion: v2\nkind: Pod\n{SPEC}")));
    assert!(!agrees(&format!("apiVersion: v1\nkind: Pod\nkind: Pod\n{SPEC}")));
    assert!(!agrees("apiVersion: v1\nkind: Pod\nspec:\n  containers: 3\n"));
    assert!(!agrees("just a string\n"));
}

proptest! {
    #[test]
    fn single_pass_equals_two_passes(
        docs in prop::collection::vec(
            (Just((0..5).collect::<Vec<usize>>()).prop_shuffle(), 1usize..5, 0u8..4),
            1..4,
        )
    ) {
        let mut text = String::new();
        for (i, (order, keys, shape)) in docs.iter().enumerate() {
            let doc = match shape {
                0 => pod_doc(&order[..(*keys).max(2)], &format!("p{i}")),
                1 => list_doc("PodList", &["x", "y"]),
                2 => String::from("# nothing here\n"),
                _ => pod_doc(order, &format!("q{i}")),
            };
            text.push_str(&doc);
            text.push_str("---\n");
        }
        agrees(&text);
    }
}
