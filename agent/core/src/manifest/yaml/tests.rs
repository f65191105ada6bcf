//! The node tree: positions, paths, anchors and what the loader refuses.

use super::{Node, Value, load};

fn one(text: &str) -> Node {
    let mut documents = load(text).unwrap();
    assert_eq!(documents.len(), 1, "{text}");
    documents.remove(0)
}

#[test]
fn fields_are_found_by_path_at_their_key() {
    let root = one("a:\n  b:\n  - x\n  - {c: 1, d: [2, 3]}\n");
    assert_eq!(root.position_of("a"), (1, 1));
    assert_eq!(root.position_of("a.b"), (2, 3));
    assert_eq!(root.position_of("a.b[0]"), (3, 5));
    assert_eq!(root.position_of("a.b[1].d"), (4, 12));
    assert_eq!(root.position_of("a.b[1].d[1]"), (4, 19));
    // A missing part: the deepest part that exists.
    assert_eq!(root.position_of("a.b[1].e"), (4, 5));
    assert_eq!(root.position_of("a.b[7]"), (2, 3));
    assert_eq!(root.position_of(""), root.at);
}

#[test]
fn a_bracket_without_a_number_holds_a_key() {
    let root = one("metadata:\n  annotations:\n    example.com/x: y\n");
    assert_eq!(root.position_of("metadata.annotations[example.com/x]"), (3, 5));
}

#[test]
fn documents_empty_ones_included_come_in_order() {
    let documents = load("---\n---\na: 1\n---\n# nothing\n").unwrap();
    let values: Vec<bool> = documents.iter().map(|d| d.value == Value::Null).collect();
    assert_eq!(values, [true, false, true]);
    assert!(load("").unwrap().is_empty());
}

#[test]
fn anchors_are_per_document_and_an_alias_copies_its_value() {
    let documents = load("a: &x [1]\nb: *x\n---\nc: *x\n");
    let error = documents.unwrap_err();
    assert_eq!(error.at.0, 4, "{error:?}");
    let root = one("a: &x {k: v}\nb: *x\n");
    assert_eq!(root.get("a").map(|n| &n.value), root.get("b").map(|n| &n.value));
}

#[test]
fn nesting_past_the_limit_is_refused() {
    let deep = "- ".repeat(super::build::MAX_DEPTH + 1) + "x\n";
    let error = load(&deep).unwrap_err();
    assert!(error.message.contains("nest more than"), "{error:?}");
    let fine = "- ".repeat(20) + "x\n";
    assert!(load(&fine).is_ok());
}

#[test]
fn complex_and_null_keys_are_refused() {
    assert!(load("? [a]\n: b\n").unwrap_err().message.contains("mapping key"));
    assert!(load("~: b\n").unwrap_err().message.contains("mapping key"));
}

#[test]
fn the_single_quote_escape_is_mended_only_where_the_parser_stops() {
    let root = one("a: \"it\\'s\"\nb: plain \\' stays\nc: \"bell \\a\"\n");
    let text = |key: &str| match &root.get(key).unwrap().value {
        Value::Str(s) => s.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(text("a"), "it's");
    assert_eq!(text("b"), "plain \\' stays");
    assert_eq!(text("c"), "bell \u{7}");
}
