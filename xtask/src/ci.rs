//! `cargo xtask ci`: what CI runs, in order, stopping at the first failure.
//!
//! After `deps` it starts the private containerd (in CI or as root), checks that the
//! committed BPF object is built from its sources (`ebpf --check`) and builds the test
//! images; the cargo steps get `OUTPOST_TEST_CONTAINERD_SOCKET` and `OUTPOST_TEST_IMAGES`.
//! A containerd this run started is stopped at the end, also when a step failed; one that
//! was already running is left running. After the tests, the pods' end-to-end tests run
//! once more with the agent's BPF programs off; then `dist` cross-builds the arm64
//! release and smoke-tests it under qemu, and makes its `.deb`.

use std::path::PathBuf;

use crate::{bench, containerd, deps, dist, ebpf, images};

/// The socket of the containerd the tests use (absolute path).
pub const SOCKET_ENV: &str = "OUTPOST_TEST_CONTAINERD_SOCKET";
/// The directory holding the test images' tarballs (absolute path).
pub const IMAGES_ENV: &str = "OUTPOST_TEST_IMAGES";
/// Set to `off`, the test harness starts pod-running agents with `--ebpf=false`.
const EBPF_ENV: &str = "OUTPOST_TEST_EBPF";
/// The tests CI runs a second time with the BPF programs off.
const WITHOUT_EBPF: &[&str] =
    &["test", "-p", "outpost-tests", "--test", "integration", "--", "pods::"];
/// The release CI builds (cross) and smoke-tests (under qemu).
const DIST_TARGET: &str = "aarch64-unknown-linux-gnu";

pub fn run() -> anyhow::Result<()> {
    let steps: [&[&str]; 4] = [
        &["fmt", "--all", "--", "--check"],
        &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"],
        &["build", "--workspace", "--all-targets"],
        &["test", "--workspace"],
    ];
    let total = steps.len() + 7;
    println!("==> ci step 1/{total}: cargo xtask deps");
    deps::run()?;

    println!("==> ci step 2/{total}: cargo xtask containerd start");
    let paths = containerd::Paths::new();
    let started = if crate::in_ci() || crate::is_root() {
        Some(containerd::start(&paths)?)
    } else {
        println!("ci: not root and not CI: no private containerd; tests that need it skip");
        None
    };
    let result = with_containerd(&steps, total, &paths);
    if started == Some(containerd::Started::Started) {
        println!("==> ci: cargo xtask containerd stop");
        if let Err(error) = containerd::stop(&paths) {
            if result.is_ok() {
                return Err(error);
            }
            eprintln!("ci: also failed to stop the private containerd: {error:#}");
        }
    }
    result?;
    println!("==> ci: all {total} steps passed");
    Ok(())
}

/// The steps that run while the private containerd (if any) is up.
fn with_containerd(
    steps: &[&[&str]],
    total: usize,
    paths: &containerd::Paths,
) -> anyhow::Result<()> {
    println!("==> ci step 3/{total}: cargo xtask ebpf --check");
    ebpf::check(
        &crate::project_root().join("agent-ebpf"),
        &crate::project_root().join("target/ebpf"),
    )?;
    println!("==> ci step 4/{total}: cargo xtask images");
    let images = images::dir();
    images::build(&images)?;
    let env: [(&str, PathBuf); 2] = [(SOCKET_ENV, paths.socket()), (IMAGES_ENV, images)];
    for (i, args) in steps.iter().enumerate() {
        println!("==> ci step {}/{total}: cargo {}", i + 5, args.join(" "));
        let mut command = crate::cargo(args);
        command.envs(env.iter().map(|(k, v)| (k, v.as_os_str())));
        crate::run(command)?;
    }
    // The pods' end-to-end tests again with the agent's BPF programs off: containerd's
    // events alone must keep pods running and restarting as before.
    println!("==> ci step {}/{total}: {EBPF_ENV}=off cargo {}", total - 2, WITHOUT_EBPF.join(" "));
    let mut command = crate::cargo(WITHOUT_EBPF);
    command.envs(env.iter().map(|(k, v)| (k, v.as_os_str()))).env(EBPF_ENV, "off");
    crate::run(command)?;
    let arm64 = dist::Options { target: Some(DIST_TARGET.to_owned()), deb: true };
    println!("==> ci step {}/{total}: cargo xtask dist --target {DIST_TARGET} --deb", total - 1);
    dist::run(&arm64)?;
    println!("==> ci step {total}/{total}: cargo xtask bench --quick");
    bench::run(&bench::Options { quick: true }, &env)
}
