//! `cargo xtask fuzz [--minutes M] [--target T]... [--no-merge]`: coverage-guided fuzzing
//! with cargo-fuzz (libFuzzer).
//!
//! Installs what it needs (a nightly toolchain with rustup, cargo-fuzz with `cargo
//! install`; without nightly, the stable toolchain with `RUSTC_BOOTSTRAP=1`), builds every
//! target of `fuzz/` once, then runs each for M minutes over its committed corpus
//! (`fuzz/corpus/<target>/`). New inputs go to a scratch directory under `fuzz/target/`;
//! unless `--no-merge`, they are merged into the committed corpus, minimized as `cargo
//! fuzz cmin` does (libFuzzer's `-merge=1`). Prints each target's executions, exec/s, corpus size and crashes (from
//! libFuzzer's final stats). A crash fails the command: its input is copied to
//! `fuzz/regressions/<target>/`, which `cargo test` replays, and named.
//!
//! Built without a sanitizer (`-s none`): the harnesses look for panics and broken
//! invariants in safe Rust, and AddressSanitizer would halve the executions; with
//! debug assertions (`-a`), so an arithmetic overflow is a crash.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

use self::toolchain::{Toolchain, ensure_cargo_fuzz};

mod toolchain;

/// The targets, in the order they run (`fuzz/fuzz_targets/<target>.rs`).
pub const TARGETS: [&str; 8] = [
    "manifest",
    "merge",
    "checkpoint",
    "cri_log",
    "bpf_record",
    "local_api",
    "spdy_frame",
    "spdy_session",
];

/// CI's run: half a minute per target. Eight targets and their corpus minimization take
/// about five minutes with the build cached, and each still makes tens of thousands of
/// executions over the corpus, enough to catch a change that breaks a harness's
/// invariants on inputs the corpus already holds; long runs find new ones.
pub const DEFAULT_MINUTES: f64 = 0.5;

/// The largest input libFuzzer makes, per target: manifests, log files and request
/// sequences need room (a CRI log line is cut at 16 KiB); the others are small.
fn max_len(target: &str) -> usize {
    match target {
        "manifest" | "local_api" => 16 * 1024,
        "cri_log" => 40 * 1024,
        _ => 4096,
    }
}

/// A corpus larger than this is minimized again on edge coverage alone, and then cut.
const MAX_CORPUS_FILES: usize = 400;
/// No corpus file over this size is committed.
const MAX_CORPUS_FILE: u64 = 64 * 1024;
/// A single input running longer than this is a hang (a crash).
const TIMEOUT_SECONDS: u32 = 10;
/// libFuzzer's memory limit per process.
const RSS_LIMIT_MB: u32 = 2048;

#[derive(Debug)]
pub struct Options {
    pub minutes: f64,
    pub targets: Vec<String>,
    pub merge: bool,
    /// CI's build ([`shared_build`]), not cargo-fuzz's.
    pub shared_build: bool,
}

impl Options {
    pub fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options {
            minutes: DEFAULT_MINUTES,
            targets: Vec::new(),
            merge: true,
            shared_build: false,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--minutes" => {
                    let value = args.next().context("--minutes needs a number")?;
                    options.minutes = value
                        .parse()
                        .ok()
                        .filter(|m: &f64| m.is_finite() && *m > 0.0)
                        .with_context(|| format!("--minutes {value:?}: not a positive number"))?;
                }
                "--target" => {
                    let target = args.next().context("--target needs a target name")?;
                    if !TARGETS.contains(&target.as_str()) {
                        bail!("no fuzz target {target:?}; the targets are {}", TARGETS.join(", "));
                    }
                    options.targets.push(target.clone());
                }
                "--no-merge" => options.merge = false,
                "--shared-build" => options.shared_build = true,
                other => bail!("`fuzz` does not take {other:?}"),
            }
        }
        if options.targets.is_empty() {
            options.targets = TARGETS.iter().map(|t| (*t).to_owned()).collect();
        }
        Ok(options)
    }
}

/// How one target's run went.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    pub executions: u64,
    pub exec_per_second: u64,
    pub new_units: u64,
    pub peak_rss_mb: u64,
    /// Inputs that crashed, hung or ran out of memory, as libFuzzer wrote them.
    pub crashes: Vec<PathBuf>,
    pub corpus_files: usize,
    pub seconds: f64,
}

