//! `cargo xtask ci`: what CI runs, in order, stopping at the first failure.
//!
//! After `deps` it audits the locked dependencies against the RustSec database copy beside
//! the workspace (`audit`: offline, a vulnerability fails; built with xtask), builds the
//! book and checks its links (`docs`: mdBook, installed once under `$CARGO_HOME`; a cold
//! install costs about three minutes of CPU, a warm run a second), checks the arm64
//! binary's size against its budget (`size --check`: the committed ledger when it is of
//! this checkout, else a new measure), then starts the private containerd (in CI or as root), checks that the
//! committed BPF object is built from its sources (`ebpf --check`) and builds the test
//! images; the cargo steps get `OUTPOST_TEST_CONTAINERD_SOCKET` and `OUTPOST_TEST_IMAGES`.
//! A containerd this run started is stopped at the end, also when a step failed; one that
//! was already running is left running. After the tests, the pods' end-to-end tests run
//! once more with the agent's BPF programs off (the fuzz corpus is replayed by the tests).
//! Then, each in its short form:
//! - `dist` cross-builds the arm64 agent (the `ci-dist` profile: the distribution build
//!   unoptimized, the cheapest to build), smoke-tests it under qemu, and makes its `.deb`;
//! - `bench --quick` checks that the benchmarks run, with the tests' `dev` build (the
//!   figures come from `cargo xtask bench` on the release build);
//! - `fleet` runs 50 hollow nodes for a minute against one test API server (B13's short
//!   form: the harness works; its figures are printed, not judged);
//! - `chaos` runs twenty-five seeded trials, one per fault, and fails on a broken invariant;
//! - `fuzz` runs every fuzz target for 15 s over the committed corpus (built in the
//!   workspace's target directory on the tests' dependencies, the workspace's crates
//!   instrumented; the corpus left as it is).
//!
//! Each build after the tests' reuses their dependencies: the benches and the fuzz
//! programs are built with the whole workspace's features (a build of a few packages
//! unifies fewer and compiles much of the tree again).
//!
//! The tests' API servers note every request an agent makes (`target/node-requests.txt`);
//! after the tests, `deploy/rbac.yaml` must grant nothing no agent asked (K5, module
//! `rbac`). `leaks` checks after the tests, and again last, that nothing Outpost-made is left on
//! the machine. Each step's time is printed when it ends, and a table of all steps' times
//! at the end (also after a failure).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::{
    audit, bench, chaos, containerd, deps, dist, docs, ebpf, fleet, fuzz, images, leaks, rbac, size,
};

/// The socket of the containerd the tests use (absolute path).
pub const SOCKET_ENV: &str = "OUTPOST_TEST_CONTAINERD_SOCKET";
/// The directory holding the test images' tarballs (absolute path).
pub const IMAGES_ENV: &str = "OUTPOST_TEST_IMAGES";
/// Set to `off`, the test harness starts pod-running agents with `--ebpf=false`.
const EBPF_ENV: &str = "OUTPOST_TEST_EBPF";
/// The tests CI runs a second time with the BPF programs off: the integration tests' pod
/// module, built with the whole workspace's features as the step before built it (`-p
/// outpost-tests` unifies fewer, and compiled much of the tree again: 3:41).
const WITHOUT_EBPF: &[&str] = &["test", "--workspace", "--test", "integration", "--", "pods::"];
/// The tests' threads (`RUST_TEST_THREADS`): one more than the machine's cores (libtest's
/// default is as many), since the integration tests wait on containerd, runc and the
/// kernel far more than they compute. Measured on this 2-core machine, the 319
/// integration tests: 10:45 with 2 threads, 5:45 with 3.
fn test_threads() -> String {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    (cores + 1).to_string()
}
/// The release CI builds (cross) and smoke-tests (under qemu).
const DIST_TARGET: &str = "aarch64-unknown-linux-gnu";
/// The cargo profile of CI's arm64 build: the distribution's settings unoptimized and
/// without LTO (the workspace Cargo.toml), several times cheaper to build. What the step
/// checks does not depend on them: the cross build, the binary under qemu, the `.deb`.
const DIST_PROFILE: &str = "ci-dist";
/// CI's chaos run: twenty-five trials (each fault once), with a fixed seed so that a failure
/// can be replayed, and the API server flapping for 10 s, not a minute.
const CHAOS: &[&str] = &["--quick", "--trials", "25", "--seed", "2026"];
/// CI's fleet run: B13's harness at 50 hollow nodes for a minute.
const FLEET: &[&str] = &["--nodes", "50", "--minutes", "1"];
/// CI's fuzzing: every target for 15 s over the committed corpus, the shared build, the
/// corpus left as it is.
const FUZZ: &[&str] = &["--shared-build", "--minutes", "0.25", "--no-merge"];

