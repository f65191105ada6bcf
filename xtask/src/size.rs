//! `cargo xtask size [--check]`: what the arm64 distribution binary weighs, what in it
//! weighs most, and its budget.
//!
//! Without arguments it builds `outpost` for [`TARGET`] with the `size` profile (the
//! `distribution` profile with its symbols kept; the workspace Cargo.toml) through
//! `cargo bloat` (pinned, [`BLOAT_VERSION`], installed once under
//! `$CARGO_HOME/outpost-tools/`), which sizes every function of `.text` and names its
//! crate. A copy stripped as the distribution build strips is the binary's size. It
//! writes the ledger, [`LEDGER`]: the size against [`BUDGET`], `.text` by crate and by
//! Outpost module, and the hash of the inputs it was measured on ([`Inputs`]). It fails
//! when the binary is over the budget.
//!
//! `--check` (CI) reads the committed ledger. When its inputs hash is this checkout's, the
//! recorded size is judged. When not, the ledger is stale: the binary is measured again
//! (a cold cross build with fat LTO, about 8 minutes on 2 cores), the ledger rewritten in
//! the checkout, and that size judged. Either way CI fails when the binary is over the
//! budget; a fresh ledger committed with the change keeps CI's step to a second.
//!
//! The cargo-bloat attribution is by symbol: what LTO inlined is counted in the function
//! it was inlined into, and a generic function's copy is counted in the crate its symbol
//! names (most often the crate that defined the generic).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail, ensure};

use crate::dist::platform::Platform;

/// The arm64 binary's budget (stripped `outpost`, distribution profile).
pub const BUDGET: u64 = 18 * MIB;
const MIB: u64 = 1024 * 1024;
/// The ledger, a page of the book.
pub const LEDGER: &str = "docs/src/reference/size.md";
/// The platform the budget is for: the gateways' most common one.
const TARGET: &str = "aarch64-unknown-linux-gnu";
/// The cargo profile of the measured build: `distribution` with its symbols.
const PROFILE: &str = "size";
/// The pinned cargo-bloat (MIT), from crates.io.
const BLOAT_VERSION: &str = "0.12.1";
/// What is hashed as the binary's inputs (tracked and untracked-but-not-ignored files).
const INPUT_PATHS: &[&str] =
    &["Cargo.toml", "Cargo.lock", ".cargo", "rust-toolchain.toml", "agent", "agent-ebpf"];
/// Rows of the crate table; the rest are summed in one row.
const CRATE_ROWS: usize = 30;
/// Rows of the module table.
const MODULE_ROWS: usize = 40;
/// The marker line carrying the ledger's figures for `--check`.
const MARKER: &str = "<!-- xtask size:";

const USAGE: &str = "usage: cargo xtask size [--check]";

pub fn run(args: &[String]) -> anyhow::Result<()> {
    match args {
        [] => {
            let root = crate::project_root();
            let measured = measure(&root, inputs(&root)?)?;
            write_ledger(&measured)?;
            judge(measured.stripped)
        }
        [check] if check == "--check" => check_ledger(),
        _ => bail!("`size`: unknown arguments {args:?}; {USAGE}"),
    }
}

/// CI's step: the committed ledger's size if it is of these inputs, else a new measure.
pub fn check_ledger() -> anyhow::Result<()> {
    let root = crate::project_root();
    let path = root.join(LEDGER);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let recorded = Recorded::parse(&text)
        .with_context(|| format!("{} has no `{MARKER}` line; run `cargo xtask size`", LEDGER))?;
    let inputs = inputs(&root)?;
    if recorded.inputs == inputs.hash {
        println!("size: {LEDGER} is of this checkout (inputs {})", short(&inputs.hash));
        return judge(recorded.bytes);
    }
    println!(
        "size: {LEDGER} is stale (measured on inputs {}, this checkout's are {}): measuring \
         again; run `cargo xtask size` and commit the ledger to skip this",
        short(&recorded.inputs),
        short(&inputs.hash)
    );
    let measured = measure(&root, inputs)?;
    write_ledger(&measured)?;
    judge(measured.stripped)
}

