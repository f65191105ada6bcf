//! `cargo xtask heap [--quick] [--profile P]`: the agent's heap profile at B5's 100 pods
//! (`--quick`: 10). Builds the benchmark program and the agent with its heap profiler
//! (the `dhat-heap` feature; the dev profile unless told, since only the allocations
//! matter) in one cargo invocation, and runs the program's H5
//! (`tests/benches/bench/h5_heap.rs`), which needs the test containerd and images as the
//! pod benchmarks do. Prints the live bytes and blocks at t-end and t-gmax with the sites
//! holding most; the profile stays in `target/heap/dhat-heap.json` (dhat's viewer reads
//! it) and the figures in `target/bench/report.json`.

use std::process::Command;

use anyhow::{Context, bail};

use crate::bench::{BIN_ENV, build_program_with};

/// The profile built unless `--profile` says otherwise.
const PROFILE: &str = "dev";

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut quick = false;
    let mut profile = PROFILE.to_owned();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--profile" => {
                profile = args.next().context("--profile needs a cargo profile")?.clone()
            }
            other => bail!(
                "`heap`: unknown argument {other:?}; usage: cargo xtask heap [--quick] [--profile P]"
            ),
        }
    }
    let (program, agent) =
        build_program_with(&profile, "bench", &["--features", "outpost/dhat-heap"])?;
    let mut command = Command::new(&program);
    if quick {
        command.arg("--quick");
    }
    command.arg("H5");
    command.current_dir(crate::project_root().join("tests"));
    command.env(BIN_ENV, &agent);
    crate::run(command)
}