/// The cargo steps, run while the private containerd (if any) is up.
const CARGO_STEPS: [&[&str]; 4] = [
    &["fmt", "--all", "--", "--check"],
    &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"],
    &["build", "--workspace", "--all-targets"],
    &["test", "--workspace"],
];

pub fn run() -> anyhow::Result<()> {
    let mut steps = Steps::new(CARGO_STEPS.len() + 16);
    let started = Instant::now();
    let result = all_steps(&mut steps);
    print!("{}", steps.table());
    result?;
    println!("==> ci: all {} steps passed in {}", steps.total, minutes(started.elapsed()));
    Ok(())
}

fn all_steps(steps: &mut Steps) -> anyhow::Result<()> {
    steps.run("cargo xtask deps", deps::run)?;
    steps.run("cargo xtask audit", || audit::run(&audit::Options::parse(&[])?))?;
    steps.run("cargo xtask docs", || docs::run(&[]))?;
    steps.run("cargo xtask size --check", size::check_ledger)?;
    let paths = containerd::Paths::new();
    let started = steps.run("cargo xtask containerd start", || {
        if crate::in_ci() || crate::is_root() {
            containerd::start(&paths, crate::shim::Shim::chosen(false)).map(Some)
        } else {
            println!(
                "ci: not root and not CI: no private containerd; tests that need it are ignored"
            );
            Ok(None)
        }
    })?;
    let result = with_containerd(steps, &paths);
    if started == Some(containerd::Started::Started) {
        let stopped = steps.extra("cargo xtask containerd stop", || containerd::stop(&paths));
        if let Err(error) = stopped {
            if result.is_ok() {
                return Err(error);
            }
            eprintln!("ci: also failed to stop the private containerd: {error:#}");
        }
    }
    result
}

