//! The runc v2 shim the private containerd runs: containerd's Go shim (Debian's
//! `containerd` package, `/usr/bin/containerd-shim-runc-v2`) or the Rust one from
//! containerd's rust-extensions (crate `containerd-runc-shim`, pinned to [`VERSION`]).
//!
//! The Go shim is the default. The Rust one is opt-in (`containerd start --rust-shim` or
//! `OUTPOST_RUST_SHIM=1`): it was measured and not adopted (issue 38; the book's B5
//! section). containerd 1.6 finds a shim by its binary name on its own `PATH`, so choosing
//! the Rust shim is a directory (`target/shim/path/`) holding `containerd-shim-runc-v2` →
//! the Rust binary, put first on containerd's `PATH` by `cargo xtask containerd start`.
//!
//! The Rust binary is built on first use with `cargo install --locked` (without `--locked`
//! if its lock file fails) into `$CARGO_HOME/outpost-tools/containerd-runc-shim-<version>/`,
//! beside mdBook: once per machine (a cold build took 4 min 12 s of wall time on two
//! busy cores).
//!
//! Version 0.2.0 cannot start under containerd 1.6: containerd reads its bootstrap JSON
//! as the shim's address. 0.1.1 ignores stdio that is not a FIFO, so a `binary://` log URI
//! (`containerLogger: container`) hangs the task's creation: such containers need the Go
//! shim (the agent refuses the combination: `outpost_runtime::shim`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

/// The crate of the Rust runc v2 shim.
pub const CRATE: &str = "containerd-runc-shim";
/// The pinned version: the last one containerd 1.6 can start.
pub const VERSION: &str = "0.1.1";
/// The binary `cargo install` makes.
const INSTALLED_BINARY: &str = "containerd-shim-runc-v2-rs";
/// The binary name containerd looks up for runtime `io.containerd.runc.v2`.
pub const SHIM_BINARY: &str = "containerd-shim-runc-v2";
/// Set (to anything but `0` or empty), `containerd start` runs the Rust shim, as
/// `--rust-shim`.
pub const RUST_SHIM_ENV: &str = "OUTPOST_RUST_SHIM";

/// Which runc v2 shim the private containerd runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shim {
    /// containerd's own (Go), found on the system's `PATH`.
    Go,
    /// `containerd-runc-shim` [`VERSION`], first on containerd's `PATH`.
    Rust,
}

impl Shim {
    /// The shim `containerd start` runs: the Go one, unless `--rust-shim` was given or
    /// [`RUST_SHIM_ENV`] is set.
    pub fn chosen(rust_shim_flag: bool) -> Shim {
        let env = std::env::var(RUST_SHIM_ENV).unwrap_or_default();
        Shim::choose(rust_shim_flag, &env)
    }

    fn choose(rust_shim_flag: bool, env: &str) -> Shim {
        if rust_shim_flag || !(env.is_empty() || env == "0") { Shim::Rust } else { Shim::Go }
    }

    pub fn name(self) -> &'static str {
        match self {
            Shim::Go => "Go runc v2 shim (containerd's)",
            Shim::Rust => "Rust runc v2 shim (containerd-runc-shim 0.1.1)",
        }
    }
}

/// Where the Rust shim is installed, and the directory put on containerd's `PATH`.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `cargo install --root`.
    pub root: PathBuf,
    /// Holds `containerd-shim-runc-v2` → the installed binary.
    pub path_dir: PathBuf,
}

impl Paths {
    pub fn new() -> anyhow::Result<Paths> {
        Ok(Paths {
            root: crate::docs::cargo_home()?
                .join("outpost-tools")
                .join(format!("{CRATE}-{VERSION}")),
            path_dir: crate::project_root().join("target").join("shim").join("path"),
        })
    }

    pub fn binary(&self) -> PathBuf {
        self.root.join("bin").join(INSTALLED_BINARY)
    }
}

/// The Rust shim built (unless it is already) and linked; the directory to put on `PATH`.
pub fn install() -> anyhow::Result<PathBuf> {
    let paths = Paths::new()?;
    build(&paths)?;
    link(&paths)?;
    Ok(paths.path_dir)
}

