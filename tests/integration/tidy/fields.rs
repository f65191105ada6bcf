//! The agent's `tracing` fields name a pod as `pod.namespace`, `pod.name` and `pod.uid`
//! (STYLE.md), so that one query finds a pod's lines whichever module wrote them: no
//! event or span names a field `pod`, `namespace`, `uid`, `pod_uid`, `pod_name` or
//! `pod_namespace`.

use std::fs;

use super::{root, rust_files};

/// Field names that stand for a pod, or a part of one, without the `pod.` prefix.
const UNDOTTED: &[&str] = &["pod", "namespace", "uid", "pod_uid", "pod_name", "pod_namespace"];

/// The `tracing` macros whose arguments are fields.
const MACROS: &[&str] = &[
    "trace!",
    "debug!",
    "info!",
    "warn!",
    "error!",
    "event!",
    "trace_span!",
    "debug_span!",
    "info_span!",
    "warn_span!",
    "error_span!",
    "span!",
];

#[test]
fn pod_fields_are_dotted() {
    let mut files = Vec::new();
    rust_files(&root().join("agent"), &mut files);
    let mut offenders = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).unwrap();
        for (at, field) in fields(&text) {
            if UNDOTTED.contains(&field.as_str()) {
                let line = text[..at].matches('\n').count() + 1;
                let shown = path.strip_prefix(root()).unwrap_or(&path).display();
                offenders.push(format!("{shown}:{line}: field {field:?}"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "name pod fields pod.namespace, pod.name and pod.uid:\n{}",
        offenders.join("\n")
    );
}

/// Each field named in a `tracing` macro's arguments, with its offset: the arguments at
/// the macro's top level, before its message, as `name = value`, `%name`, `?name` or
/// `name` alone.
fn fields(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for mac in MACROS {
        for (start, _) in text.match_indices(mac) {
            let before = text[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // `my_info!`, `span!` inside `info_span!`
            }
            let open = start + mac.len();
            if !text[open..].starts_with('(') {
                continue;
            }
            for (at, argument) in arguments(text, open + 1) {
                let argument = argument.trim_start_matches(['%', '?']);
                let name: String = argument
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
                    .collect();
                let rest = argument[name.len()..].trim_start();
                let is_field = !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && (rest.is_empty() || (rest.starts_with('=') && !rest.starts_with("==")));
                if is_field {
                    found.push((at, name));
                }
            }
        }
    }
    found
}

/// The top-level arguments of the call whose `(` ends just before `from`, each with its
/// offset, whitespace trimmed; string literals are skipped (a message ends the fields).
fn arguments(text: &str, from: usize) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = from;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text[from..].char_indices() {
        let at = from + i;
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth > 0 => depth -= 1,
            ')' => {
                push(text, start, at, &mut out);
                break;
            }
            ',' if depth == 0 => {
                push(text, start, at, &mut out);
                start = at + 1;
            }
            _ => {}
        }
    }
    out
}

fn push<'a>(text: &'a str, start: usize, end: usize, out: &mut Vec<(usize, &'a str)>) {
    let raw = &text[start..end];
    let trimmed = raw.trim_start();
    out.push((start + raw.len() - trimmed.len(), trimmed.trim_end()));
}

#[test]
fn fields_are_found_as_tracing_reads_them() {
    let code = r#"tracing::info!(pod = %p, pod.uid = u, %namespace, ?uid, x == y, "pod = {pod}");
        debug_span!("name", container, pod_name = n);"#;
    let names: Vec<String> = fields(code).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["pod", "pod.uid", "namespace", "uid", "container", "pod_name"]);
}
