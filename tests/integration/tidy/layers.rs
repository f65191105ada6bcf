//! The agent's layers, at two scales. Every crate under `agent/` has a rank, and a crate
//! depends only on crates of lower ranks (the compiler then refuses an import back up).
//! Within the agent's own crate, every top-level module of `agent/src` has a rank, and a
//! module imports only modules of lower ranks (so the module graph has no cycle, and a
//! module can move into a crate of its own below the ones that use it). An import is a
//! path from the crate root (`crate::x`, `crate::{x, y}`, or `super::` climbing to the
//! root), in code or in tests, comments aside.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::{root, rust_files};

/// The crates under `agent/` by rank, lowest first: a crate depends only on crates of
/// lower ranks (dev-dependencies aside: tests may use any crate). Crates of one rank do
/// not depend on each other. A new crate gets a rank here before it can land.
const CRATES: &[&[&str]] = &[
    // Pure: the core; the parsers of what the agent reads from outside. The container
    // logger, a small binary of its own (std only).
    &["outpost-core", "outpost-formats", "outpost-container-log"],
    // The OCI spec builder (pure); what the agent reads about its host from the kernel;
    // kubelet's node-local gRPC APIs, generated.
    &["outpost-runtime-spec", "outpost-host", "outpost-kubelet-api"],
    // The container runtime.
    &["outpost-runtime"],
    // The agent: the library whose modules `RANKS` orders, and the binary.
    &["outpost"],
];

/// The top-level modules of the agent library by rank, lowest first. Modules of one
/// rank do not import each other. A new module gets a rank here before it can land.
const RANKS: &[&[&str]] = &[
    // JSON through one `serde_json::Value` (the size ledger: one copy of each type's
    // decoding code).
    &["json"],
    // Leaves: signals, file permissions, the pods' status store, logind's shutdowns, the
    // ephemeral containers `outpost debug` adds to static pods.
    &[
        "shutdown",
        "permissions",
        "status",
        "node_shutdown",
        "insecure_skip_verify",
        "task",
        "debug_containers",
    ],
    // Settings; the API server's shared services; checkpoints; the heap profiler and
    // malloc's trim after the pods' bursts of status changes.
    &["config", "apiserver", "checkpoint", "heap_profile", "memory_release"],
    // The manifest audit, the agent's own logs, systemd notifications, the node's
    // certificates (on the API server's client).
    &["audit", "logging", "systemd", "certificates", "containerd"],
    // The kernel's eBPF events; the pod sources.
    &["ebpf", "source"],
    // The merge task; the API objects API pods refer to; the device manager.
    &["podconfig", "objects", "devices"],
    // The garbage collector.
    &["gc"],
    // The pod workers.
    &["worker"],
    // The eviction manager (it asks the workers to evict); the sync to the API server
    // (it reads what the workers publish).
    &["eviction", "sync"],
    // The node's stats (the pods' cgroups, /proc, the filesystems); the pod side built
    // as one component (containerd, the pod workers, eviction, gc, the images dir).
    &["stats", "pod_side"],
    // The scrape-time metrics collectors (they read every component's state; the pods'
    // usage through the stats' reading of their cgroups).
    &["metrics"],
    // The local HTTP API.
    &["api"],
    // The command line's definitions.
    &["cli"],
    // The subcommands, `outpost run`'s composition root among them.
    &["commands"],
];

fn rank_of(module: &str) -> Option<usize> {
    RANKS.iter().position(|rank| rank.contains(&module))
}

/// `agent/src/<module>.rs` and `agent/src/<module>/`: the top-level modules there are.
fn top_modules() -> Vec<String> {
    let src = root().join("agent/src");
    let mut modules: Vec<String> = fs::read_dir(&src)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            Some(name.strip_suffix(".rs").unwrap_or(&name).to_owned())
        })
        .filter(|m| m != "main" && m != "lib")
        .collect();
    modules.sort();
    modules.dedup();
    modules
}

/// The book's tables of ranks (`docs/src/design/data-path.md`) are these: the crates'
/// and the modules'.
#[test]
fn the_books_layer_ranks_are_the_tables() {
    let page = super::book::page("design/data-path.md");
    for (marker, ranks, name) in
        [("crate-ranks", CRATES, "CRATES"), ("layer-ranks", RANKS, "RANKS")]
    {
        let table = page
            .split(&format!("<!-- {marker}:start -->"))
            .nth(1)
            .and_then(|rest| rest.split(&format!("<!-- {marker}:end -->")).next())
            .unwrap_or_else(|| {
                panic!("design/data-path.md has the {marker} table between its markers")
            });
        let rows: Vec<(usize, Vec<String>)> = super::book::table_rows(table)
            .into_iter()
            .skip(1)
            .map(|cells| {
                let rank = cells[0].parse().unwrap_or_else(|_| panic!("rank {:?}", cells[0]));
                let names = cells[1].split(',').map(|m| m.trim().trim_matches('`').to_owned());
                (rank, names.collect())
            })
            .collect();
        let expected: Vec<(usize, Vec<String>)> = ranks
            .iter()
            .enumerate()
            .map(|(rank, names)| (rank, names.iter().map(|m| (*m).to_owned()).collect()))
            .collect();
        assert_eq!(rows, expected, "the book's {marker} table differs from {name}");
    }
}

