//! `cargo xtask dist [--target TRIPLE] [--deb] [--profile NAME]`: a release of `outpost`
//! for one platform.
//!
//! 1. Builds `outpost` and `outpost-container-log` with the `distribution` profile (release without debug info) for
//!    the target (default: the host's). `--profile ci-dist` builds a cheaper binary for
//!    CI's check of the whole path (unoptimized, no LTO; see the workspace Cargo.toml):
//!    everything else is the same, but it goes to `target/dist/ci-dist/`, not where
//!    releases go. A cross build (`aarch64-unknown-linux-gnu` on
//!    x86_64) links with Debian's cross gcc (`gcc-aarch64-linux-gnu`,
//!    `libc6-dev-arm64-cross`); protoc runs on the host.
//! 2. Writes `target/dist/outpost-<version>-<arch>.tar.gz` (`arch` in Debian naming:
//!    amd64, arm64; the layout is in [`layout`]): sorted entries, owner root, every mtime
//!    `SOURCE_DATE_EPOCH` or else the last commit's time, gzip with no name or time.
//! 3. Reads the tarball back, checks its layout and `SHA256SUMS`, unpacks it and smoke-tests
//!    it ([`smoke`]): natively, or under `qemu-<arch>-static` for another architecture.
//! 4. With `--deb`, also `target/dist/outpost_<version>_<arch>.deb` ([`deb`]).
//!
//! The archive is written by the `tar` and `flate2` crates rather than the system `tar`:
//! its bytes then depend on nothing but the inputs (no tar version, locale, umask or file
//! system order), and the same code reads it back to verify it.

mod deb;
mod layout;
pub mod platform;
mod smoke;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail, ensure};

use crate::tarball;
use platform::Platform;

const USAGE: &str = "usage: cargo xtask dist [--target TRIPLE] [--deb] [--profile NAME]";

/// The cargo profile releases are built with.
pub const RELEASE_PROFILE: &str = "distribution";

/// Options of the `dist` task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The Rust target triple; the host's if none.
    pub target: Option<String>,
    /// Also build the `.deb`.
    pub deb: bool,
    /// The cargo profile; [`RELEASE_PROFILE`] if none.
    pub profile: Option<String>,
}

impl Options {
    pub fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--deb" => options.deb = true,
                "--target" => match args.next() {
                    Some(target) => options.target = Some(target.clone()),
                    None => bail!("`dist`: --target needs a target triple; {USAGE}"),
                },
                "--profile" => match args.next() {
                    Some(profile) => options.profile = Some(profile.clone()),
                    None => bail!("`dist`: --profile needs a cargo profile; {USAGE}"),
                },
                other => {
                    if let Some(target) = other.strip_prefix("--target=") {
                        options.target = Some(target.to_owned());
                    } else if let Some(profile) = other.strip_prefix("--profile=") {
                        options.profile = Some(profile.to_owned());
                    } else {
                        bail!("`dist`: unknown argument {other:?}; {USAGE}");
                    }
                }
            }
        }
        Ok(options)
    }
}

/// `<workspace>/target/dist` for releases; `<workspace>/target/dist/<profile>` for another
/// profile (CI's cheaper check), so that one is never taken for a release.
pub fn dir(profile: &str) -> PathBuf {
    let dist = crate::project_root().join("target").join("dist");
    if profile == RELEASE_PROFILE { dist } else { dist.join(profile) }
}