pub fn run(options: &Options) -> anyhow::Result<()> {
    anyhow::ensure!(!options.targets.is_empty(), "no fuzz target to run");
    let fuzz_dir = crate::project_root().join("fuzz");
    let started = Instant::now();
    let programs =
        if options.shared_build { shared_build()? } else { cargo_fuzz_build(&fuzz_dir)? };
    println!("fuzz: built the targets in {:.0} s", started.elapsed().as_secs_f64());

    let mut outcomes = Vec::new();
    for target in &options.targets {
        let bin = programs
            .iter()
            .find_map(|(name, bin)| (name == target).then_some(bin))
            .with_context(|| format!("the fuzz build made no program for target {target}"))?;
        let outcome = run_target(&fuzz_dir, bin, target, options)?;
        outcomes.push((target.clone(), outcome));
    }
    println!("\n{}", table(&outcomes));
    let crashed: Vec<String> = outcomes
        .iter()
        .flat_map(|(target, o)| o.crashes.iter().map(move |c| format!("{target}: {}", c.display())))
        .collect();
    if !crashed.is_empty() {
        bail!(
            "fuzzing found {} crash(es), copied to fuzz/regressions/<target>/ (replayed by \
             `cargo test -p outpost-fuzz`); fix them:\n  {}",
            crashed.len(),
            crashed.join("\n  ")
        );
    }
    println!("fuzz: no crashes in {:.1} min", started.elapsed().as_secs_f64() / 60.0);
    Ok(())
}

/// Runs one target over its corpus, then (unless `--no-merge`) minimizes the corpus with
/// what it found.
fn run_target(
    fuzz_dir: &Path,
    bin: &Path,
    target: &str,
    options: &Options,
) -> anyhow::Result<Outcome> {
    let corpus = fuzz_dir.join("corpus").join(target);
    let scratch = fuzz_dir.join("target/fuzz-scratch").join(target);
    let artifacts = fuzz_dir.join("artifacts").join(target);
    for dir in [&corpus, &artifacts] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    reset_dir(&scratch)?;
    let before = files(&artifacts)?;

    let seconds = (options.minutes * 60.0).round().max(1.0) as u64;
    println!("==> fuzz {target}: {seconds} s");
    let started = Instant::now();
    let mut command = Command::new(bin);
    command.args([&scratch, &corpus]);
    command.args([
        format!("-max_total_time={seconds}"),
        format!("-max_len={}", max_len(target)),
        format!("-timeout={TIMEOUT_SECONDS}"),
        format!("-rss_limit_mb={RSS_LIMIT_MB}"),
        "-print_final_stats=1".to_owned(),
        format!("-artifact_prefix={}/", artifacts.display()),
    ]);
    command.stdout(Stdio::inherit()).stderr(Stdio::piped());
    let output =
        command.output().with_context(|| format!("cannot run `{}`", crate::show(&command)))?;
    let log = String::from_utf8_lossy(&output.stderr);
    let mut outcome = parse_stats(&log);
    outcome.seconds = started.elapsed().as_secs_f64();
    outcome.crashes = files(&artifacts)?.into_iter().filter(|f| !before.contains(f)).collect();
    if !output.status.success() && outcome.crashes.is_empty() {
        eprintln!("{}", tail(&log, 40));
        bail!("fuzz target {target} failed ({}) without leaving a crash input", output.status);
    }
    if !outcome.crashes.is_empty() {
        eprintln!("{}", tail(&log, 60));
    }
    for crash in &outcome.crashes {
        let regressions = fuzz_dir.join("regressions").join(target);
        std::fs::create_dir_all(&regressions)?;
        let name = crash.file_name().context("a crash input without a file name")?;
        std::fs::copy(crash, regressions.join(name)).with_context(|| {
            format!("cannot copy {} to {}", crash.display(), regressions.display())
        })?;
    }

    if options.merge && outcome.crashes.is_empty() {
        merge_corpus(fuzz_dir, bin, target, &corpus, &scratch)?;
    }
    outcome.corpus_files = files(&corpus)?.len();
    println!(
        "fuzz {target}: {} executions ({}/s), {} new inputs, corpus {} files, {} crash(es)",
        outcome.executions,
        outcome.exec_per_second,
        outcome.new_units,
        outcome.corpus_files,
        outcome.crashes.len()
    );
    Ok(outcome)
}

