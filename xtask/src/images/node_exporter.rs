//! The node-exporter test image, `outpost.test/node-exporter:latest`, for D6's acceptance
//! test (mount propagation as node-exporter's Helm chart uses it): Debian's
//! `prometheus-node-exporter` binary as `/bin/node_exporter` (the upstream image's path
//! and entrypoint), with what it links: Debian builds it with cgo, so it needs libc and
//! the dynamic loader, which `ldd` names. Nothing else (no shell): the image is the
//! binary and ~2 MiB of glibc.
//!
//! Without the package the image is not built (a message says so), and with `CI=true`
//! that is an error (`cargo xtask deps` installs it). Deterministic, as the other images.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::json;

use super::{Image, PATH_ENV};
use crate::tarball::{Entry, archive};
use crate::{sha256, write_atomically};

/// The reference the tarball carries.
pub const IMAGE_NAME: &str = "outpost.test/node-exporter:latest";
/// The tarball's name in the images directory.
pub const TARBALL: &str = "node-exporter-oci.tar";
/// Where the Debian package `prometheus-node-exporter` puts the binary.
const BINARY: &str = "/usr/bin/prometheus-node-exporter";
/// Where the image has it, as the upstream image (`prom/node-exporter`).
const IN_IMAGE: &str = "bin/node_exporter";
/// The upstream image's user: nobody.
const NOBODY: &str = "65534:65534";

/// Builds `node-exporter-oci.tar` into `dir`.
pub fn build(dir: &Path) -> anyhow::Result<()> {
    if !Path::new(BINARY).is_file() {
        if crate::in_ci() {
            bail!("no {BINARY}: install prometheus-node-exporter (cargo xtask deps) (CI=true)");
        }
        println!(
            "images: no {BINARY}; {TARBALL} not built (D6's node-exporter test needs it: cargo \
             xtask deps)"
        );
        return Ok(());
    }
    let binary = fs::read(BINARY).with_context(|| format!("cannot read {BINARY}"))?;
    let mut entries = vec![Entry::executable(IN_IMAGE, binary)];
    for library in libraries(BINARY)? {
        let bytes = fs::read(&library).with_context(|| format!("cannot read {library}"))?;
        entries.push(Entry::executable(library.trim_start_matches('/'), bytes));
    }
    entries.extend(parents(&entries));
    let layer = archive(entries, 0)?;
    let config = json!({
        "Env": [PATH_ENV],
        "Entrypoint": [format!("/{IN_IMAGE}")],
        "User": NOBODY,
        "ExposedPorts": { "9100/tcp": {} },
    });
    let created_by = format!("cargo xtask images ({BINARY} and the libraries it links)");
    let image = Image::new(IMAGE_NAME, layer, config, &created_by)?;
    let oci = image.oci_archive()?;
    let path = dir.join(TARBALL);
    write_atomically(&path, &oci)?;
    println!("images: {} ({} bytes, sha256:{})", path.display(), oci.len(), sha256(&oci));
    Ok(())
}

/// The absolute paths of the shared libraries and the loader `binary` needs, as `ldd`
/// lists them (`libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)`, and the loader's
/// own line); the kernel's vDSO has none.
fn libraries(binary: &str) -> anyhow::Result<Vec<String>> {
    let out = Command::new("ldd").arg(binary).output().context("cannot run ldd")?;
    if !out.status.success() {
        bail!("ldd {binary} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(ldd_paths(&String::from_utf8_lossy(&out.stdout)))
}

/// The absolute paths in `ldd`'s output.
fn ldd_paths(ldd: &str) -> Vec<String> {
    ldd.lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, resolved)) => resolved.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| path.to_owned())
        })
        .collect()
}

/// The directories above the files of `entries`, each once.
fn parents(entries: &[Entry]) -> Vec<Entry> {
    let dirs: BTreeSet<String> = entries
        .iter()
        .flat_map(|entry| {
            Path::new(&entry.path)
                .ancestors()
                .skip(1)
                .filter(|dir| !dir.as_os_str().is_empty())
                .map(|dir| dir.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    dirs.into_iter().map(Entry::dir).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_libraries_are_the_paths_ldd_resolves() {
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007fee)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007fef)\n";
        assert_eq!(
            ldd_paths(ldd),
            ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
        );
    }

    #[test]
    fn each_directory_above_a_file_is_an_entry_once() {
        let files = [
            Entry::file("bin/node_exporter", Vec::new()),
            Entry::file("lib/x86_64-linux-gnu/libc.so.6", Vec::new()),
            Entry::file("lib64/ld-linux-x86-64.so.2", Vec::new()),
        ];
        let dirs: Vec<String> = parents(&files).into_iter().map(|e| e.path).collect();
        assert_eq!(dirs, ["bin", "lib", "lib/x86_64-linux-gnu", "lib64"]);
    }
}
