//! Repository-wide rules, checked by a plain `cargo test` (as rust-analyzer's tidy does).

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for dir in ["agent", "tests", "xtask"] {
        rust_files(&root().join(dir), &mut files);
    }
    files.into_iter().map(|p| (p.clone(), fs::read_to_string(&p).unwrap())).collect()
}

/// SEMANTICS.md asks tests to name the rule they check; every S and M rule has one.
#[test]
fn every_source_and_merge_rule_is_named_by_a_test() {
    let tests: String = sources()
        .into_iter()
        .filter(|(p, _)| {
            p.components().any(|c| c.as_os_str() == "tests") || p.ends_with("tests.rs")
        })
        .map(|(_, text)| text)
        .collect();
    let word = |rule: &str| {
        tests.match_indices(rule).any(|(i, _)| {
            let after = tests[i + rule.len()..].chars().next();
            let before = tests[..i].chars().next_back();
            !after.is_some_and(|c| c.is_ascii_digit())
                && !before.is_some_and(|c| c.is_ascii_alphanumeric())
        })
    };
    let lower = |rule: &str| word(rule) || word(&rule.to_lowercase());
    let missing: Vec<String> = (1..=11)
        .map(|n| format!("S{n}"))
        .chain((1..=11).map(|n| format!("M{n}")))
        .filter(|rule| !lower(rule))
        .collect();
    assert!(missing.is_empty(), "rules no test names: {missing:?}");
}

#[test]
fn no_mod_rs_files() {
    let offenders: Vec<_> =
        sources().into_iter().filter(|(p, _)| p.ends_with("mod.rs")).map(|(p, _)| p).collect();
    assert!(offenders.is_empty(), "use foo.rs + foo/ instead: {offenders:?}");
}

/// Every `unsafe` block or impl carries a `SAFETY:` comment just above it.
#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let mut missing = Vec::new();
    for (path, text) in sources().into_iter().filter(|(p, _)| !p.ends_with("tidy.rs")) {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let opens = code.contains("unsafe {")
                || code.contains("unsafe impl")
                || code.trim_end().ends_with("unsafe");
            if !opens || code.contains("unsafe fn") || code.contains("unsafe_code") {
                continue;
            }
            let justified = lines[i.saturating_sub(6)..=i].iter().any(|l| l.contains("SAFETY:"));
            if !justified {
                missing.push(format!("{}:{}", path.display(), i + 1));
            }
        }
    }
    assert!(missing.is_empty(), "unsafe without a SAFETY: comment: {missing:?}");
}

/// Library core, thin binary (STYLE.md 1).
#[test]
fn main_rs_only_parses_and_dispatches() {
    let main = fs::read_to_string(root().join("agent/src/main.rs")).unwrap();
    let lines =
        main.lines().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//")).count();
    assert!(
        lines <= 60,
        "agent/src/main.rs has {lines} lines of code; move logic into the library"
    );
}

/// The pure core imports no async runtime, HTTP stack or container runtime (STYLE.md 2).
#[test]
fn core_crate_has_no_io_dependencies() {
    let manifest = fs::read_to_string(root().join("agent/core/Cargo.toml")).unwrap();
    for banned in ["tokio", "hyper", "axum", "containerd", "reqwest", "kube", "libc", "nix"] {
        let listed = manifest.lines().any(|l| l.trim_start().starts_with(banned));
        assert!(!listed, "outpost-core must stay pure but depends on {banned}");
    }
}
