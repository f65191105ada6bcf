//! What a release tarball holds, `outpost-<version>/`:
//!
//! ```text
//! bin/outpost       the agent (0755)
//! bin/outpost-container-log
//!                   the container logger containerd's shims run, one per container (0755)
//! install.sh        deploy/install.sh (0755), which finds bin/ beside itself
//! outpost-state-key deploy/outpost-state-key (0755): the state key, a systemd credential
//! outpost.service   the systemd unit
//! outpost.yaml      the example config
//! rbac.yaml         the RBAC objects for an API server
//! manifests/*.yaml  the example pods
//! README.md
//! SHA256SUMS        of every other file (`sha256sum -c SHA256SUMS` in the directory)
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail, ensure};

use crate::tarball::{Entry, Kind, Listing};

/// The checksum file's name.
pub const SUMS: &str = "SHA256SUMS";

/// The files besides `manifests/*.yaml` and [`SUMS`], with their modes.
const REQUIRED: [(&str, u32); 8] = [
    ("bin/outpost", 0o755),
    ("bin/outpost-container-log", 0o755),
    ("install.sh", 0o755),
    ("outpost-state-key", 0o755),
    ("outpost.service", 0o644),
    ("outpost.yaml", 0o644),
    ("rbac.yaml", 0o644),
    ("README.md", 0o644),
];

/// The files of a release by their path inside `outpost-<version>/`, with their modes.
pub type Files = BTreeMap<String, (u32, Vec<u8>)>;

/// Reads the release's files from the checkout at `root`, with the built binaries: the
/// agent as `bin/outpost` and the container logger as `bin/outpost-container-log`.
pub fn collect(root: &Path, binaries: Binaries) -> anyhow::Result<Files> {
    let read = |relative: &str| {
        let path = root.join(relative);
        std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
    };
    let mut files = Files::new();
    files.insert("bin/outpost".into(), (0o755, binaries.agent));
    files.insert("bin/outpost-container-log".into(), (0o755, binaries.logger));
    for name in ["install.sh", "outpost-state-key"] {
        files.insert(name.into(), (0o755, read(&format!("deploy/{name}"))?));
    }
    for name in ["outpost.service", "outpost.yaml", "rbac.yaml"] {
        files.insert(name.into(), (0o644, read(&format!("deploy/{name}"))?));
    }
    files.insert("README.md".into(), (0o644, read("README.md")?));
    let manifests = root.join("deploy/manifests");
    let listing = std::fs::read_dir(&manifests)
        .with_context(|| format!("cannot list {}", manifests.display()))?;
    for entry in listing {
        let name = entry.with_context(|| format!("cannot list {}", manifests.display()))?;
        let name = name.file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") {
            files.insert(
                format!("manifests/{name}"),
                (0o644, read(&format!("deploy/manifests/{name}"))?),
            );
        }
    }
    ensure!(
        files.keys().any(|p| p.starts_with("manifests/")),
        "no example pods (*.yaml) in {}",
        manifests.display()
    );
    Ok(files)
}

/// The contents of the release's two executables.
#[derive(Debug)]
pub struct Binaries {
    pub agent: Vec<u8>,
    pub logger: Vec<u8>,
}

/// `sha256sum`'s output for `files` (sorted by path).
pub fn sha256sums(files: &Files) -> String {
    files.iter().map(|(path, (_, data))| format!("{}  {path}\n", crate::sha256(data))).collect()
}

/// The top directory of the tarball.
pub fn top(version: &str) -> String {
    format!("outpost-{version}")
}

/// The tarball's entries: `files` and [`SUMS`] below `outpost-<version>/`, with every
/// directory on the way.
pub fn entries(version: &str, files: &Files) -> Vec<Entry> {
    let top = top(version);
    let mut dirs = std::collections::BTreeSet::from([top.clone()]);
    let mut entries = Vec::new();
    for (path, (mode, data)) in files {
        let mut parent = Path::new(path).parent();
        while let Some(dir) = parent.filter(|p| !p.as_os_str().is_empty()) {
            dirs.insert(format!("{top}/{}", dir.display()));
            parent = dir.parent();
        }
        entries.push(Entry { mode: *mode, ..Entry::file(format!("{top}/{path}"), data.clone()) });
    }
    entries.push(Entry::file(format!("{top}/{SUMS}"), sha256sums(files).into_bytes()));
    entries.extend(dirs.into_iter().map(Entry::dir));
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    entries
}