/// Fails when `bytes` is over [`BUDGET`].
fn judge(bytes: u64) -> anyhow::Result<()> {
    if bytes > BUDGET {
        bail!(
            "the arm64 binary is {} ({bytes} bytes), over its budget of {} by {} bytes; \
             {LEDGER} shows what weighs most",
            mib(bytes),
            mib(BUDGET),
            bytes - BUDGET
        );
    }
    println!("size: {} ({bytes} bytes), within the budget of {}", mib(bytes), mib(BUDGET));
    Ok(())
}

/// One measure of the binary.
#[derive(Debug, Clone, PartialEq)]
struct Measured {
    /// The stripped binary's size: the distribution binary's.
    stripped: u64,
    /// The `.text` section's size.
    text: u64,
    /// `.text` by crate, from cargo-bloat (`None`: a symbol it could not attribute).
    functions: Vec<Function>,
    /// `rustc -V`.
    rustc: String,
    /// [`Inputs::hash`] when it was measured.
    inputs: String,
}

#[derive(Debug, Clone, PartialEq)]
struct Function {
    krate: Option<String>,
    name: String,
    size: u64,
}

/// Builds, sizes and strips the binary of the checkout whose `inputs` are given.
fn measure(root: &Path, inputs: Inputs) -> anyhow::Result<Measured> {
    let platform = Platform::new(TARGET, std::env::consts::ARCH)?;
    if platform.cross {
        crate::dist::prepare_cross(&platform)?;
    }
    let bloat = ensure_bloat()?;
    let started = Instant::now();
    let mut command = Command::new(&bloat);
    command.args(["bloat", "--profile", PROFILE, "--target", TARGET]);
    command.args(["-p", "outpost", "--bin", "outpost", "-n", "0", "--message-format", "json"]);
    command.current_dir(root).envs(platform.cross_env()).stderr(Stdio::inherit());
    crate::remove_cargo_run_env(&mut command);
    let shown = crate::show(&command);
    println!("$ {shown}");
    let output = command.output().with_context(|| format!("cannot run `{shown}`"))?;
    ensure!(output.status.success(), "`{shown}` failed: {}", output.status);
    let (text, functions) =
        parse_bloat(&output.stdout).context("cannot read cargo-bloat's JSON")?;
    println!("size: built and sized in {:.0} s", started.elapsed().as_secs_f64());

    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), |dir| root.join(PathBuf::from(dir)));
    let binary = target_dir.join(TARGET).join(PROFILE).join("outpost");
    let stripped = binary.with_extension("stripped");
    let mut strip = Command::new(platform.cross_tool("strip"));
    strip.arg("--strip-all").arg("-o").arg(&stripped).arg(&binary);
    crate::run(strip)?;
    let bytes = std::fs::metadata(&stripped)
        .with_context(|| format!("cannot stat {}", stripped.display()))?
        .len();
    Ok(Measured { stripped: bytes, text, functions, rustc: inputs.rustc, inputs: inputs.hash })
}

