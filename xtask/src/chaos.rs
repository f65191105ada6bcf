//! `cargo xtask chaos [--trials N] [--seed S] [--quick] [--fault NAME] [--shim-grouping
//! pod|node]`: builds and runs the chaos
//! program (`tests/benches/chaos.rs`) against the debug build of the agent (what the
//! tests use; CI has built it by then). The agent's log goes to `target/chaos/agent.log`,
//! the report to `target/chaos/report.json`; a broken invariant fails the task.

use std::fs::File;
use std::process::{Command, Stdio};

use anyhow::Context;

use crate::bench::{BIN_ENV, build_program};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let (program, agent) = build_program("dev", "chaos")?;
    let dir = crate::project_root().join("target").join("chaos");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let log = dir.join("agent.log");
    let stderr = File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    println!("chaos: the agents' logs go to {}", log.display());
    let mut command = Command::new(&program);
    command.args(args).env(BIN_ENV, &agent).stderr(Stdio::from(stderr));
    command.current_dir(crate::project_root().join("tests"));
    crate::run(command)
}
