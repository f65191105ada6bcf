//! Repository-wide rules, checked by a plain `cargo test` (as rust-analyzer's tidy does).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Layering (DESIGN.md): the modules under the tasks that talk to the outside world
/// (the sources, the runtime, eBPF, the merge) and the shared services never import the
/// tasks above them: the sync writers, the local API, the commands, the CLI.
#[test]
fn lower_layers_do_not_import_upper_ones() {
    let offenders = upward_imports(&[
        "source",
        "runtime",
        "ebpf",
        "podconfig",
        "apiserver",
        "metrics",
        "status",
    ]);
    assert!(offenders.is_empty(), "imports running back up the layers:\n{}", offenders.join("\n"));
}

/// The pod workers (and the eviction manager beside them) publish what `sync` reads;
/// they do not import it.
#[test]
fn the_worker_does_not_import_upper_layers() {
    let offenders = upward_imports(&["worker", "eviction"]);
    assert!(offenders.is_empty(), "imports running back up the layers:\n{}", offenders.join("\n"));
}

/// The top-level modules a lower layer must not import.
const UPPER: &[&str] = &["sync", "api", "commands", "cli"];

/// `file:line: crate::<module>` for each import of an [`UPPER`] module in the agent's
/// top-level modules `modules` (`foo.rs` and everything under `foo/`).
fn upward_imports(modules: &[&str]) -> Vec<String> {
    let src = root().join("agent/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut offenders = Vec::new();
    for path in files {
        let relative = path.strip_prefix(&src).unwrap().with_extension("");
        let module: Vec<String> =
            relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if !module.first().is_some_and(|m| modules.contains(&m.as_str())) {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        // Comments out (doc links are not imports); line breaks kept, for line numbers.
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        for (at, name) in root_paths(&code, module.len()) {
            if UPPER.contains(&name.as_str()) {
                let line = code[..at].matches('\n').count() + 1;
                let shown = path.strip_prefix(root()).unwrap_or(&path).display();
                offenders.push(format!("{shown}:{line}: crate::{name}"));
            }
        }
    }
    offenders
}

/// The crate's top-level items that `code` names by a path from the crate root, with
/// their byte offsets: `crate::a::..`, `crate::{a, b::c}`, and `super::` chains that
/// climb to the root from a module `depth` levels down (`super::super::a` in
/// `source/api/reflector.rs`).
fn root_paths(code: &str, depth: usize) -> Vec<(usize, String)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (start, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
        if code[..start].chars().next_back().is_some_and(|c| ident(c) || c == ':') {
            continue; // inside a longer path (`super::super::`, `$crate::` is fine)
        }
        let mut rest = start;
        if code[start..].starts_with("super::") {
            let mut climbs = 0;
            while code[rest..].starts_with("super::") {
                climbs += 1;
                rest += "super::".len();
            }
            if climbs < depth {
                continue; // stays inside the top-level module
            }
        } else {
            rest += "crate::".len();
        }
        let mut names = Vec::new();
        if code[rest..].starts_with('{') {
            // A group: the first segment of each item at the group's top level.
            let mut level = 0;
            let mut item = true;
            for (i, c) in code[rest..].char_indices() {
                match c {
                    '{' => {
                        level += 1;
                        item = level == 1;
                        continue;
                    }
                    '}' if level == 1 => break,
                    '}' => level -= 1,
                    ',' if level == 1 => item = true,
                    c if item && ident(c) => {
                        names.push(rest + i);
                        item = false;
                    }
                    c if !c.is_whitespace() => item = false,
                    _ => {}
                }
            }
        } else {
            names.push(rest);
        }
        for at in names {
            let name: String = code[at..].chars().take_while(|c| ident(*c)).collect();
            found.push((at, name));
        }
    }
    found
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

/// The file and URL sources' state machines decide and do nothing (STYLE.md 13): no IO,
/// no async runtime, no clock of their own (the time comes with each input). Their
/// executors (`source/file.rs`, `source/url.rs`) do the rest.
#[test]
fn source_state_machines_do_no_io() {
    const BANNED: &[&str] =
        &["tokio", "std::fs", "std::io", "std::net", "std::process", "std::thread", "::now()"];
    let mut files = Vec::new();
    for source in ["file", "url"] {
        let dir = root().join("agent/src/source").join(source);
        files.push(dir.join("state.rs"));
        rust_files(&dir.join("state"), &mut files);
    }
    let mut offenders = Vec::new();
    for path in files.iter().filter(|p| !p.ends_with("tests.rs")) {
        let text = fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for banned in BANNED.iter().filter(|b| code.contains(*b)) {
                let shown = path.strip_prefix(root()).unwrap_or(path).display();
                offenders.push(format!("{shown}:{}: {banned}", n + 1));
            }
        }
    }
    assert!(files.len() >= 4, "the state machines moved: {files:?}");
    assert!(offenders.is_empty(), "IO in a source's state machine:\n{}", offenders.join("\n"));
}