/// The steps that run while the private containerd (if any) is up.
fn with_containerd(steps: &mut Steps, paths: &containerd::Paths) -> anyhow::Result<()> {
    steps.run("cargo xtask ebpf --check", || {
        ebpf::check(
            &crate::project_root().join("agent-ebpf"),
            &crate::project_root().join("target/ebpf"),
        )
    })?;
    let images = images::dir();
    steps.run("cargo xtask images", || images::build(&images))?;
    // K5: every request the tests' agents make, for the check of deploy/rbac.yaml.
    let requests = crate::project_root().join("target/node-requests.txt");
    let _ = std::fs::remove_file(&requests);
    let env: [(&str, PathBuf); 3] = [
        (SOCKET_ENV, paths.socket()),
        (IMAGES_ENV, images),
        (rbac::REQUESTS_ENV, requests.clone()),
    ];
    for args in CARGO_STEPS {
        steps.run(&format!("cargo {}", args.join(" ")), || {
            let mut command = crate::cargo(args);
            command.envs(env.iter().map(|(k, v)| (k, v.as_os_str())));
            command.env("RUST_TEST_THREADS", test_threads());
            crate::run(command)
        })?;
    }
    // The pods' end-to-end tests again with the agent's BPF programs off: containerd's
    // events alone must keep pods running and restarting as before.
    steps.run(&format!("{EBPF_ENV}=off cargo {}", WITHOUT_EBPF.join(" ")), || {
        let mut command = crate::cargo(WITHOUT_EBPF);
        command.envs(env.iter().map(|(k, v)| (k, v.as_os_str()))).env(EBPF_ENV, "off");
        command.env("RUST_TEST_THREADS", test_threads());
        crate::run(command)
    })?;
    steps.run("deploy/rbac.yaml grants only what the agents asked", || {
        rbac::check(&crate::project_root().join("deploy/rbac.yaml"), &requests)
    })?;
    steps.run("cargo xtask leaks (after the tests)", || leaks_check(paths))?;
    let arm64 = dist::Options {
        target: Some(DIST_TARGET.to_owned()),
        deb: true,
        profile: Some(DIST_PROFILE.to_owned()),
    };
    let what = format!("cargo xtask dist --target {DIST_TARGET} --deb --profile {DIST_PROFILE}");
    steps.run(&what, || dist::run(&arm64))?;
    let quick =
        bench::Options { quick: true, profile: "dev".to_owned(), ..bench::Options::default() };
    steps.run("cargo xtask bench --quick --profile dev", || bench::run(&quick, &env))?;
    steps.run(&format!("cargo xtask fleet {}", FLEET.join(" ")), || fleet::run(&strings(FLEET)))?;
    steps.run(&format!("cargo xtask chaos {}", CHAOS.join(" ")), || chaos::run(&strings(CHAOS)))?;
    let short = fuzz::Options::parse(&strings(FUZZ))?;
    steps.run(&format!("cargo xtask fuzz {}", FUZZ.join(" ")), || fuzz::run(&short))?;
    steps.run("cargo xtask leaks", || leaks_check(paths))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// Fails when the tests or benches left anything Outpost-made on the machine.
fn leaks_check(paths: &containerd::Paths) -> anyhow::Result<()> {
    leaks::check(&outpost_leaks::Scope::machine(Some(paths.socket())), false)
}

/// CI's steps as they run: each announced (`==> ci step i/N: what`), timed, and listed
/// with its time in [`Steps::table`].
#[derive(Debug)]
struct Steps {
    total: usize,
    /// Each step run so far: its label (`3/11` or `-`), what it ran, its time, whether
    /// it passed.
    done: Vec<(String, String, Duration, bool)>,
}

impl Steps {
    fn new(total: usize) -> Steps {
        Steps { total, done: Vec::new() }
    }

    /// Runs the next numbered step.
    fn run<T>(
        &mut self,
        what: &str,
        step: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let label = format!("{}/{}", self.numbered() + 1, self.total);
        self.timed(label, what, step)
    }

    /// Runs a step outside the numbered ones (the containerd's stop).
    fn extra<T>(
        &mut self,
        what: &str,
        step: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        self.timed("-".to_owned(), what, step)
    }

    fn numbered(&self) -> usize {
        self.done.iter().filter(|(label, ..)| label != "-").count()
    }

    fn timed<T>(
        &mut self,
        label: String,
        what: &str,
        step: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let step_name = if label == "-" { String::new() } else { format!(" step {label}") };
        println!("==> ci{step_name}: {what}");
        let started = Instant::now();
        let result = step();
        let took = started.elapsed();
        let outcome = if result.is_ok() { "done" } else { "FAILED" };
        println!("==> ci{step_name}: {what}: {outcome} in {}", minutes(took));
        self.done.push((label, what.to_owned(), took, result.is_ok()));
        result
    }

    /// Every step run so far with its time (m:ss), and the total.
    fn table(&self) -> String {
        let width = self.done.iter().map(|(_, what, ..)| what.len()).max().unwrap_or(0);
        let mut out = String::from("==> ci: step times\n");
        for (label, what, took, passed) in &self.done {
            let failed = if *passed { "" } else { "  FAILED" };
            out.push_str(&format!("  {label:>5}  {what:<width$}  {:>6}{failed}\n", minutes(*took)));
        }
        let total: Duration = self.done.iter().map(|(_, _, took, _)| *took).sum();
        // Saturating: a step added without its count must not fail a run that passed.
        let left = self.total.saturating_sub(self.numbered());
        let not_run = if left > 0 { format!(" ({left} not run)") } else { String::new() };
        out.push_str(&format!(
            "  {:>5}  {:<width$}  {:>6}{not_run}\n",
            "",
            "total",
            minutes(total)
        ));
        out
    }
}

/// A duration as minutes:seconds, e.g. `9:05`.
fn minutes(d: Duration) -> String {
    let secs = d.as_secs();
    format!("{}:{:02}", secs / 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_fuzzes_every_target_briefly_and_leaves_the_corpus() {
        let options = fuzz::Options::parse(&strings(FUZZ)).unwrap();
        assert_eq!(options.targets, fuzz::TARGETS);
        assert!(options.shared_build && !options.merge);
        assert!((options.minutes - 0.25).abs() < f64::EPSILON);
    }

    #[test]
    fn minutes_and_seconds() {
        assert_eq!(minutes(Duration::from_millis(4_900)), "0:04");
        assert_eq!(minutes(Duration::from_secs(545)), "9:05");
        assert_eq!(minutes(Duration::from_secs(3_600)), "60:00");
    }

    #[test]
    fn the_table_lists_the_steps_run_also_after_a_failure() {
        let mut steps = Steps::new(3);
        steps.run("first", || Ok(())).unwrap();
        let failed: anyhow::Result<()> = steps.run("second", || anyhow::bail!("broken"));
        assert!(failed.is_err());
        steps.extra("cleanup", || Ok(())).unwrap();
        let table = steps.table();
        assert!(table.contains("  1/3  first "), "{table}");
        assert!(table.contains("  2/3  second     0:00  FAILED"), "{table}");
        assert!(table.contains("      -  cleanup"), "{table}");
        assert!(table.contains("(1 not run)"), "{table}");
    }

    #[test]
    fn more_steps_than_counted_still_make_a_table() {
        let mut steps = Steps::new(1);
        steps.run("first", || Ok(())).unwrap();
        steps.run("second", || Ok(())).unwrap();
        let table = steps.table();
        assert!(table.contains("  2/1  second") && !table.contains("not run"), "{table}");
    }
}
