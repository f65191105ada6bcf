//! Repository-wide rules, checked by a plain `cargo test` (as rust-analyzer's tidy does).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

mod layers;

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

/// The pure core depends on no async runtime, network, HTTP, TLS, container runtime or
/// kernel interface (STYLE.md 2), checked on the resolved graph: its normal dependencies
/// and theirs, for this platform (dev-dependencies are the tests'). `tracing` is a facade
/// and allowed; `libc` is not banned, since pure crates reach it (`cpufeatures` on ARM).
#[test]
fn core_crate_has_no_io_dependencies() {
    #[rustfmt::skip]
    const BANNED: &[&str] = &[
        // async runtimes and sockets
        "tokio", "tokio-util", "tokio-stream", "mio", "socket2", "async-std", "smol",
        // HTTP, gRPC, TLS
        "hyper", "hyper-util", "h2", "http-body-util", "tower", "tower-http", "axum", "tonic",
        "reqwest", "ureq", "curl", "rustls", "tokio-rustls", "openssl",
        // the API server, containerd, the kernel
        "kube", "kube-client", "kube-runtime", "containerd-client", "nix", "aya", "inotify",
    ];
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = Command::new(rustc).arg("-vV").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    let host = version.lines().find_map(|l| l.strip_prefix("host: ")).unwrap().trim();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--filter-platform", host])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: BTreeMap<&str, &serde_json::Value> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let core = names.iter().find(|(_, name)| **name == "outpost-core").map(|(id, _)| *id).unwrap();
    // Each package reached, with the package it was reached from (to name the path).
    let mut reached = BTreeMap::from([(core, core)]);
    let mut queue = vec![core];
    while let Some(id) = queue.pop() {
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null());
            let pkg = dep["pkg"].as_str().unwrap();
            if normal && !reached.contains_key(pkg) {
                reached.insert(pkg, id);
                queue.push(pkg);
            }
        }
    }
    let chain = |from| {
        let mut id = from;
        let mut chain = vec![names[id]];
        while id != core {
            id = reached[id];
            chain.push(names[id]);
        }
        chain.reverse();
        chain.join(" → ")
    };
    let banned: Vec<String> = reached
        .keys()
        .filter(|id| BANNED.iter().any(|b| *b == names[*id]))
        .map(|id| chain(*id))
        .collect();
    assert!(banned.is_empty(), "outpost-core must stay pure but depends on: {banned:#?}");
}

/// A1: the README's pod-spec field table is admission's, field for field and class for
/// class, and its counts are right.
#[test]
fn readme_pod_spec_fields_are_admissions() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let table = readme
        .split("<!-- pod-spec-fields:start -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- pod-spec-fields:end -->").next())
        .expect("README.md has the pod-spec-fields table between its markers");
    let readme_rows: Vec<(String, String)> = table
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let field = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((field.to_owned(), (*cells.get(2)?).to_owned()))
        })
        .collect();
    let module_rows: Vec<(String, String)> = outpost_core::admission::fields()
        .map(|(field, class)| (field, class.as_str().to_owned()))
        .collect();
    assert_eq!(readme_rows, module_rows, "README.md's table differs from admission's");

    let count = |class: &str| module_rows.iter().filter(|(_, c)| c == class).count();
    let summary = format!(
        "{} fields: {} supported, {} refused, {} ignored.",
        module_rows.len(),
        count("supported"),
        count("refused"),
        count("ignored")
    );
    assert!(readme.contains(&summary), "README.md should say: {summary}");
}