/// Puts the new inputs with the committed ones and keeps the smallest set that covers
/// what they all cover, without files over [`MAX_CORPUS_FILE`] and with at most
/// [`MAX_CORPUS_FILES`]: libFuzzer's merge into an empty directory, which is what `cargo
/// fuzz cmin` runs.
fn merge_corpus(
    fuzz_dir: &Path,
    bin: &Path,
    target: &str,
    corpus: &Path,
    scratch: &Path,
) -> anyhow::Result<()> {
    let staging = fuzz_dir.join("target/fuzz-staging").join(target);
    reset_dir(&staging)?;
    for file in files(corpus)?.into_iter().chain(files(scratch)?) {
        let Some(name) = file.file_name() else { continue };
        if std::fs::metadata(&file)?.len() <= MAX_CORPUS_FILE {
            std::fs::copy(&file, staging.join(name))?;
        }
    }
    let minimized = fuzz_dir.join("target/fuzz-minimized").join(target);
    let mut kept = minimize(bin, target, &staging, &minimized, &[])?;
    if kept.len() > MAX_CORPUS_FILES {
        // Hit counts make many inputs distinct; keep those that add edges.
        kept = minimize(bin, target, &staging, &minimized, &["-use_counters=0"])?;
    }
    if kept.len() > MAX_CORPUS_FILES {
        // Still too many (k8s-openapi's deserializers have an edge per field name): the
        // largest inputs, which tend to cover the most each.
        kept.sort_by_key(|f| std::cmp::Reverse(std::fs::metadata(f).map_or(0, |m| m.len())));
        kept.truncate(MAX_CORPUS_FILES);
    }
    if kept.is_empty() {
        bail!("minimizing left nothing of the {target} corpus in {}", minimized.display());
    }
    reset_dir(corpus)?;
    for file in kept {
        if let Some(name) = file.file_name() {
            std::fs::copy(&file, corpus.join(name))?;
        }
    }
    Ok(())
}

/// libFuzzer's `-set_cover_merge=1` (`-merge=1` choosing a smaller set) of `from` into
/// an empty `into`: the files kept.
fn minimize(
    bin: &Path,
    target: &str,
    from: &Path,
    into: &Path,
    flags: &[&str],
) -> anyhow::Result<Vec<PathBuf>> {
    reset_dir(into)?;
    let mut command = Command::new(bin);
    command.arg("-set_cover_merge=1").arg(format!("-max_len={}", max_len(target))).args(flags);
    command.args([into, from]);
    command.stdout(Stdio::null()).stderr(Stdio::piped());
    let output =
        command.output().with_context(|| format!("cannot run `{}`", crate::show(&command)))?;
    if !output.status.success() {
        eprintln!("{}", tail(&String::from_utf8_lossy(&output.stderr), 40));
        bail!("`{}` failed: {}", crate::show(&command), output.status);
    }
    files(into)
}

/// cargo-fuzz's build of every target (nightly, optimized, every crate instrumented):
/// each target's program. Every run and merge uses the program built at the start: `cargo
/// fuzz run` and `cmin` would rebuild it after a source change, in the middle of a long run.
fn cargo_fuzz_build(fuzz_dir: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let toolchain = Toolchain::ensure()?;
    ensure_cargo_fuzz(&toolchain)?;
    crate::run(toolchain.cargo_fuzz(fuzz_dir, &["build", "-s", "none", "-a"]))?;
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let dir = fuzz_dir.join("target").join(triple).join("release");
    Ok(TARGETS.iter().map(|t| ((*t).to_owned(), dir.join(t))).collect())
}

/// The coverage flags cargo-fuzz gives rustc (without a sanitizer), for
/// [`shared_build`]'s workspace crates.
const COVERAGE_FLAGS: &str = "--cfg fuzzing -Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares";

