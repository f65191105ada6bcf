//! Repository-wide rules, checked by a plain `cargo test` (as rust-analyzer's tidy does).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) mod book;
mod fields;
mod layers;
mod lexer;

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

/// The files of modules declared `#[cfg(test)]` (`tests.rs`, the fakes): what they name
/// is never registered in the agent.
fn test_only_modules(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut test_only = BTreeSet::new();
    for path in files {
        let text = fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            if pair[0] != "#[cfg(test)]" {
                continue;
            }
            let declared = pair[1].trim_start_matches("pub(crate) ").trim_start_matches("pub ");
            let Some(name) = declared.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) else {
                continue;
            };
            let dir = match path.file_stem().and_then(|s| s.to_str()) {
                Some("lib" | "main") => path.parent().unwrap().to_path_buf(),
                Some(stem) => path.parent().unwrap().join(stem),
                None => continue,
            };
            test_only.insert(dir.join(format!("{name}.rs")));
        }
    }
    test_only
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

/// The crates that do no IO: the pure core, the OCI spec builder, and the parsers of what
/// the agent reads from outside.
const PURE_CRATES: &[&str] = &["outpost-core", "outpost-runtime-spec", "outpost-formats"];

/// The pure crates depend on no async runtime, network, HTTP, TLS, container runtime or
/// kernel interface (STYLE.md 2), checked on the resolved graph: their normal dependencies
/// and theirs, for this platform (dev-dependencies are the tests'). `tracing` is a facade
/// and allowed; `libc` is not banned, since pure crates reach it (`cpufeatures` on ARM).
#[test]
fn pure_crates_have_no_io_dependencies() {
    #[rustfmt::skip]
    const BANNED: &[&str] = &[
        // async runtimes and sockets
        "tokio", "tokio-util", "tokio-stream", "mio", "socket2", "async-std", "smol",
        // HTTP, gRPC, TLS
        "hyper", "hyper-util", "h2", "http-body-util", "tower", "tower-http", "axum", "tonic",
        "reqwest", "ureq", "curl", "rustls", "tokio-rustls", "openssl",
        // the API server, containerd, the kernel
        "kube", "kube-client", "kube-runtime", "containerd-client", "nix", "aya", "inotify",
        // Outpost's own crates that do IO
        "outpost", "outpost-host", "outpost-runtime", "outpost-container-log",
    ];
    let metadata = cargo_metadata();
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
    let mut banned = Vec::new();
    for pure in PURE_CRATES {
        let start = names
            .iter()
            .find(|(_, name)| **name == *pure)
            .map(|(id, _)| *id)
            .unwrap_or_else(|| panic!("{pure} is not a package of the workspace"));
        // Each package reached, with the package it was reached from (to name the path).
        let mut reached = BTreeMap::from([(start, start)]);
        let mut queue = vec![start];
        while let Some(id) = queue.pop() {
            for dep in nodes[id]["deps"].as_array().unwrap() {
                let normal =
                    dep["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null());
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
            while id != start {
                id = reached[id];
                chain.push(names[id]);
            }
            chain.reverse();
            chain.join(" → ")
        };
        banned.extend(
            reached
                .keys()
                .filter(|id| BANNED.iter().any(|b| *b == names[*id]))
                .map(|id| chain(*id)),
        );
    }
    assert!(
        banned.is_empty(),
        "the pure crates {PURE_CRATES:?} must stay pure but depend on: {banned:#?}"
    );
}

/// `cargo metadata` of the workspace, its dependency graph resolved for this platform.
fn cargo_metadata() -> serde_json::Value {
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
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `#[needs(...)]` only ignores a test when it expands before `#[test]` does: it stands
/// above the test attribute, never below it.
#[test]
fn needs_comes_before_the_test_attribute() {
    let mut files = Vec::new();
    rust_files(&root().join("tests"), &mut files);
    let mut offenders = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.trim_start().starts_with("#[needs(")
                && !line.trim_start().starts_with("#[outpost_tests::needs(")
            {
                continue;
            }
            let above = lines[..i].iter().rev().take_while(|l| l.trim_start().starts_with("#["));
            if above.into_iter().any(|l| l.contains("test]") || l.contains("::test(")) {
                offenders.push(format!(
                    "{}:{}",
                    path.strip_prefix(root()).unwrap().display(),
                    i + 1
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "#[needs] below a test attribute (it must come first): {offenders:?}"
    );
}

/// A1: the book's pod-spec field table is admission's, field for field and class for
/// class, and its counts are right.
#[test]
fn book_pod_spec_fields_are_admissions() {
    const PAGE: &str = "reference/pod-spec-fields.md";
    let page = book::page(PAGE);
    let table = page
        .split("<!-- pod-spec-fields:start -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- pod-spec-fields:end -->").next())
        .unwrap_or_else(|| panic!("{PAGE} has the pod-spec-fields table between its markers"));
    let book_rows: Vec<(String, String)> = table
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
    assert_eq!(book_rows, module_rows, "{PAGE}'s table differs from admission's");

    let count = |class: &str| module_rows.iter().filter(|(_, c)| c == class).count();
    let summary = format!(
        "{} fields: {} supported, {} refused, {} ignored.",
        module_rows.len(),
        count("supported"),
        count("refused"),
        count("ignored")
    );
    assert!(page.contains(&summary), "{PAGE} should say: {summary}");
}

/// The rule families of SEMANTICS.md and BENCHMARKS.md, with their numbers: an id cited
/// in a comment or a test name must be one of these, and the book must have its section.
/// The book's own rules extend them: X (ephemeral containers), O5 (the agent's stop).
const RULES: &[(char, u32)] = &[
    ('S', 12),
    ('M', 11),
    ('R', 6),
    ('O', 5),
    ('P', 5),
    ('I', 4),
    ('L', 2),
    ('A', 1),
    ('Q', 2),
    ('E', 2),
    ('G', 1),
    ('V', 4),
    ('K', 6),
    ('N', 3),
    ('J', 3),
    ('D', 6),
    ('X', 4),
    ('B', 14),
];

/// Tokens that look like rule ids but are not: percentiles (`fn p99_below`).
const NOT_RULES: &[&str] = &["P50", "P90", "P95", "P99"];

/// Every rule id cited in a comment (`// M9`, `/// S5 and S6`) or a test's name
/// (`fn m10_...`, `fn e1_e2_...`; the benchmarks' `fn b2_start`) in the Rust sources
/// has a section in the book, an anchor `{#m9}`. An id past its family's last rule has
/// none, so a typo fails too. `L1` is both a rule and the benchmarks' load figure;
/// its anchor is the rule's.
#[test]
fn every_cited_rule_has_a_section_in_the_book() {
    let anchors = book::anchors();
    let mut files = Vec::new();
    for dir in ["agent", "tests", "xtask", "fuzz"] {
        rust_files(&root().join(dir), &mut files);
    }
    let mut cited = 0;
    let mut missing = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).unwrap();
        let shown = path.strip_prefix(root()).unwrap().display().to_string();
        let bench = shown.starts_with("tests/benches/");
        let mut citations = Vec::new();
        for comment in lexer::lex(&text).comments {
            for (offset, id) in rule_tokens(&comment.text) {
                let line = comment.line + comment.text[..offset].matches('\n').count();
                citations.push((line, id));
            }
        }
        citations.extend(test_name_citations(&text, bench));
        for (line, id) in citations {
            cited += 1;
            if !anchors.contains_key(&id.to_lowercase()) {
                missing.push(format!("{shown}:{line}: {id}"));
            }
        }
    }
    assert!(cited > 500, "only {cited} citations found: is the scan broken?");
    assert!(
        missing.is_empty(),
        "rule ids with no section ({{#id}} anchor) in docs/src:\n{}",
        missing.join("\n")
    );
}

/// The rule ids in a comment, with their byte offsets: a family letter and one or two
/// digits, as a whole token (not `0xE1`, `IPv4`, `SocketAddr::V4`, `%A9`).
fn rule_tokens(comment: &str) -> Vec<(usize, String)> {
    let bytes = comment.as_bytes();
    let mut found = Vec::new();
    for (at, c) in comment.char_indices() {
        if !RULES.iter().any(|(family, _)| *family == c) {
            continue;
        }
        let digits = bytes[at + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > 2 {
            continue;
        }
        let before = comment[..at].chars().next_back();
        let after = comment[at + 1 + digits..].chars().next();
        let joined =
            |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || "_:%&\\".contains(c));
        if joined(before) || joined(after) {
            continue;
        }
        let id = &comment[at..at + 1 + digits];
        if !NOT_RULES.contains(&id) {
            found.push((at, id.to_owned()));
        }
    }
    found
}

/// The rule ids a test's name starts with (`fn e1_e2_a_memory_hog...` cites E1 and E2),
/// with their lines; in `tests/benches/` every function's (`fn b2_start`).
fn test_name_citations(text: &str, bench: bool) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let Some(name) = code
            .strip_prefix("pub ")
            .unwrap_or(code)
            .trim_start_matches("async ")
            .strip_prefix("fn ")
        else {
            continue;
        };
        let is_test = lines[i.saturating_sub(8)..i]
            .iter()
            .any(|l| l.trim_start().starts_with("#[") && l.contains("test"));
        if !(is_test || bench) {
            continue;
        }
        let name: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        for part in name.split('_') {
            let mut chars = part.chars();
            let family = chars.next().map(|c| c.to_ascii_uppercase());
            let number = chars.as_str();
            let is_id = family.is_some_and(|f| RULES.iter().any(|(r, _)| *r == f))
                && !number.is_empty()
                && number.len() <= 2
                && number.chars().all(|c| c.is_ascii_digit());
            if !is_id || NOT_RULES.contains(&part.to_uppercase().as_str()) {
                break;
            }
            found.push((i + 1, part.to_uppercase()));
        }
    }
    found
}

