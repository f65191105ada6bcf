//! The toolchain and cargo-fuzz that `cargo xtask fuzz` builds with, installed if missing.

use std::path::Path;
use std::process::{Command, Stdio};

/// The toolchain the targets build with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toolchain {
    /// `cargo +nightly`.
    Nightly,
    /// The default (stable) toolchain with `RUSTC_BOOTSTRAP=1`, when nightly cannot be
    /// installed: cargo-fuzz's `-Z` flags are accepted, at the risk of an unstable
    /// feature behaving differently than on nightly.
    StableBootstrap,
}

impl Toolchain {
    /// Nightly if rustup has it or can install it, else stable with `RUSTC_BOOTSTRAP=1`.
    pub fn ensure() -> anyhow::Result<Toolchain> {
        if succeeds(Command::new("cargo").args(["+nightly", "--version"])) {
            return Ok(Toolchain::Nightly);
        }
        println!("fuzz: no nightly toolchain; installing it with rustup");
        if succeeds(Command::new("rustup").args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
        ])) {
            return Ok(Toolchain::Nightly);
        }
        println!(
            "fuzz: cannot install nightly; building with the stable toolchain and \
             RUSTC_BOOTSTRAP=1 (unstable flags accepted on stable)"
        );
        Ok(Toolchain::StableBootstrap)
    }

    /// `cargo [+nightly] fuzz <args>` for the targets in `fuzz_dir`. Runs the
    /// rustup proxy from `PATH` (not `$CARGO`, the toolchain xtask runs on) and leaves out
    /// what the outer cargo set, so the nested build has its own target directory.
    pub fn cargo_fuzz(self, fuzz_dir: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("cargo");
        if self == Toolchain::Nightly {
            command.arg("+nightly");
        } else {
            command.env("RUSTC_BOOTSTRAP", "1");
        }
        command.arg("fuzz").args(args);
        // cargo-fuzz finds `fuzz/` in the project it is run from.
        command.current_dir(fuzz_dir.parent().unwrap_or(fuzz_dir));
        for name in ["CARGO", "RUSTC", "RUSTDOC", "RUSTUP_TOOLCHAIN", "CARGO_TARGET_DIR"] {
            command.env_remove(name);
        }
        crate::remove_cargo_run_env(&mut command);
        command
    }
}

/// cargo-fuzz, installed from crates.io if `cargo fuzz` is missing.
pub fn ensure_cargo_fuzz(toolchain: &Toolchain) -> anyhow::Result<()> {
    let mut probe = Command::new("cargo");
    probe.args(["fuzz", "--version"]);
    if succeeds(&mut probe) {
        return Ok(());
    }
    println!("fuzz: installing cargo-fuzz");
    let mut install = Command::new("cargo");
    if *toolchain == Toolchain::StableBootstrap {
        install.env("RUSTC_BOOTSTRAP", "1");
    }
    install.args(["install", "cargo-fuzz", "--locked"]);
    crate::run(install)
}

fn succeeds(command: &mut Command) -> bool {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}