/// `.text`'s size and its functions, from `cargo bloat --message-format json`.
fn parse_bloat(json: &[u8]) -> anyhow::Result<(u64, Vec<Function>)> {
    let root: serde_json::Value = serde_json::from_slice(json)?;
    let text = root["text-section-size"].as_u64().context("no `text-section-size`")?;
    let functions = root["functions"]
        .as_array()
        .context("no `functions`")?
        .iter()
        .map(|f| {
            Ok(Function {
                // `serde_json?`: a guess, counted in the crate guessed.
                krate: f["crate"].as_str().map(|c| c.trim_end_matches('?').to_owned()),
                name: f["name"].as_str().context("a function without `name`")?.to_owned(),
                size: f["size"].as_u64().context("a function without `size`")?,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((text, functions))
}

/// What the binary is built from.
struct Inputs {
    /// `rustc -V`.
    rustc: String,
    /// The SHA-256 of `rustc -V`'s output and the path and content of every file under
    /// [`INPUT_PATHS`] that git tracks or would track.
    hash: String,
}

fn inputs(root: &Path) -> anyhow::Result<Inputs> {
    let mut list = Command::new("git");
    list.args(["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"]);
    list.args(INPUT_PATHS).current_dir(root);
    let listed = list.output().context("cannot run `git ls-files`")?;
    ensure!(listed.status.success(), "`git ls-files` failed: {}", listed.status);
    let mut files: Vec<&[u8]> =
        listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()).collect();
    files.sort_unstable();
    files.dedup();
    let rustc = Command::new("rustc").arg("-V").output().context("cannot run `rustc -V`")?;
    let mut all = rustc.stdout.clone();
    for file in files {
        let name = String::from_utf8_lossy(file);
        let path = root.join(name.as_ref());
        // Listed by git but deleted in the checkout: not an input any more.
        let Ok(bytes) = std::fs::read(&path) else { continue };
        all.extend_from_slice(file);
        all.push(0);
        all.extend_from_slice(crate::sha256(&bytes).as_bytes());
        all.push(b'\n');
    }
    let rustc = String::from_utf8_lossy(&rustc.stdout).trim().to_owned();
    Ok(Inputs { rustc, hash: crate::sha256(&all) })
}

/// The cargo-bloat binary: the pinned version under `$CARGO_HOME/outpost-tools/`,
/// installed there first if it is missing.
fn ensure_bloat() -> anyhow::Result<PathBuf> {
    let tools = crate::docs::cargo_home()?
        .join("outpost-tools")
        .join(format!("cargo-bloat-{BLOAT_VERSION}"));
    let bin = tools.join("bin/cargo-bloat");
    if bin.is_file() {
        return Ok(bin);
    }
    println!("size: installing cargo-bloat {BLOAT_VERSION} into {} (once)", tools.display());
    let version = format!("={BLOAT_VERSION}");
    let mut install =
        crate::cargo(&["install", "cargo-bloat", "--version", &version, "--locked", "--root"]);
    install.arg(&tools);
    // A temporary target directory of its own: the workspace's is not for tools.
    install.env_remove("CARGO_TARGET_DIR");
    crate::run(install)?;
    Ok(bin)
}

fn write_ledger(measured: &Measured) -> anyhow::Result<()> {
    let path = crate::project_root().join(LEDGER);
    crate::write_atomically(&path, render(measured).as_bytes())?;
    println!("size: wrote {}", path.display());
    Ok(())
}

/// What `--check` reads back from a ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Recorded {
    bytes: u64,
    inputs: String,
}

impl Recorded {
    /// The figures of the [`MARKER`] line: `<!-- xtask size: bytes=N inputs=HEX -->`.
    fn parse(ledger: &str) -> Option<Recorded> {
        let line = ledger.lines().find_map(|l| l.trim().strip_prefix(MARKER))?;
        let line = line.trim().strip_suffix("-->")?;
        let mut bytes = None;
        let mut inputs = None;
        for field in line.split_whitespace() {
            match field.split_once('=') {
                Some(("bytes", value)) => bytes = value.parse().ok(),
                Some(("inputs", value)) => inputs = Some(value.to_owned()),
                _ => {}
            }
        }
        Some(Recorded { bytes: bytes?, inputs: inputs? })
    }
}

/// The Outpost crate and module a function's code belongs to (`outpost::pod`,
/// `outpost_core::merge`): the first path in its symbol that starts at an Outpost crate,
/// so an impl of a foreign trait (`<outpost::pod::Worker as Future>::poll`) counts in
/// Outpost's module. `None` for code with no Outpost path.
fn module_of(symbol: &str) -> Option<String> {
    let bytes = symbol.as_bytes();
    let mut at = 0;
    while let Some(found) = symbol[at..].find("outpost") {
        let start = at + found;
        let starts_path =
            start == 0 || matches!(bytes[start - 1], b'<' | b'&' | b' ' | b'(' | b'[');
        let rest = &symbol[start..];
        let krate_end =
            rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let (krate, tail) = rest.split_at(krate_end);
        if starts_path && is_outpost(krate) {
            let module = tail
                .strip_prefix("::")
                .map(|t| {
                    t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or("")
                })
                .filter(|m| {
                    !m.is_empty() && m.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                });
            return Some(match module {
                Some(module) => format!("{krate}::{module}"),
                None => krate.to_owned(),
            });
        }
        at = start + krate_end.max(1);
    }
    None
}

/// Sums sizes by key, largest first (ties by key).
fn ranked<'a>(items: impl Iterator<Item = (String, u64)> + 'a) -> Vec<(String, u64)> {
    let mut sums: BTreeMap<String, u64> = BTreeMap::new();
    for (key, size) in items {
        *sums.entry(key).or_default() += size;
    }
    let mut rows: Vec<_> = sums.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    rows
}

/// The ledger page.
fn render(m: &Measured) -> String {
    let crates = ranked(
        m.functions.iter().map(|f| (f.krate.clone().unwrap_or_else(|| "[unknown]".into()), f.size)),
    );
    let modules = ranked(m.functions.iter().filter_map(|f| Some((module_of(&f.name)?, f.size))));
    let outpost: u64 = crates.iter().filter(|(name, _)| is_outpost(name)).map(|(_, s)| s).sum();
    let verdict = if m.stripped <= BUDGET { "within" } else { "**over**" };
    let mut page = String::new();
    page.push_str("# Binary size\n\n");
    page.push_str(&format!("{MARKER} bytes={} inputs={} -->\n\n", m.stripped, m.inputs));
    page.push_str(
        "The arm64 agent as releases ship it (`cargo xtask dist --target \
         aarch64-unknown-linux-gnu`), measured by `cargo xtask size`. This page is written by \
         that task: do not edit it by hand. CI (`cargo xtask size --check`) fails when the \
         binary is over its budget, and measures it again when this page is not of the \
         checkout's sources.\n\n",
    );
    page.push_str("| | |\n|---|---|\n");
    page.push_str(&format!(
        "| Binary, stripped | {} bytes ({}), {verdict} the budget |\n",
        thousands(m.stripped),
        mib(m.stripped)
    ));
    page.push_str(&format!("| Budget | {} bytes ({}) |\n", thousands(BUDGET), mib(BUDGET)));
    page.push_str(&format!("| `.text` | {} bytes ({}) |\n", thousands(m.text), mib(m.text)));
    page.push_str(&format!(
        "| Outpost's own crates in `.text` | {} bytes ({}) |\n",
        thousands(outpost),
        percent(outpost, m.text)
    ));
    page.push_str(&format!(
        "| Measured with | `{}`, cargo-bloat {BLOAT_VERSION}, profile `{PROFILE}` |\n",
        m.rustc
    ));
    page.push_str(&format!("| Inputs (SHA-256) | `{}` |\n\n", m.inputs));
    page.push_str(
        "Code is counted where cargo-bloat puts its symbol: what LTO inlined counts in its \
         caller, a generic function's copies mostly in the crate that made them (the Pod's \
         decoder made by Outpost's API client counts in `outpost`), and a guess of \
         cargo-bloat's in the crate it guessed. `[unknown]` is code without a Rust crate \
         in its symbol: C (ring's), the C library's start-up, and the sequences LLVM's \
         outliner shares between functions at opt-level \"z\" (`OUTLINED_FUNCTION_*`).\n\n",
    );
    page.push_str(&format!("## `.text` by crate (top {CRATE_ROWS})\n\n"));
    page.push_str("| Crate | Bytes | Share of `.text` |\n|---|---:|---:|\n");
    table(&mut page, &crates, CRATE_ROWS, m.text);
    page.push_str(&format!("\n## `.text` by Outpost module (top {MODULE_ROWS})\n\n"));
    page.push_str(
        "A function counts in the first Outpost module its symbol names \
         (`<outpost::worker::containerd::Pods as PodRuntime>::create_container` in \
         `outpost::worker`); \
         another crate's code made for no Outpost type, such as the Pod's decoder, is in \
         no module.\n\n",
    );
    page.push_str("| Module | Bytes | Share of `.text` |\n|---|---:|---:|\n");
    table(&mut page, &modules, MODULE_ROWS, m.text);
    page
}

/// Outpost's own crates: `outpost` and `outpost_*`.
fn is_outpost(krate: &str) -> bool {
    krate == "outpost" || krate.starts_with("outpost_")
}

fn table(page: &mut String, rows: &[(String, u64)], shown: usize, total: u64) {
    for (name, size) in rows.iter().take(shown) {
        page.push_str(&format!(
            "| `{name}` | {} | {} |\n",
            thousands(*size),
            percent(*size, total)
        ));
    }
    if rows.len() > shown {
        let rest: u64 = rows[shown..].iter().map(|(_, size)| size).sum();
        page.push_str(&format!(
            "| {} more | {} | {} |\n",
            rows.len() - shown,
            thousands(rest),
            percent(rest, total)
        ));
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / MIB as f64)
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".to_owned();
    }
    format!("{:.1} %", part as f64 * 100.0 / whole as f64)
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_counts_in_the_outpost_module_its_path_names() {
        assert_eq!(module_of("outpost::pod::worker::run"), Some("outpost::pod".into()));
        assert_eq!(
            module_of("<outpost::pod::Worker as core::future::future::Future>::poll"),
            Some("outpost::pod".into())
        );
        assert_eq!(
            module_of("outpost_core::merge::merge::{{closure}}"),
            Some("outpost_core::merge".into())
        );
        assert_eq!(
            module_of("core::ptr::drop_in_place<outpost::sync::lease::LeaseSync>"),
            Some("outpost::sync".into())
        );
        assert_eq!(
            module_of("<alloc::vec::Vec<outpost_core::pod::Pod> as Clone>::clone"),
            Some("outpost_core::pod".into())
        );
        // The crate root's own items, and the first Outpost path wins.
        assert_eq!(module_of("outpost::Error::fmt"), Some("outpost".into()));
        assert_eq!(
            module_of("<outpost_host::cgroup::Cgroup as From<outpost::x::Y>>::from"),
            Some("outpost_host::cgroup".into())
        );
        // Other crates, and names that only contain the word.
        assert_eq!(module_of("tokio::runtime::park::park"), None);
        assert_eq!(module_of("foo::not_outpost::bar"), None);
        assert_eq!(module_of("outposted::x"), None);
    }

    #[test]
    fn the_ledger_is_read_back_as_written() {
        let measured = Measured {
            stripped: 22_510_336,
            text: 15_000_000,
            functions: vec![
                Function { krate: Some("tokio".into()), name: "tokio::a".into(), size: 300 },
                Function {
                    krate: Some("outpost".into()),
                    name: "outpost::pod::a".into(),
                    size: 200,
                },
                Function {
                    krate: Some("outpost".into()),
                    name: "outpost::pod::b".into(),
                    size: 50,
                },
                Function { krate: None, name: "_start".into(), size: 7 },
            ],
            rustc: "rustc 1.95.0".into(),
            inputs: "ab".repeat(32),
        };
        let page = render(&measured);
        assert_eq!(
            Recorded::parse(&page),
            Some(Recorded { bytes: 22_510_336, inputs: "ab".repeat(32) })
        );
        assert!(page.contains("| `outpost` | 250 |"), "{page}");
        assert!(page.contains("| `outpost::pod` | 250 |"), "{page}");
        assert!(page.contains("| `[unknown]` | 7 |"), "{page}");
        assert!(page.contains("22,510,336 bytes (21.47 MiB), **over** the budget"), "{page}");
        assert_eq!(Recorded::parse("# Binary size\n\nno marker\n"), None);
    }

    #[test]
    fn rows_past_the_table_are_summed_in_one() {
        let rows: Vec<_> = (0..5).map(|i| (format!("c{i}"), 10 - i)).collect();
        let mut page = String::new();
        table(&mut page, &rows, 3, 100);
        assert!(page.ends_with("| 2 more | 13 | 13.0 % |\n"), "{page}");
    }

    #[test]
    fn the_budget_is_judged_to_the_byte() {
        assert!(judge(BUDGET).is_ok());
        assert!(judge(BUDGET + 1).is_err());
        assert_eq!(thousands(18_874_368), "18,874,368");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn cargo_bloat_s_json_is_read() {
        let json = br#"{"file-size":10,"text-section-size":8,"functions":[{"crate":"std","name":"std::rt","size":5},{"name":"_start","size":3},{"crate":"serde_json?","name":"x","size":1}]}"#;
        let (text, functions) = parse_bloat(json).unwrap();
        assert_eq!(text, 8);
        assert_eq!(functions[2].krate.as_deref(), Some("serde_json"), "a guess counts");
        assert_eq!(functions[1], Function { krate: None, name: "_start".into(), size: 3 });
    }
}