/// Checks a tarball's members as read back: exactly the layout above, in sorted order,
/// all owned by root with `mtime`, executables 0755, and checksums that match.
pub fn verify(version: &str, listing: &Listing, mtime: u64) -> anyhow::Result<()> {
    let top = top(version);
    let members = &listing.entries;
    let paths: Vec<&str> = members.iter().map(|m| m.path.as_str()).collect();
    ensure!(paths.is_sorted(), "the tarball's entries are not sorted: {paths:?}");
    if let Some(other) = listing.mtimes.iter().find(|t| **t != mtime) {
        bail!("a tarball entry has mtime {other}, not {mtime}");
    }
    if let Some((path, uid, gid)) = listing.not_root.first() {
        bail!("{path} in the tarball is owned by {uid}:{gid}, not root");
    }
    let inside = format!("{top}/");
    let mut files = Files::new();
    for member in members {
        let relative =
            if member.path == top { Some("") } else { member.path.strip_prefix(&inside) };
        let Some(relative) = relative else { bail!("{} is outside {inside}", member.path) };
        match &member.kind {
            Kind::Dir => {
                ensure!(member.mode == 0o755, "{}: mode {:o}", member.path, member.mode)
            }
            Kind::File(data) if !relative.is_empty() => {
                files.insert(relative.to_owned(), (member.mode, data.clone()));
            }
            other => bail!("{}: unexpected entry {other:?}", member.path),
        }
    }
    let Some((_, sums)) = files.remove(SUMS) else { bail!("no {top}/{SUMS}") };
    let expected = sha256sums(&files);
    ensure!(
        sums == expected.as_bytes(),
        "{top}/{SUMS} does not match the files:\n{}\nexpected:\n{expected}",
        String::from_utf8_lossy(&sums)
    );
    for (path, mode) in REQUIRED {
        let Some((actual, _)) = files.get(path) else { bail!("no {top}/{path} in the tarball") };
        ensure!(*actual == mode, "{top}/{path} has mode {actual:o}, not {mode:o}");
    }
    ensure!(files.keys().any(|p| p.starts_with("manifests/")), "no {top}/manifests/ examples");
    let expected =
        |p: &&String| p.starts_with("manifests/") || REQUIRED.iter().any(|(r, _)| r == p);
    if let Some(stray) = files.keys().find(|p| !expected(p)) {
        bail!("unexpected file {top}/{stray} in the tarball");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Files {
        let mut files = Files::new();
        files.insert("bin/outpost".into(), (0o755, b"\x7fELF".to_vec()));
        files.insert("bin/outpost-container-log".into(), (0o755, b"\x7fELF-log".to_vec()));
        files.insert("install.sh".into(), (0o755, b"#!/bin/sh\n".to_vec()));
        files.insert("outpost-state-key".into(), (0o755, b"#!/bin/sh\n# key\n".to_vec()));
        for name in ["outpost.service", "outpost.yaml", "rbac.yaml", "README.md"] {
            files.insert(name.into(), (0o644, name.as_bytes().to_vec()));
        }
        files.insert("manifests/hello.yaml".into(), (0o644, b"kind: Pod\n".to_vec()));
        files
    }

    #[test]
    fn entries_are_the_sorted_layout_with_directories_and_sums() {
        let entries = entries("1.2.3", &files());
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "outpost-1.2.3",
                "outpost-1.2.3/README.md",
                "outpost-1.2.3/SHA256SUMS",
                "outpost-1.2.3/bin",
                "outpost-1.2.3/bin/outpost",
                "outpost-1.2.3/bin/outpost-container-log",
                "outpost-1.2.3/install.sh",
                "outpost-1.2.3/manifests",
                "outpost-1.2.3/manifests/hello.yaml",
                "outpost-1.2.3/outpost-state-key",
                "outpost-1.2.3/outpost.service",
                "outpost-1.2.3/outpost.yaml",
                "outpost-1.2.3/rbac.yaml",
            ]
        );
        let sums = entries.iter().find(|e| e.path.ends_with(SUMS)).unwrap();
        let Kind::File(sums) = &sums.kind else { panic!("{sums:?}") };
        let sums = String::from_utf8(sums.clone()).unwrap();
        assert_eq!(sums.lines().count(), 9);
        assert!(sums.contains(&format!("{}  bin/outpost\n", crate::sha256(b"\x7fELF"))));
    }

    #[test]
    fn verify_accepts_the_layout_and_names_what_is_wrong() {
        let listing = |entries: Vec<Entry>| Listing {
            mtimes: vec![7; entries.len()],
            entries,
            not_root: Vec::new(),
        };
        let good = listing(entries("1.2.3", &files()));
        verify("1.2.3", &good, 7).unwrap();

        let error = |listing: &Listing| verify("1.2.3", listing, 7).unwrap_err().to_string();
        assert!(
            error(&Listing { mtimes: vec![8; 12], ..listing(good.entries.clone()) })
                .contains("mtime 8")
        );
        let not_root = vec![("outpost-1.2.3/install.sh".to_owned(), 1000, 1000)];
        assert!(
            error(&Listing { not_root, ..listing(good.entries.clone()) }).contains("1000:1000")
        );
        let mut reversed = good.entries.clone();
        reversed.reverse();
        assert!(error(&listing(reversed)).contains("not sorted"));
        let mut tampered = good.entries.clone();
        let binary = tampered.iter_mut().find(|e| e.path.ends_with("bin/outpost")).unwrap();
        binary.kind = Kind::File(b"\x7fELF-tampered".to_vec());
        assert!(error(&listing(tampered)).contains("does not match"));
        let mut not_executable = files();
        not_executable.get_mut("install.sh").unwrap().0 = 0o644;
        assert!(error(&listing(entries("1.2.3", &not_executable))).contains("install.sh has mode"));
        let mut missing = files();
        missing.remove("rbac.yaml");
        assert!(error(&listing(entries("1.2.3", &missing))).contains("no outpost-1.2.3/rbac.yaml"));
        let mut stray = files();
        stray.insert("notes.txt".into(), (0o644, Vec::new()));
        assert!(error(&listing(entries("1.2.3", &stray))).contains("notes.txt"));
        let error = verify("1.2.4", &good, 7).unwrap_err().to_string();
        assert!(error.contains("outside outpost-1.2.4/"), "{error}");
    }
}
