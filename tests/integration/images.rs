//! `outpost images import` into a real containerd: both tarball kinds end up as image
//! records, unpacked into overlayfs, and runnable.

use outpost_tests::needs;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, PoisonError};

use outpost_tests::containerd::{
    BUSYBOX_DOCKER, BUSYBOX_IMAGE, BUSYBOX_OCI, CtrCgroupParent, test_containerd, test_image,
};
use outpost_tests::outpost_bin;

/// Their own namespace: other tests import into the agent's default one concurrently,
/// and their import leases would show up in this file's checks.
const NAMESPACE: &str = "outpost-test-images";

/// The tests here import the same image name into the same namespace: one at a time, so
/// each checks what its own import did.
static SAME_IMAGE: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    SAME_IMAGE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn import(socket: &Path, tarballs: &[&Path]) -> Output {
    Command::new(outpost_bin())
        .args(["images", "import", "--containerd-namespace", NAMESPACE, "--containerd-socket"])
        .arg(socket)
        .args(tarballs)
        .output()
        .unwrap()
}

fn ctr(socket: &Path, args: &[&str]) -> String {
    let out = Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["--namespace", NAMESPACE])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "ctr {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The digest on the `imported NAME DIGEST` line for `name`.
fn imported_digest(stdout: &str, name: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("imported {name} ")))
        .unwrap_or_else(|| panic!("no `imported {name}` line in {stdout:?}"));
    let digest = line.rsplit(' ').next().unwrap().to_owned();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{line}");
    digest
}

/// Imports `tarball` and checks that the image is complete, unpacked and runs.
fn import_and_run(socket: &Path, tarball: &Path, media_type: &str) {
    let out = import(socket, &[tarball]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {}",
        tarball.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let digest = imported_digest(&stdout, BUSYBOX_IMAGE);

    // `ctr images check`: all content present and UNPACKED true (the snapshot of the top
    // chain ID exists in overlayfs).
    let check = ctr(socket, &["images", "check", &format!("name=={BUSYBOX_IMAGE}")]);
    let line =
        check.lines().find(|l| l.starts_with(BUSYBOX_IMAGE)).unwrap_or_else(|| panic!("{check}"));
    assert!(line.contains(&digest) && line.contains(media_type), "{line}");
    assert!(
        line.contains("complete") && line.trim_end().ends_with("true"),
        "not complete and unpacked: {line}"
    );
    let snapshots = ctr(socket, &["snapshots", "--snapshotter", "overlayfs", "ls"]);
    assert!(
        snapshots.lines().any(|l| l.starts_with("sha256:") && l.trim_end().ends_with("Committed")),
        "{snapshots}"
    );
    assert!(
        ctr(socket, &["leases", "ls"]).lines().all(|l| !l.starts_with("outpost-import-")),
        "lease left"
    );

    let id = format!("outpost-images-test-{}-{}", std::process::id(), digest.get(7..15).unwrap());
    let _cgroups = CtrCgroupParent(NAMESPACE);
    let ran = ctr(socket, &["run", "--rm", BUSYBOX_IMAGE, &id, "/bin/sh", "-c", "echo ok"]);
    assert_eq!(ran.trim(), "ok");
}

#[needs(containerd)]
#[test]
fn imports_oci_layout_and_docker_archive_tarballs_unpacked_and_runnable() {
    let socket = test_containerd();
    let (oci, docker) = (test_image(BUSYBOX_OCI), test_image(BUSYBOX_DOCKER));
    let _guard = one_at_a_time();
    import_and_run(&socket, &oci, "application/vnd.oci.image.manifest.v1+json");
    import_and_run(&socket, &docker, "application/vnd.docker.distribution.manifest.v2+json");
    // Again: everything exists already, and the record moves back to the OCI manifest.
    import_and_run(&socket, &oci, "application/vnd.oci.image.manifest.v1+json");
}

#[needs(containerd)]
#[test]
fn a_bad_tarball_fails_alone_and_is_named() {
    let socket = test_containerd();
    let docker = test_image(BUSYBOX_DOCKER);
    let _guard = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.tar");
    std::fs::write(&garbage, b"this is not a tarball").unwrap();
    let empty = dir.path().join("empty.tar");
    tar_with(&empty, "hello.txt", b"hi");

    let out = import(&socket, &[&garbage, &docker, &empty]);
    assert_eq!(out.status.code(), Some(1));
    imported_digest(&String::from_utf8_lossy(&out.stdout), BUSYBOX_IMAGE);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}: cannot read the tarball", garbage.display())),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("{}: not an image tarball", empty.display())), "{stderr}");
}

#[test]
fn an_absent_containerd_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("containerd.sock");
    let out = import(&socket, &[Path::new("/nonexistent.tar")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&socket.display().to_string()) && stderr.contains("is containerd running?"),
        "{stderr}"
    );
}

fn tar_with(path: &Path, name: &str, data: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), data).unwrap();
    let status = Command::new("tar")
        .arg("-cf")
        .arg(path)
        .arg("-C")
        .arg(dir.path())
        .arg(name)
        .status()
        .unwrap();
    assert!(status.success());
}
