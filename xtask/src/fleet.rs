//! `cargo xtask fleet [--nodes N] [--minutes M] [--pods-per-node P] [--throttle QPS]`:
//! builds and runs the fleet harness (`tests/benches/fleet.rs`, B13): N hollow Outpost
//! nodes in one process against one test API server, and their idle figures. The debug
//! build, as the tests use; no containerd, no root.

use std::process::Command;

use anyhow::Context;

use crate::bench::{built, executable};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let build = [
        "build",
        "-p",
        "outpost-tests",
        "--bench",
        "fleet",
        "--message-format",
        "json-render-diagnostics",
    ];
    let (messages, shown) = built(crate::cargo(&build))?;
    let program = executable(&messages, "fleet", "bench")
        .with_context(|| format!("`{shown}` named no fleet program"))?;
    let mut command = Command::new(program);
    command.args(args).current_dir(crate::project_root().join("tests"));
    crate::run(command)
}