pub fn run(options: &Options) -> anyhow::Result<()> {
    let platform = match &options.target {
        Some(triple) => Platform::new(triple, std::env::consts::ARCH)?,
        None => Platform::host()?,
    };
    // The workspace's version: xtask and the agent both inherit it.
    let version = env!("CARGO_PKG_VERSION");
    let arch = platform.debian_arch();
    let mtime = source_date_epoch()?;
    let profile = options.profile.as_deref().unwrap_or(RELEASE_PROFILE);
    let started = Instant::now();
    let built = build(&platform, profile)?;
    let read = |path: &Path| {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        println!(
            "dist: built {} ({}, profile {profile}, {} bytes)",
            path.display(),
            platform.triple,
            bytes.len()
        );
        anyhow::Ok(bytes)
    };
    let binaries = layout::Binaries { agent: read(&built.agent)?, logger: read(&built.logger)? };
    println!("dist: built in {:.0}s", started.elapsed().as_secs_f64());

    let files = layout::collect(&crate::project_root(), binaries)?;
    let tar = tarball::archive(layout::entries(version, &files), mtime)?;
    let mut gzip = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::best());
    gzip.write_all(&tar).context("cannot gzip the tarball")?;
    let gz = gzip.finish().context("cannot gzip the tarball")?;
    let dist = dir(profile);
    std::fs::create_dir_all(&dist).with_context(|| format!("cannot create {}", dist.display()))?;
    let tarball_path = dist.join(format!("outpost-{version}-{arch}.tar.gz"));
    crate::write_atomically(&tarball_path, &gz)?;
    println!(
        "dist: {} ({} bytes, sha256 {})",
        tarball_path.display(),
        gz.len(),
        crate::sha256(&gz)
    );

    // Check what was written, as a user gets it: from the file.
    let written = std::fs::read(&tarball_path)
        .with_context(|| format!("cannot read {}", tarball_path.display()))?;
    let listing = tarball::list(flate2::read::GzDecoder::new(written.as_slice()))
        .with_context(|| format!("cannot read {}", tarball_path.display()))?;
    layout::verify(version, &listing, mtime)
        .with_context(|| format!("{} is not a valid release", tarball_path.display()))?;
    println!("dist: {} entries, layout and SHA256SUMS verified", listing.entries.len());
    let work = fresh_dir(&dist.join(format!("work-{arch}")))?;
    tarball::write_tree(&work, &listing.entries)?;
    let scratch = fresh_dir(&work.join("smoke"))?;
    smoke::run(&platform, &work.join(layout::top(version)), version, &scratch)
        .with_context(|| format!("the smoke test of {} failed", tarball_path.display()))?;

    if options.deb {
        let deb_path = dist.join(format!("outpost_{}_{arch}.deb", deb::debian_version(version)));
        let staging = fresh_dir(&work.join("deb"))?;
        tarball::write_tree(&staging, &deb::entries(version, arch, &files)?)?;
        deb::build(&staging, &deb_path, version, arch, mtime)?;
        let size = std::fs::metadata(&deb_path).map(|m| m.len()).unwrap_or_default();
        println!("dist: {} ({size} bytes)", deb_path.display());
    }
    std::fs::remove_dir_all(&work).with_context(|| format!("cannot remove {}", work.display()))?;
    println!("dist: done in {:.0}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Where [`build`] put the two executables.
#[derive(Debug)]
struct Built {
    agent: PathBuf,
    logger: PathBuf,
}

/// Builds the agent and the container logger for `platform` with the cargo `profile`
/// ([`RELEASE_PROFILE`]: release, without debug info); returns their paths.
fn build(platform: &Platform, profile: &str) -> anyhow::Result<Built> {
    let mut args = vec!["build", "--profile", profile, "-p", "outpost", "--bin", "outpost"];
    args.extend(["-p", "outpost-container-log", "--bin", "outpost-container-log"]);
    args.extend(["--message-format", "json-render-diagnostics"]);
    let mut command = crate::cargo(&args);
    if platform.cross {
        prepare_cross(platform)?;
        command.args(["--target", &platform.triple]);
        command.envs(platform.cross_env());
    }
    let (messages, shown) = crate::bench::built(command)?;
    let executable = |name: &str| {
        crate::bench::executable(&messages, name, "bin")
            .with_context(|| format!("`{shown}` named no {name} binary"))
    };
    Ok(Built { agent: executable("outpost")?, logger: executable("outpost-container-log")? })
}

/// Checks the cross toolchain is there and adds the Rust target if rustup lacks it.
pub fn prepare_cross(platform: &Platform) -> anyhow::Result<()> {
    let gcc = Command::new(platform.cross_gcc()).arg("--version").output();
    let libc = Path::new(&platform.cross_sysroot()).join("include/stdio.h");
    if !gcc.is_ok_and(|o| o.status.success()) || !libc.exists() {
        bail!(
            "cross-building for {} needs {} and {}; install the Debian packages {} (cargo xtask deps)",
            platform.triple,
            platform.cross_gcc(),
            libc.display(),
            platform.cross_packages().join(" ")
        );
    }
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .context("cannot run `rustup target list`; cross builds need rustup")?;
    let installed = String::from_utf8_lossy(&installed.stdout);
    if !installed.lines().any(|t| t.trim() == platform.triple) {
        let mut add = Command::new("rustup");
        add.args(["target", "add", &platform.triple]);
        crate::run(add)
            .with_context(|| format!("cannot add the Rust target {}", platform.triple))?;
    }
    Ok(())
}

/// The archive mtime: `SOURCE_DATE_EPOCH`, or else the last commit's time.
fn source_date_epoch() -> anyhow::Result<u64> {
    if let Ok(value) = std::env::var("SOURCE_DATE_EPOCH") {
        return value
            .trim()
            .parse()
            .with_context(|| format!("SOURCE_DATE_EPOCH={value:?} is not a number of seconds"));
    }
    let out = Command::new("git")
        .args(["log", "-1", "--format=%ct"])
        .current_dir(crate::project_root())
        .output()
        .context("cannot run git for the last commit's time; set SOURCE_DATE_EPOCH")?;
    let time = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "no last commit's time from git; set SOURCE_DATE_EPOCH");
    time.trim().parse().with_context(|| format!("git printed {time:?} as the last commit's time"))
}

/// An empty directory at `path` (whatever was there is removed).
fn fresh_dir(path: &Path) -> anyhow::Result<PathBuf> {
    if path.exists() {
        std::fs::remove_dir_all(path)
            .with_context(|| format!("cannot remove {}", path.display()))?;
    }
    std::fs::create_dir_all(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        let parse =
            |args: &[&str]| Options::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert_eq!(parse(&[]).unwrap(), Options::default());
        let arm =
            Options { target: Some("aarch64-unknown-linux-gnu".into()), deb: true, profile: None };
        assert_eq!(parse(&["--target", "aarch64-unknown-linux-gnu", "--deb"]).unwrap(), arm);
        assert_eq!(parse(&["--deb", "--target=aarch64-unknown-linux-gnu"]).unwrap(), arm);
        let ci = Options { profile: Some("ci-dist".into()), ..arm };
        assert_eq!(
            parse(&["--deb", "--target=aarch64-unknown-linux-gnu", "--profile", "ci-dist"])
                .unwrap(),
            ci
        );
        assert_eq!(
            parse(&["--profile=ci-dist", "--deb", "--target=aarch64-unknown-linux-gnu"]).unwrap(),
            ci
        );
        assert!(parse(&["--target"]).unwrap_err().to_string().contains("needs a target"));
        assert!(parse(&["--profile"]).unwrap_err().to_string().contains("needs a cargo profile"));
        assert_eq!(dir(RELEASE_PROFILE), crate::project_root().join("target/dist"));
        assert_eq!(dir("ci-dist"), crate::project_root().join("target/dist/ci-dist"));
        assert!(parse(&["--static"]).unwrap_err().to_string().contains("--static"));
    }
}