/// Builds [`CRATE`] [`VERSION`] into `paths.root` unless that version is installed there.
fn build(paths: &Paths) -> anyhow::Result<()> {
    if paths.binary().is_file() && installed_version(&paths.root).as_deref() == Some(VERSION) {
        println!("shim: {CRATE} {VERSION} is built ({})", paths.binary().display());
        return Ok(());
    }
    println!("shim: building {CRATE} {VERSION} into {} (once)", paths.root.display());
    let started = Instant::now();
    let locked = crate::run(install_command(paths, true));
    if let Err(error) = locked {
        eprintln!("shim: `cargo install --locked` failed ({error:#}); again without --locked");
        crate::run(install_command(paths, false))
            .with_context(|| format!("cannot build {CRATE} {VERSION} with cargo install"))?;
    }
    println!("shim: {CRATE} {VERSION} built in {:.0} s", started.elapsed().as_secs_f64());
    if !paths.binary().is_file() {
        bail!("cargo install made no {}", paths.binary().display());
    }
    Ok(())
}

fn install_command(paths: &Paths, locked: bool) -> Command {
    let version = format!("={VERSION}");
    let mut install = crate::cargo(&["install", CRATE, "--version", &version]);
    if locked {
        install.arg("--locked");
    }
    install.arg("--root").arg(&paths.root);
    // A temporary target directory of its own: the workspace's is not for tools.
    install.env_remove("CARGO_TARGET_DIR");
    install
}

/// The version of [`CRATE`] cargo's `.crates.toml` in `root` records, if any.
fn installed_version(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(root.join(".crates.toml")).ok()?;
    installed_version_in(&text)
}

/// `"containerd-runc-shim 0.1.1 (registry+…)" = […]` → `0.1.1`.
fn installed_version_in(crates_toml: &str) -> Option<String> {
    crates_toml.lines().find_map(|line| {
        let rest = line.trim_start_matches('"').strip_prefix(CRATE)?.strip_prefix(' ')?;
        rest.split_whitespace().next().map(str::to_owned)
    })
}

/// `path_dir/containerd-shim-runc-v2` → the installed binary (replaced if it differs).
fn link(paths: &Paths) -> anyhow::Result<()> {
    let dir = &paths.path_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let link = dir.join(SHIM_BINARY);
    let target = paths.binary();
    if std::fs::read_link(&link).is_ok_and(|current| current == target) {
        return Ok(());
    }
    match std::fs::remove_file(&link) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot replace {}", link.display())),
    }
    std::os::unix::fs::symlink(&target, &link)
        .with_context(|| format!("cannot link {} to {}", link.display(), target.display()))
}

/// The `PATH` containerd gets for `shim`: ours for the Go shim; for the Rust one, its
/// directory first (the binary built first if missing).
pub fn containerd_path(shim: Shim) -> anyhow::Result<OsString> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    match shim {
        Shim::Go => Ok(path),
        Shim::Rust => {
            let dir = install()?;
            let dirs = std::iter::once(dir).chain(std::env::split_paths(&path));
            std::env::join_paths(dirs).context("cannot put the Rust shim's directory on PATH")
        }
    }
}

/// The shim a running containerd was given: the Rust one when its `PATH` (from
/// `/proc/<pid>/environ`) starts with our shim directory.
pub fn of_process(pid: u32) -> Option<Shim> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let path = environ.split(|&b| b == 0).find_map(|var| var.strip_prefix(b"PATH="))?;
    let first = path.split(|&b| b == b':').next()?;
    let ours = Paths::new().ok()?.path_dir;
    Some(if Path::new(&*String::from_utf8_lossy(first)) == ours { Shim::Rust } else { Shim::Go })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_shim_is_the_default_and_the_flag_or_env_opts_in_to_rust() {
        assert_eq!(Shim::choose(false, ""), Shim::Go);
        assert_eq!(Shim::choose(false, "0"), Shim::Go);
        assert_eq!(Shim::choose(true, ""), Shim::Rust);
        assert_eq!(Shim::choose(false, "1"), Shim::Rust);
    }

    #[test]
    fn the_installed_version_is_read_from_cargos_record() {
        let toml = "[v1]\n\"containerd-runc-shim 0.1.1 (registry+https://github.com/rust-lang/crates.io-index)\" = [\"containerd-shim-runc-v2-rs\"]\n";
        assert_eq!(installed_version_in(toml).as_deref(), Some("0.1.1"));
        assert_eq!(installed_version_in("[v1]\n"), None);
        let other = "[v1]\n\"containerd-runc-shim-x 0.2.0 (registry+x)\" = []\n";
        assert_eq!(installed_version_in(other), None);
    }
}
