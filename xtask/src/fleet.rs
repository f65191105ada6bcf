//! `cargo xtask fleet [--client outpost|kubelet] [--nodes N] [--minutes M]
//! [--pods-per-node P] [--outage SECONDS[,SECONDS...]] [--throttle QPS]`: builds and runs
//! the fleet harness (`tests/benches/fleet.rs`, B13): N hollow Outpost nodes (or the
//! kubelet-shaped model) in one process against one test API server, their idle figures,
//! then each whole-fleet outage's reconnect. The debug build, as the tests use; no
//! containerd. Past about 60 nodes the kernel's per-user watch limits
//! (`fs.inotify.max_user_instances`, `fs.fanotify.max_user_groups`) must be raised: as
//! root the harness raises them and says so, otherwise it names the `sysctl` to run.

use std::process::Command;

use anyhow::Context;

use crate::bench::{built, executable};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    // The whole workspace's features, as the tests' build has them (`bench::built`'s
    // reason): a build of `outpost-tests` alone would compile much of the tree again.
    let build =
        ["build", "--workspace", "--bench", "fleet", "--message-format", "json-render-diagnostics"];
    let (messages, shown) = built(crate::cargo(&build))?;
    let program = executable(&messages, "fleet", "bench")
        .with_context(|| format!("`{shown}` named no fleet program"))?;
    let mut command = Command::new(program);
    command.args(args).current_dir(crate::project_root().join("tests"));
    crate::run(command)
}