/// The rule families' ids and the book agree: every id in [`RULES`] has its section,
/// and the book declares no rule anchor outside them.
#[test]
fn the_book_has_a_section_for_every_rule() {
    let anchors = book::anchors();
    let expected: BTreeSet<String> = RULES
        .iter()
        .flat_map(|(family, n)| {
            (1..=*n).map(move |i| format!("{}{i}", family.to_ascii_lowercase()))
        })
        .collect();
    let missing: Vec<&String> = expected.iter().filter(|id| !anchors.contains_key(*id)).collect();
    assert!(missing.is_empty(), "rules with no section in the book: {missing:?}");
    let looks_like_rule = |id: &str| {
        let mut chars = id.chars();
        chars.next().is_some_and(|c| RULES.iter().any(|(f, _)| f.to_ascii_lowercase() == c))
            && chars.as_str().parse::<u32>().is_ok()
    };
    let stray: Vec<&String> =
        anchors.keys().filter(|id| looks_like_rule(id) && !expected.contains(*id)).collect();
    assert!(stray.is_empty(), "rule anchors in the book that no family has: {stray:?}");
}

/// The configuration reference lists exactly `outpost run`'s flags (clap's, the
/// global `--log-format` included) and the config file's fields (serde's, with the
/// KubeletConfiguration aliases).
#[test]
fn configuration_reference_is_the_settings() {
    use clap::CommandFactory as _;
    const PAGE: &str = "reference/configuration.md";
    let rows = book::table_rows(&book::page(PAGE));
    let cells = |column: usize| -> BTreeSet<String> {
        rows.iter()
            .filter_map(|row| row.get(column))
            .flat_map(|cell| book::code_spans(cell))
            .collect()
    };
    let page_flags: BTreeSet<String> =
        cells(0).into_iter().filter_map(|f| f.strip_prefix("--").map(str::to_owned)).collect();
    let page_fields = cells(1);

    let cli = outpost::cli::Cli::command();
    let run = cli.find_subcommand("run").expect("outpost run");
    let flags: BTreeSet<String> = cli
        .get_arguments()
        .chain(run.get_arguments())
        .filter_map(|arg| arg.get_long())
        .filter(|long| !["help", "version"].contains(long))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        page_flags.difference(&flags).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "{PAGE} names flags that `outpost run` does not have"
    );
    assert_eq!(
        flags.difference(&page_flags).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "`outpost run` flags missing from {PAGE}"
    );

    let fields = settings_fields();
    let missing: Vec<&&str> = fields.iter().filter(|f| !page_fields.contains(**f)).collect();
    assert!(missing.is_empty(), "config file fields missing from {PAGE}: {missing:?}");
    let unknown: Vec<&String> = page_fields
        .iter()
        .filter(|name| {
            let parsed = outpost::config::Settings::from_yaml(&format!("{name}: ~"));
            parsed.is_err_and(|e| e.to_string().contains("unknown field"))
        })
        .collect();
    assert!(unknown.is_empty(), "{PAGE} names config file fields that do not exist: {unknown:?}");
}

