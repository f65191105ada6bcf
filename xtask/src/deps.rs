//! `cargo xtask deps`: installs the Debian packages the test suite needs, and only the
//! missing ones. CI runs it first; on a developer machine it needs root (or says what to
//! install).

use std::process::Command;

use anyhow::{Context, bail};

/// Debian packages the tests use, and what for.
const PACKAGES: &[(&str, &str)] =
    &[("python3-seccomp", "runs the agent with fanotify_init blocked (the inotify fallback test)")];

pub fn run() -> anyhow::Result<()> {
    let missing: Vec<&str> =
        PACKAGES.iter().map(|(name, _)| *name).filter(|name| !installed(name)).collect();
    if missing.is_empty() {
        println!("deps: all test packages are installed");
        return Ok(());
    }
    if !is_root() {
        bail!(
            "missing Debian packages: {}; install them as root (apt-get install {})",
            missing.join(", "),
            missing.join(" ")
        );
    }
    let mut update = Command::new("apt-get");
    update.args(["update", "-q"]);
    crate::run(update)?;
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive");
    crate::run(install).context("installing the test packages")
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("install ok installed"))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
    })
}
