//! The `.deb` of a release, built with `dpkg-deb` from a staged tree:
//!
//! ```text
//! /usr/bin/outpost
//! /usr/bin/outpost-container-log             the container logger (found beside outpost)
//! /usr/sbin/outpost-state-key                makes the state key, a systemd credential
//! /lib/systemd/system/outpost.service       ExecStart=/usr/bin/outpost ...
//! /etc/outpost/outpost.yaml                 a conffile: dpkg keeps the admin's edits
//! /etc/outpost/manifests/                   empty: the package runs no pod by itself
//! /var/lib/outpost/{,images/}               0700, as install.sh makes them
//! /usr/share/doc/outpost/                   README.md, rbac.yaml, examples/manifests/
//! ```
//!
//! postinst makes the state key (`outpost-state-key`: sealed by systemd-creds to the TPM2
//! and the host key, or to the host key), reloads systemd (if it runs) and starts nothing;
//! prerm stops the agent on removal (its pods keep running, `KillMode=process`); postrm
//! reloads systemd, and on purge removes the state key and its drop-in.

use std::process::Command;

use anyhow::{Context, ensure};

use super::layout::Files;
use crate::tarball::Entry;

/// The `Maintainer` field (dpkg requires one).
const MAINTAINER: &str = "Outpost maintainers <outpost@localhost>";
/// The packages the agent drives; recommended, not required: an edge box may run a
/// containerd that is not Debian's.
const RECOMMENDS: &str = "containerd, runc, containernetworking-plugins";
const UNIT: &str = "lib/systemd/system/outpost.service";
const CONFIG: &str = "etc/outpost/outpost.yaml";
const DOC: &str = "usr/share/doc/outpost";