/// The field names `Settings`' derived `Deserialize` asks for (serde's `FIELDS`).
fn settings_fields() -> Vec<&'static str> {
    use serde::Deserialize as _;
    match outpost::config::Settings::deserialize(FieldNames) {
        Err(Fields(fields)) => fields.to_vec(),
        Ok(_) => panic!("the field-name probe cannot deserialize anything"),
    }
}

/// A deserializer that answers `deserialize_struct` with the names asked for.
struct FieldNames;

#[derive(Debug)]
struct Fields(&'static [&'static str]);

impl std::fmt::Display for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fields: {:?}", self.0)
    }
}

impl std::error::Error for Fields {}

impl serde::de::Error for Fields {
    fn custom<T: std::fmt::Display>(_: T) -> Fields {
        Fields(&[])
    }
}

impl<'de> serde::Deserializer<'de> for FieldNames {
    type Error = Fields;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
        Err(Fields(&[]))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Fields> {
        Err(Fields(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

/// The metrics reference and the agent's code name the same metric families, checked
/// by name wherever the registration sits:
/// - each name the code registers (a string literal followed by its help text, as in
///   `register("deltas", "Changes the merge emitted", ...)`) makes, behind registry
///   prefixes (`sub_registry_with_prefix("pod")`) and with a unit the registry may add
///   (`_seconds`, `_bytes`), one of the page's families;
/// - each family on the page is made so from a string literal of the agent's code.
///
/// The `metrics` tests also compare a real agent's `/metrics` with the page.
#[test]
fn metrics_reference_is_the_registered_names() {
    let documented = book::documented_metrics();
    assert!(documented.len() > 40, "the metrics page lists only {documented:?}");
    let mut files = Vec::new();
    // The core's `stats` writes the text-format families of `/metrics/resource` and
    // `/metrics/cadvisor`; the rest of the core registers none.
    for crate_src in ["agent/src", "agent/core/src/stats", "agent/runtime/src"] {
        rust_files(&root().join(crate_src), &mut files);
    }
    let mut literals = BTreeSet::new();
    let mut prefixes = BTreeSet::new();
    let mut registered = BTreeMap::new();
    let name_like = |text: &str| {
        text.starts_with(|c: char| c.is_ascii_lowercase())
            && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let test_only = test_only_modules(&files);
    for path in files {
        if test_only.contains(&path)
            || path.ends_with("tests.rs")
            || path.components().any(|c| c.as_os_str() == "tests")
        {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        // Inline test modules come last; what they name is not registered.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let strings = lexer::lex(code).strings;
        for (i, literal) in strings.iter().enumerate() {
            if !name_like(&literal.text) {
                continue;
            }
            // A name written whole (`..._total`, as the text-format families of
            // `/metrics/resource` and `/metrics/cadvisor` are) counts as its family.
            literals.insert(book::family(&literal.text).to_owned());
            if code[..literal.start].trim_end().ends_with("sub_registry_with_prefix(") {
                prefixes.insert(literal.text.clone());
            }
            let help = strings.get(i + 1).is_some_and(|next| {
                code[literal.end..next.start].chars().all(|c| c.is_whitespace() || c == ',')
                    && next.text.starts_with(|c: char| c.is_ascii_uppercase())
            });
            if help {
                let shown = path.strip_prefix(root()).unwrap().display().to_string();
                registered.insert(
                    book::family(&literal.text).to_owned(),
                    format!("{shown}:{}", literal.line),
                );
            }
        }
    }
    assert!(registered.len() > 20, "only {registered:?} found registered: is the scan broken?");
    assert!(prefixes.contains("outpost"), "no `outpost` registry prefix found in {prefixes:?}");
    // `family` is `name` behind up to three prefixes, with or without a unit.
    let makes = |family: &str, name: &str| {
        let mut heads = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = heads
                .iter()
                .flat_map(|head| prefixes.iter().map(move |p| format!("{head}{p}_")))
                .filter(|head| family.starts_with(head.as_str()) && !heads.contains(head))
                .collect();
            heads.extend(longer);
        }
        heads.iter().any(|head| {
            ["", "_seconds", "_bytes"].iter().any(|unit| family == format!("{head}{name}{unit}"))
        })
    };
    let undocumented: Vec<String> = registered
        .iter()
        .filter(|(name, _)| !documented.iter().any(|family| makes(family, name)))
        .map(|(name, at)| format!("{at}: {name}"))
        .collect();
    assert!(
        undocumented.is_empty(),
        "metrics registered but not in docs/src/reference/metrics.md:\n{}",
        undocumented.join("\n")
    );
    let unknown: Vec<&String> = documented
        .iter()
        .filter(|family| !literals.iter().any(|name| makes(family, name)))
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/src/reference/metrics.md lists families no code names: {unknown:?}"
    );
}

/// README.md is the front page: at most 200 lines, and each of its relative links names
/// a file of the repository (the book's pages, mostly; `cargo xtask docs` checks the
/// book's own links).
#[test]
fn readme_is_a_front_page_whose_links_resolve() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines; the rest belongs in the book (docs/)");
    let mut broken = Vec::new();
    for (at, _) in readme.match_indices("](") {
        let target = readme[at + 2..].split(')').next().unwrap_or_default();
        if target.contains("://") || target.starts_with('#') {
            continue;
        }
        let path = target.split('#').next().unwrap_or_default();
        if !root().join(path).exists() {
            broken.push(target.to_owned());
        }
    }
    assert!(broken.is_empty(), "README.md links to files that do not exist: {broken:?}");
}
