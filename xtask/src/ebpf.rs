//! `cargo xtask ebpf [--check]`: builds the agent's BPF programs (`agent-ebpf/src/*.bpf.c`,
//! C with CO-RE) into `agent-ebpf/outpost.bpf.o`, the object the agent embeds, so that a
//! plain `cargo build` needs no clang. `--check` rebuilds into `target/ebpf/` and fails
//! when the committed object differs: a source changed without a rebuild.
//!
//! The build is reproducible on any machine: the kernel types come from
//! `agent-ebpf/src/kernel.h` (the fields the programs read, resolved by CO-RE against the
//! running kernel's BTF at load), not from the building kernel's `vmlinux.h`; clang is
//! pinned to one major version (another version emits other bytes), file paths are mapped
//! to stable names, and the DWARF is stripped (the `.BTF` and `.BTF.ext` sections CO-RE
//! needs stay).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// The compiler and strip tool, one pinned LLVM release (Debian `clang-19`, `llvm-19`).
const CLANG: &str = "clang-19";
const LLVM_STRIP: &str = "llvm-strip-19";
/// The program source and the committed object, relative to the `agent-ebpf` directory.
const SOURCE: &str = "src/outpost.bpf.c";
const OBJECT: &str = "outpost.bpf.o";

#[derive(Debug, Default)]
pub struct Options {
    pub check: bool,
}

impl Options {
    pub fn parse(args: &[String]) -> anyhow::Result<Options> {
        match args {
            [] => Ok(Options { check: false }),
            [flag] if flag == "--check" => Ok(Options { check: true }),
            _ => bail!("usage: cargo xtask ebpf [--check]"),
        }
    }
}

pub fn run(options: &Options) -> anyhow::Result<()> {
    let dir = crate::project_root().join("agent-ebpf");
    let work = crate::project_root().join("target/ebpf");
    if options.check {
        check(&dir, &work)?;
        println!("ebpf: agent-ebpf/{OBJECT} is up to date with its sources");
        return Ok(());
    }
    let object = build(&dir, &work)?;
    let path = dir.join(OBJECT);
    crate::write_atomically(&path, &object)?;
    println!(
        "ebpf: wrote {} ({} bytes, sha256 {})",
        path.display(),
        object.len(),
        crate::sha256(&object)
    );
    Ok(())
}

/// Rebuilds the object of `dir` (an `agent-ebpf` directory) in `work` and compares it
/// with the committed one.
pub fn check(dir: &Path, work: &Path) -> anyhow::Result<()> {
    let committed_path = dir.join(OBJECT);
    let committed = std::fs::read(&committed_path).with_context(|| {
        format!("cannot read {}: run `cargo xtask ebpf` and commit it", committed_path.display())
    })?;
    let rebuilt = build(dir, work)?;
    if rebuilt != committed {
        bail!(
            "{} is stale: rebuilding its sources gives another object (sha256 {} committed, {} \
             rebuilt). Run `cargo xtask ebpf` and commit {OBJECT}. (The clang release is an \
             input too: build with {CLANG}.)",
            committed_path.display(),
            crate::sha256(&committed),
            crate::sha256(&rebuilt),
        );
    }
    Ok(())
}

/// Builds the object of `dir` (an `agent-ebpf` directory), using `work` for the
/// intermediate object; returns the object's bytes.
pub fn build(dir: &Path, work: &Path) -> anyhow::Result<Vec<u8>> {
    for tool in [CLANG, LLVM_STRIP] {
        if which(tool).is_none() {
            bail!("{tool} is missing: install clang-19, llvm-19 and libbpf-dev (cargo xtask deps)");
        }
    }
    std::fs::create_dir_all(work).with_context(|| format!("cannot create {}", work.display()))?;
    let work = std::fs::canonicalize(work)
        .with_context(|| format!("cannot resolve {}", work.display()))?;
    let dir =
        std::fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;

    let unstripped = work.join("outpost.bpf.unstripped.o");
    let stripped = work.join(OBJECT);
    let mut clang = Command::new(CLANG);
    clang
        .current_dir(&dir)
        .args(["-target", "bpfel", "-O2", "-g", "-Wall", "-Werror"])
        .arg(format!("-fdebug-prefix-map={}=.", dir.display()))
        .arg("-fdebug-compilation-dir=.")
        .args(["-c", SOURCE, "-o"])
        .arg(&unstripped);
    crate::run(clang)?;
    let mut strip = Command::new(LLVM_STRIP);
    strip.arg("--strip-debug").arg(&unstripped).arg("-o").arg(&stripped);
    crate::run(strip)?;
    std::fs::read(&stripped).with_context(|| format!("cannot read {}", stripped.display()))
}

/// Where `tool` is on `PATH`.
fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(tool)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests;
