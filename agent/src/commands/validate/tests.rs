use std::fs;

use super::*;

const GOOD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx:1\n";

fn run(paths: &[PathBuf]) -> (Summary, String) {
    let mut out = Vec::new();
    let summary = validate(paths, "node-a", &mut out).unwrap();
    (summary, String::from_utf8(out).unwrap())
}

#[test]
fn valid_files_report_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("web.yaml");
    fs::write(&f, GOOD).unwrap();
    let (summary, out) = run(&[f]);
    assert_eq!(summary, Summary { files: 1, pods: 1, invalid_files: 0 });
    assert_eq!(out, "");
}

#[test]
fn errors_are_file_line_col_message() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    fs::write(&f, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: [1\n").unwrap();
    let (summary, out) = run(std::slice::from_ref(&f));
    assert_eq!(summary.invalid_files, 1);
    let prefix = format!("{}:", f.display());
    let line = out.lines().next().unwrap();
    assert!(line.starts_with(&prefix), "{out}");
    let rest: Vec<&str> = line[prefix.len()..].splitn(3, ':').collect();
    assert!(
        rest[0].parse::<usize>().is_ok() && rest[1].parse::<usize>().is_ok(),
        "line:col expected: {out}"
    );
}

#[test]
fn s10_directories_expand_to_their_manifests_and_m11_duplicates_warn() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.yaml"), GOOD).unwrap();
    fs::write(dir.path().join("b.json"), r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#).unwrap();
    fs::write(dir.path().join(".a.yaml.swp"), "garbage: [").unwrap();
    fs::write(dir.path().join("notes.txt"), "garbage: [").unwrap();
    let (summary, out) = run(&[dir.path().to_path_buf()]);
    assert_eq!(summary, Summary { files: 2, pods: 2, invalid_files: 0 });
    assert!(out.contains("b.json: warning: pod default/web-node-a is also defined in"), "{out}");
}

#[test]
fn missing_and_unreadable_files_are_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let (summary, out) = run(&[dir.path().join("nope.yaml")]);
    assert_eq!(summary.invalid_files, 1);
    assert!(out.contains("nope.yaml: cannot read"), "{out}");
}