/// CI's build (`--shared-build`): the harness crate's `fuzz-<target>` programs, built in
/// the workspace's own target directory with the stable toolchain and the tests' features
/// (dev-dependencies on, as `--examples` turns them on), so that every dependency is the
/// tests' build and only the workspace's crates compile again. A `RUSTC_WORKSPACE_WRAPPER`
/// adds the coverage flags to those crates alone: libFuzzer sees no edge inside a
/// dependency (serde, the YAML and JSON parsers), which a 15-second run over the committed
/// corpus does not need (it checks the harnesses' invariants on inputs like the corpus);
/// long runs use cargo-fuzz's build. A workspace crate's build script (the kubelet API's
/// code generation) is not instrumented: it runs on the host without libFuzzer, which
/// defines the comparison hooks the flags call. Cargo hashes the wrapper into the names of what it
/// builds, so the instrumented crates are kept beside the tests' build of them, not over
/// it: neither build undoes the other.
fn shared_build() -> anyhow::Result<Vec<(String, PathBuf)>> {
    let wrapper = crate::project_root().join("target/fuzz-rustc");
    let script = format!(
        "#!/bin/sh\n# cargo xtask fuzz --shared-build: cargo-fuzz's coverage flags for the \
         workspace's crates\nrustc=\"$1\"; shift\ncase \" $* \" in\n  \
         *\" --crate-name build_script_\"*) exec \"$rustc\" \"$@\" ;;\n  *\" --crate-name \"*) \
         exec \"$rustc\" \"$@\" {COVERAGE_FLAGS} ;;\n  *) exec \"$rustc\" \"$@\" ;;\nesac\n"
    );
    write_executable(&wrapper, &script)?;
    let programs: Vec<String> = TARGETS.iter().map(|t| format!("fuzz-{t}")).collect();
    // The fuzz programs alone (only they link libFuzzer, which the coverage calls need);
    // `--workspace` still selects every package, so the features are the tests'.
    let mut args = vec!["build", "--workspace", "--examples", "--features"];
    args.extend(["outpost-fuzz/targets", "--message-format", "json-render-diagnostics"]);
    for program in &programs {
        args.extend(["--bin", program]);
    }
    let mut command = crate::cargo(&args);
    command.env("RUSTC_WORKSPACE_WRAPPER", &wrapper);
    let (messages, shown) = crate::bench::built(command)?;
    TARGETS
        .iter()
        .zip(&programs)
        .map(|(target, program)| {
            let bin = crate::bench::executable(&messages, program, "bin")
                .with_context(|| format!("`{shown}` named no {program} program"))?;
            Ok(((*target).to_owned(), bin))
        })
        .collect()
}

/// Writes `text` to `path`, executable.
fn write_executable(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

/// libFuzzer's final stats (`-print_final_stats=1`):
/// `stat::number_of_executed_units: 1234` and the like.
pub fn parse_stats(log: &str) -> Outcome {
    let mut outcome = Outcome::default();
    for line in log.lines() {
        let Some((key, value)) = line.strip_prefix("stat::").and_then(|l| l.split_once(':')) else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else { continue };
        match key {
            "number_of_executed_units" => outcome.executions = value,
            "average_exec_per_sec" => outcome.exec_per_second = value,
            "new_units_added" => outcome.new_units = value,
            "peak_rss_mb" => outcome.peak_rss_mb = value,
            _ => {}
        }
    }
    outcome
}

/// The per-target summary.
pub fn table(outcomes: &[(String, Outcome)]) -> String {
    let mut out = format!(
        "{:<12} {:>12} {:>8} {:>6} {:>8} {:>8} {:>8}\n",
        "target", "executions", "exec/s", "new", "corpus", "rss MB", "crashes"
    );
    for (target, o) in outcomes {
        out.push_str(&format!(
            "{:<12} {:>12} {:>8} {:>6} {:>8} {:>8} {:>8}\n",
            target,
            o.executions,
            o.exec_per_second,
            o.new_units,
            o.corpus_files,
            o.peak_rss_mb,
            o.crashes.len()
        ));
    }
    out
}

/// The files directly in `dir`, sorted; none if it does not exist.
fn files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.with_context(|| format!("cannot list {}", dir.display()))?.path();
        if path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// An empty `dir`.
fn reset_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot remove {}", dir.display()));
        }
        _ => {}
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// The last `n` lines of `log`.
fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests;