const POSTINST: &str = "#!/bin/sh
# Makes the state key once (it seals the API pods' Secrets at rest; an existing one is
# kept), and lets systemd see the new or changed unit. Never enables or starts the agent.
set -e
if [ \"$1\" = configure ]; then
    /usr/sbin/outpost-state-key || echo \"outpost: no state key: Secrets stay unencrypted at rest\" >&2
fi
if [ \"$1\" = configure ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
";
const PRERM: &str = "#!/bin/sh
# Stops the agent when the package is removed (its pods keep running: KillMode=process).
# An upgrade leaves the old agent running: `systemctl restart outpost` runs the new one.
set -e
if [ \"$1\" = remove ] && [ -d /run/systemd/system ]; then
    systemctl stop outpost.service || true
fi
";
const POSTRM: &str = "#!/bin/sh
# Lets systemd forget the removed unit; a purge also removes the state key and its drop-in.
set -e
if [ \"$1\" = purge ]; then
    rm -f /etc/credstore.encrypted/outpost.state-key \\
        /etc/systemd/system/outpost.service.d/state-key.conf
    rmdir /etc/systemd/system/outpost.service.d 2>/dev/null || true
fi
if { [ \"$1\" = remove ] || [ \"$1\" = purge ]; } && [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
";

/// Debian's spelling of a Cargo version: a pre-release sorts before its release
/// (`1.0.0-rc.1` becomes `1.0.0~rc.1`; a `-` would start a Debian revision).
pub fn debian_version(cargo: &str) -> String {
    cargo.replacen('-', "~", 1)
}

/// The unit as the package installs it: the binary is `/usr/bin/outpost`.
pub fn unit(service: &str) -> anyhow::Result<String> {
    let from = "\nExecStart=/usr/local/bin/outpost ";
    ensure!(
        service.contains(from),
        "deploy/outpost.service has no `ExecStart=/usr/local/bin/outpost ...` line to point at /usr/bin/outpost"
    );
    Ok(service.replace(from, "\nExecStart=/usr/bin/outpost ").replace(
        "Installed by deploy/install.sh to /etc/systemd/system/outpost.service.",
        "Installed by the outpost package to /lib/systemd/system/outpost.service.",
    ))
}

/// The newest `GLIBC_x.y[.z]` symbol version the binary needs, as `x.y[.z]`.
pub fn glibc_needed(binary: &[u8]) -> Option<String> {
    let marker = b"GLIBC_";
    let mut newest: Option<Vec<u32>> = None;
    for start in 0..binary.len().saturating_sub(marker.len()) {
        if !binary[start..].starts_with(marker) {
            continue;
        }
        let rest = &binary[start + marker.len()..];
        let end =
            rest.iter().position(|b| !(b.is_ascii_digit() || *b == b'.')).unwrap_or(rest.len());
        let text = String::from_utf8_lossy(&rest[..end]);
        let parts: Option<Vec<u32>> = text.split('.').map(|p| p.parse().ok()).collect();
        if let Some(parts) = parts.filter(|p| p.len() >= 2)
            && newest.as_ref().is_none_or(|n| parts > *n)
        {
            newest = Some(parts);
        }
    }
    newest.map(|n| n.iter().map(u32::to_string).collect::<Vec<_>>().join("."))
}

/// DEBIAN/control.
pub fn control(version: &str, arch: &str, installed_kib: u64, glibc: Option<&str>) -> String {
    let depends = match glibc {
        Some(glibc) => format!("libc6 (>= {glibc})"),
        None => "libc6".to_owned(),
    };
    format!(
        "Package: outpost
Version: {}
Architecture: {arch}
Maintainer: {MAINTAINER}
Installed-Size: {installed_kib}
Depends: {depends}
Recommends: {RECOMMENDS}
Section: admin
Priority: optional
Description: small, offline-first node agent that runs pods through containerd
 Outpost does kubelet's static-pod job on edge boxes: a pod manifest dropped in
 /etc/outpost/manifests runs through containerd; a bad manifest gets a clear
 error and breaks nothing else. Pods can also come from a manifest URL, a local
 push API, or a Kubernetes API server, and keep running offline.
 .
 The service is installed but neither enabled nor started: review
 /etc/outpost/outpost.yaml, then run `systemctl enable --now outpost`.
",
        debian_version(version)
    )
}

/// The staged tree: the package's files and DEBIAN/ (paths relative to the staging root).
pub fn entries(version: &str, arch: &str, files: &Files) -> anyhow::Result<Vec<Entry>> {
    let file = |path: &str| {
        files
            .get(path)
            .map(|(_, data)| data.clone())
            .with_context(|| format!("no {path} in the release"))
    };
    let service =
        String::from_utf8(file("outpost.service")?).context("outpost.service is not UTF-8")?;
    let binary = file("bin/outpost")?;
    let logger = file("bin/outpost-container-log")?;
    // The newer of the two executables' needs.
    let glibc = glibc_needed(&[binary.as_slice(), &logger].concat());
    let mut entries = vec![
        Entry::executable("usr/bin/outpost", binary),
        Entry::executable("usr/bin/outpost-container-log", logger),
        Entry::executable("usr/sbin/outpost-state-key", file("outpost-state-key")?),
        Entry::file(UNIT, unit(&service)?.into_bytes()),
        Entry::file(CONFIG, file("outpost.yaml")?),
        Entry::dir("etc/outpost/manifests"),
        Entry { mode: 0o700, ..Entry::dir("var/lib/outpost") },
        Entry { mode: 0o700, ..Entry::dir("var/lib/outpost/images") },
        Entry::file(format!("{DOC}/README.md"), file("README.md")?),
        Entry::file(format!("{DOC}/rbac.yaml"), file("rbac.yaml")?),
    ];
    for (path, (_, data)) in files.range("manifests/".to_owned()..) {
        let Some(name) = path.strip_prefix("manifests/") else { break };
        entries.push(Entry::file(format!("{DOC}/examples/manifests/{name}"), data.clone()));
    }
    let mut dirs = std::collections::BTreeSet::new();
    for entry in &entries {
        let mut parent = std::path::Path::new(&entry.path).parent();
        while let Some(dir) = parent.filter(|p| !p.as_os_str().is_empty()) {
            dirs.insert(dir.to_string_lossy().into_owned());
            parent = dir.parent();
        }
    }
    dirs.retain(|dir| !entries.iter().any(|e| e.path == *dir));
    entries.extend(dirs.into_iter().map(Entry::dir));
    let installed_kib = entries
        .iter()
        .map(|e| match &e.kind {
            crate::tarball::Kind::File(data) => (data.len() as u64).div_ceil(1024),
            _ => 1,
        })
        .sum();
    entries.extend([
        Entry::dir("DEBIAN"),
        Entry::file(
            "DEBIAN/control",
            control(version, arch, installed_kib, glibc.as_deref()).into_bytes(),
        ),
        Entry::file("DEBIAN/conffiles", format!("/{CONFIG}\n").into_bytes()),
        Entry::executable("DEBIAN/postinst", POSTINST.as_bytes().to_vec()),
        Entry::executable("DEBIAN/prerm", PRERM.as_bytes().to_vec()),
        Entry::executable("DEBIAN/postrm", POSTRM.as_bytes().to_vec()),
    ]);
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

/// Builds `out` from the tree staged in `staging` (owned by root in the package, mtimes
/// clamped to `mtime`), then checks it with `dpkg-deb` (and lintian, if installed).
pub fn build(
    staging: &std::path::Path,
    out: &std::path::Path,
    version: &str,
    arch: &str,
    mtime: u64,
) -> anyhow::Result<()> {
    let mut command = Command::new("dpkg-deb");
    command.args(["--root-owner-group", "-Zxz", "--build"]).arg(staging).arg(out);
    command.env("SOURCE_DATE_EPOCH", mtime.to_string());
    crate::run(command).context("dpkg-deb (Debian package dpkg) builds the .deb")?;

    let query = |flag: &str, members: &[&str]| -> anyhow::Result<String> {
        let mut command = Command::new("dpkg-deb");
        command.arg(flag).arg(out).args(members);
        let shown = crate::show(&command);
        let output = command.output().with_context(|| format!("cannot run `{shown}`"))?;
        ensure!(
            output.status.success(),
            "`{shown}` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let fields = query("--field", &[])?;
    for expected in [
        "Package: outpost".to_owned(),
        format!("Version: {}", debian_version(version)),
        format!("Architecture: {arch}"),
    ] {
        ensure!(
            fields.lines().any(|l| l == expected),
            "{} lacks `{expected}`:\n{fields}",
            out.display()
        );
    }
    let conffiles = query("--info", &["conffiles"])?;
    ensure!(conffiles == format!("/{CONFIG}\n"), "{}: conffiles are {conffiles:?}", out.display());
    let contents = query("--contents", &[])?;
    for line in contents.lines() {
        ensure!(
            line.contains(" root/root "),
            "{} holds a file not owned by root: {line}",
            out.display()
        );
    }
    let binaries = ["usr/bin/outpost", "usr/bin/outpost-container-log"];
    for path in binaries.into_iter().chain([UNIT, CONFIG, "etc/outpost/manifests/"]) {
        let listed = contents.lines().any(|l| l.ends_with(&format!(" ./{path}")));
        ensure!(listed, "{} does not contain /{path}:\n{contents}", out.display());
    }
    let mut info = Command::new("dpkg-deb");
    info.arg("--info").arg(out);
    crate::run(info)?;
    println!("{contents}");
    lintian(out);
    Ok(())
}

/// Runs lintian on the package if it is installed (it is not a dependency); prints what
/// it says without failing the build.
fn lintian(deb: &std::path::Path) {
    let mut command = Command::new("lintian");
    command.arg(deb);
    match command.output() {
        Ok(out) => println!(
            "dist: lintian ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => println!("dist: lintian is not installed; skipped"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tarball::Kind;

    #[test]
    fn debian_versions_sort_pre_releases_first() {
        assert_eq!(debian_version("0.1.0"), "0.1.0");
        assert_eq!(debian_version("1.0.0-rc.1"), "1.0.0~rc.1");
        assert_eq!(debian_version("1.0.0-rc-2+build.5"), "1.0.0~rc-2+build.5");
    }

    #[test]
    fn the_unit_runs_usr_bin_outpost() {
        let service =
            std::fs::read_to_string(crate::project_root().join("deploy/outpost.service")).unwrap();
        let installed = unit(&service).unwrap();
        assert!(
            installed
                .contains("\nExecStart=/usr/bin/outpost run --config /etc/outpost/outpost.yaml\n")
        );
        assert!(!installed.contains("/usr/local/bin"), "{installed}");
        assert!(installed.contains("/lib/systemd/system/outpost.service"));
        assert!(unit("[Service]\nExecStart=/opt/outpost run\n").is_err());
    }

    #[test]
    fn glibc_needed_is_the_newest_symbol_version() {
        let dynstr = b"\0memcpy\0GLIBC_2.2.5\0GLIBC_2.34\0GLIBC_PRIVATE\0GLIBC_2.17\0GLIBC_2.3.4\0";
        assert_eq!(glibc_needed(dynstr).as_deref(), Some("2.34"));
        assert_eq!(glibc_needed(b"GLIBC_2.3.4\0GLIBC_2.3\0").as_deref(), Some("2.3.4"));
        assert_eq!(glibc_needed(b"static binary, GLIBC_TUNABLES only"), None);
    }

    #[test]
    fn control_names_the_architecture_and_libc() {
        let text = control("1.0.0-rc.1", "arm64", 12345, Some("2.34"));
        let fields: Vec<&str> = text.lines().filter(|l| !l.starts_with(' ')).collect();
        assert_eq!(
            fields,
            [
                "Package: outpost",
                "Version: 1.0.0~rc.1",
                "Architecture: arm64",
                &format!("Maintainer: {MAINTAINER}"),
                "Installed-Size: 12345",
                "Depends: libc6 (>= 2.34)",
                "Recommends: containerd, runc, containernetworking-plugins",
                "Section: admin",
                "Priority: optional",
                "Description: small, offline-first node agent that runs pods through containerd",
            ]
        );
        assert!(text.ends_with("\n"));
        assert!(text.lines().skip(fields.len()).all(|l| l.starts_with(' ') && l.len() <= 80));
        assert!(control("0.1.0", "amd64", 1, None).contains("\nDepends: libc6\n"));
    }

    #[test]
    fn the_tree_puts_each_file_in_its_debian_place() {
        let mut files = Files::new();
        files.insert("bin/outpost".into(), (0o755, b"\0GLIBC_2.28\0".to_vec()));
        files.insert("bin/outpost-container-log".into(), (0o755, b"\0GLIBC_2.34\0".to_vec()));
        let service =
            "[Service]\nExecStart=/usr/local/bin/outpost run --config /etc/outpost/outpost.yaml\n";
        files.insert("outpost.service".into(), (0o644, service.as_bytes().to_vec()));
        for name in [
            "outpost.yaml",
            "rbac.yaml",
            "README.md",
            "install.sh",
            "outpost-state-key",
            "SHA256SUMS",
        ] {
            files.insert(name.into(), (0o644, name.as_bytes().to_vec()));
        }
        files.insert("manifests/hello.yaml".into(), (0o644, b"kind: Pod\n".to_vec()));
        let entries = entries("0.1.0", "arm64", &files).unwrap();
        let listing: Vec<(&str, u32, bool)> = entries
            .iter()
            .map(|e| (e.path.as_str(), e.mode, matches!(e.kind, Kind::Dir)))
            .collect();
        assert_eq!(
            listing,
            [
                ("DEBIAN", 0o755, true),
                ("DEBIAN/conffiles", 0o644, false),
                ("DEBIAN/control", 0o644, false),
                ("DEBIAN/postinst", 0o755, false),
                ("DEBIAN/postrm", 0o755, false),
                ("DEBIAN/prerm", 0o755, false),
                ("etc", 0o755, true),
                ("etc/outpost", 0o755, true),
                ("etc/outpost/manifests", 0o755, true),
                ("etc/outpost/outpost.yaml", 0o644, false),
                ("lib", 0o755, true),
                ("lib/systemd", 0o755, true),
                ("lib/systemd/system", 0o755, true),
                ("lib/systemd/system/outpost.service", 0o644, false),
                ("usr", 0o755, true),
                ("usr/bin", 0o755, true),
                ("usr/bin/outpost", 0o755, false),
                ("usr/bin/outpost-container-log", 0o755, false),
                ("usr/sbin", 0o755, true),
                ("usr/sbin/outpost-state-key", 0o755, false),
                ("usr/share", 0o755, true),
                ("usr/share/doc", 0o755, true),
                ("usr/share/doc/outpost", 0o755, true),
                ("usr/share/doc/outpost/README.md", 0o644, false),
                ("usr/share/doc/outpost/examples", 0o755, true),
                ("usr/share/doc/outpost/examples/manifests", 0o755, true),
                ("usr/share/doc/outpost/examples/manifests/hello.yaml", 0o644, false),
                ("usr/share/doc/outpost/rbac.yaml", 0o644, false),
                ("var", 0o755, true),
                ("var/lib", 0o755, true),
                ("var/lib/outpost", 0o700, true),
                ("var/lib/outpost/images", 0o700, true),
            ]
        );
        let text = |path: &str| {
            let entry = entries.iter().find(|e| e.path == path).unwrap();
            let Kind::File(data) = &entry.kind else { panic!("{entry:?}") };
            String::from_utf8(data.clone()).unwrap()
        };
        assert_eq!(text("DEBIAN/conffiles"), "/etc/outpost/outpost.yaml\n");
        assert!(text("DEBIAN/control").contains("\nDepends: libc6 (>= 2.34)\n"));
        assert!(text("DEBIAN/control").contains("\nArchitecture: arm64\n"));
        assert!(
            text("lib/systemd/system/outpost.service").contains("ExecStart=/usr/bin/outpost run")
        );
        assert!(text("DEBIAN/postinst").contains("daemon-reload"));
        assert!(text("DEBIAN/postinst").contains("/usr/sbin/outpost-state-key"));
        assert!(text("DEBIAN/postrm").contains("/etc/credstore.encrypted/outpost.state-key"));
        let postinst = text("DEBIAN/postinst");
        let commands: Vec<&str> = postinst.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(
            commands.iter().all(|l| !l.contains("start") && !l.contains("enable")),
            "no auto-start: {commands:?}"
        );
    }
}
