//! `cargo xtask chaos [--trials N] [--seed S] [--quick]`: builds and runs the chaos
//! program (`tests/benches/chaos.rs`) against the debug build of the agent (what the
//! tests use; CI has built it by then). The agent's log goes to `target/chaos/agent.log`,
//! the report to `target/chaos/report.json`; a broken invariant fails the task.

use std::fs::File;
use std::process::{Command, Stdio};

use anyhow::{Context, ensure};

use crate::bench::{BIN_ENV, executable};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let (program, agent) = build()?;
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

/// One dev-profile build of the chaos program and the agent; their paths.
fn build() -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let args = [
        "build",
        "-p",
        "outpost",
        "-p",
        "outpost-tests",
        "--bin",
        "outpost",
        "--bench",
        "chaos",
        "--message-format",
        "json-render-diagnostics",
    ];
    let mut command = crate::cargo(&args);
    command.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let shown = crate::show(&command);
    println!("$ {shown}");
    let out = command.output().with_context(|| format!("cannot run `{shown}`"))?;
    ensure!(out.status.success(), "`{shown}` failed: {}", out.status);
    let messages = String::from_utf8_lossy(&out.stdout);
    let program = executable(&messages, "chaos", "bench")
        .with_context(|| format!("`{shown}` named no chaos program"))?;
    let agent = executable(&messages, "outpost", "bin")
        .with_context(|| format!("`{shown}` named no outpost binary"))?;
    Ok((program, agent))
}
