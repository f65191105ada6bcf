//! Where errors point: the parser's line and column, or the line of the field (S12).

use super::*;

#[test]
fn a_syntax_error_has_its_line_and_column() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n spec: {}\n";
    let error = error(text);
    assert_eq!(error.position(), Some((5, 2)));
    let message = error.to_string();
    assert!(message.starts_with("5:2: cannot decode YAML: "), "{message}");
    assert!(!message.contains("at line"), "the position is said once: {message}");
}

#[test]
fn a_type_error_has_its_line_column_and_field_path() {
    let text = manifest("web").replace("image: nginx:1.27", "image: [nginx]");
    let error = error(&text);
    assert_eq!(error.position(), Some((8, 12)));
    assert!(error.to_string().contains("spec.containers[0].image: invalid type"), "{error}");
}

#[test]
fn a_json_error_has_its_line_and_column() {
    let text = "{\"apiVersion\": \"v1\", \"kind\": \"Pod\",\n  \"metadata\": {\"name\": 3}}";
    let error = error(text);
    assert_eq!(error.position(), Some((2, 24)));
    assert!(error.to_string().contains("cannot decode JSON"), "{error}");
}

/// fuzz/regressions/manifest/crash-8989de03...: libyaml put an error at the end of a text
/// without a final newline on line 4 of 3; every position is inside the text.
#[test]
fn an_error_at_the_end_of_the_text_points_inside_it() {
    let text = "# two containers\napiVersion: v1\nkind:#  ";
    let found = error(text);
    assert_eq!(found.position(), Some((3, 1)), "the key that has no value: {found}");
    assert!(found.to_string().starts_with("3:1: cannot decode YAML: "), "{found}");
    let unclosed = error("apiVersion: v1\nkind: \"Pod");
    let (line, column) = unclosed.position().unwrap();
    assert!(line <= 2 && column <= 11, "{unclosed}");
}

/// serde_json says column 0 for an error right after a newline: the end of the line before.
#[test]
fn a_json_error_after_a_newline_points_at_the_end_of_the_line_before() {
    assert_eq!(error("{\"apiVersion\": \"v1\",\n").position(), Some((1, 21)));
    assert_eq!(error("{\"kind\": \"Pod\",\n\n").position(), Some((2, 1)));
}

#[test]
fn invalid_utf8_has_its_line_and_column() {
    let mut bytes = manifest("wéb").into_bytes();
    bytes.extend_from_slice(b"  # caf\xe9\n");
    let errors = decode(&bytes, file(), NODE).unwrap_err().0;
    assert!(matches!(errors[0], Error::NotUtf8 { line: 9, column: 8, .. }), "{errors:?}");
}

#[test]
fn errors_are_listed_one_per_line_in_document_order() {
    let bad = |name: &str| manifest(name).replace("    image: nginx:1.27\n", "");
    let text = format!("{}---\n{}", bad("a"), bad("b"));
    let errors = decode(text.as_bytes(), file(), NODE).unwrap_err();
    let display = errors.to_string();
    let lines: Vec<_> = display.lines().collect();
    assert_eq!(lines.len(), 2, "{display}");
    assert!(lines[0].starts_with("7:5: spec.containers[0].image"), "{display}");
    assert!(lines[1].starts_with("15:5: spec.containers[0].image"), "{display}");
}

#[test]
fn a_bad_merge_key_points_at_its_key() {
    let text = format!(
        "{}---\n{}",
        manifest("a"),
        manifest("b").replace("  name: b\n", "  name: b\n  <<: 1\n")
    );
    let error = error(&text);
    assert_eq!(error.position(), Some((14, 3)), "{error}");
    assert!(error.to_string().contains("merg"), "{error}");
}