/// Every crate under `agent/` has a rank in [`CRATES`], each one listed there exists, and
/// a crate's dependencies are of lower ranks: `crate (rank) depends on other (rank)`.
#[test]
fn crates_depend_only_on_lower_ranks() {
    let crate_rank = |name: &str| CRATES.iter().position(|rank| rank.contains(&name));
    let metadata = super::cargo_metadata();
    let agent = root().join("agent");
    let members: Vec<&serde_json::Value> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["manifest_path"].as_str().is_some_and(|m| Path::new(m).starts_with(&agent)))
        .collect();
    let names: Vec<&str> = members.iter().map(|p| p["name"].as_str().unwrap()).collect();
    let unranked: Vec<&&str> = names.iter().filter(|n| crate_rank(n).is_none()).collect();
    assert!(unranked.is_empty(), "crates under agent/ without a rank in CRATES: {unranked:?}");
    let gone: Vec<&&str> =
        CRATES.iter().flat_map(|r| r.iter()).filter(|c| !names.contains(*c)).collect();
    assert!(gone.is_empty(), "CRATES names crates that are not under agent/: {gone:?}");
    let mut offenders = Vec::new();
    for package in members {
        let name = package["name"].as_str().unwrap();
        let Some(rank) = crate_rank(name) else { continue };
        for dep in package["dependencies"].as_array().unwrap() {
            let normal_or_build = dep["kind"].as_str() != Some("dev");
            let dep_name = dep["name"].as_str().unwrap();
            if let Some(other) = crate_rank(dep_name).filter(|_| normal_or_build)
                && other >= rank
            {
                offenders
                    .push(format!("{name} (rank {rank}) depends on {dep_name} (rank {other})"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "crate dependencies running sideways or back up (CRATES in {}):\n{}",
        file!(),
        offenders.join("\n")
    );
}

#[test]
fn every_top_module_has_a_rank() {
    let missing: Vec<String> = top_modules().into_iter().filter(|m| rank_of(m).is_none()).collect();
    assert!(missing.is_empty(), "top-level modules without a rank in RANKS: {missing:?}");
    let listed: Vec<&str> = RANKS.iter().flat_map(|r| r.iter().copied()).collect();
    let gone: Vec<&&str> =
        listed.iter().filter(|m| !top_modules().contains(&(**m).to_owned())).collect();
    assert!(gone.is_empty(), "RANKS names modules that no longer exist: {gone:?}");
}

/// No module imports one of its own rank or above: `file:line: module (rank) imports
/// crate::other (rank)` for each.
#[test]
fn modules_import_only_lower_ranks() {
    let offenders = upward_imports();
    assert!(
        offenders.is_empty(),
        "imports running sideways or back up the layers (RANKS in {}):\n{}",
        file!(),
        offenders.join("\n")
    );
}

fn upward_imports() -> Vec<String> {
    let src = root().join("agent/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut offenders = Vec::new();
    for path in files {
        let relative = path.strip_prefix(&src).unwrap().with_extension("");
        let module: Vec<String> =
            relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let Some(top) = module.first() else { continue };
        let Some(rank) = rank_of(top) else { continue };
        let text = fs::read_to_string(&path).unwrap();
        // Comments out (doc links are not imports); line breaks kept, for line numbers.
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        for (at, name) in root_paths(&code, module.len()) {
            if name == *top {
                continue;
            }
            let Some(other) = rank_of(&name) else { continue };
            if other >= rank {
                let line = code[..at].matches('\n').count() + 1;
                let shown = path.strip_prefix(root()).unwrap_or(&path).display();
                offenders.push(format!(
                    "{shown}:{line}: {top} (rank {rank}) imports crate::{name} (rank {other})"
                ));
            }
        }
    }
    offenders
}

/// The module graph, by rank, as the imports draw it (printed by the test below with
/// `--nocapture`: the figures of a closing note).
fn edges() -> BTreeMap<String, Vec<String>> {
    let src = root().join("agent/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in files {
        let relative = path.strip_prefix(&src).unwrap().with_extension("");
        let module: Vec<String> =
            relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let Some(top) = module.first().filter(|m| rank_of(m).is_some()) else { continue };
        let text = fs::read_to_string(&path).unwrap();
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        let out = edges.entry(top.clone()).or_default();
        for (_, name) in root_paths(&code, module.len()) {
            if name != *top && rank_of(&name).is_some() && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    edges
}

#[test]
fn the_module_graph_is_printed_by_rank() {
    let edges = edges();
    let total: usize = edges.values().map(Vec::len).sum();
    println!("{} top modules, {total} edges", top_modules().len());
    for (rank, modules) in RANKS.iter().enumerate() {
        for module in *modules {
            let mut to = edges.get(*module).cloned().unwrap_or_default();
            to.sort();
            println!("{rank:>2} {module} -> {}", to.join(", "));
        }
    }
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
