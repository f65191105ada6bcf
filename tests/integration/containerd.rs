//! The runtime tests' plumbing: the private containerd (`cargo xtask containerd`) runs,
//! and both test image tarballs (`cargo xtask images`) import into it and run.

use outpost_tests::needs;
use std::path::Path;
use std::process::Command;

use outpost_tests::containerd::{
    BUSYBOX_DOCKER, BUSYBOX_IMAGE, BUSYBOX_OCI, CtrCgroupParent, test_containerd, test_image,
};

const NAMESPACE: &str = "outpost-test";

/// `ctr --address SOCKET -n outpost-test ARGS`; its stdout, or a panic with its stderr.
fn ctr(socket: &Path, args: &[&str]) -> String {
    let output = Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["-n", NAMESPACE])
        .args(args)
        .output()
        .expect("cannot run ctr");
    assert!(
        output.status.success(),
        "ctr {args:?} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[needs(containerd)]
#[test]
fn test_images_import_into_the_test_containerd_and_run() {
    let socket = test_containerd();
    let (oci, docker) = (test_image(BUSYBOX_OCI), test_image(BUSYBOX_DOCKER));
    for (n, tarball) in [oci, docker].iter().enumerate() {
        // Drop the name, so what runs is what this import created.
        let _ = Command::new("ctr")
            .arg("--address")
            .arg(&socket)
            .args(["-n", NAMESPACE, "images", "rm", BUSYBOX_IMAGE])
            .output();
        ctr(&socket, &["images", "import", tarball.to_str().unwrap()]);
        let images = ctr(&socket, &["images", "ls", "-q"]);
        assert!(
            images.lines().any(|l| l.trim() == BUSYBOX_IMAGE),
            "{} did not import as {BUSYBOX_IMAGE}: {images:?}",
            tarball.display()
        );
        // The task's exit status is what ctr exits with: a status the image's shell can
        // only give by running (ctr 1.6 may lose a short task's stdout: its copy is not
        // awaited before the task is deleted).
        let _cgroups = CtrCgroupParent(NAMESPACE);
        let id = format!("plumbing-{}-{n}", std::process::id());
        let run = ["run", "--rm", BUSYBOX_IMAGE, &id, "/bin/sh", "-c", "test -x /bin/sh && exit 7"];
        let status = Command::new("ctr")
            .arg("--address")
            .arg(&socket)
            .args(["-n", NAMESPACE])
            .args(run)
            .status()
            .expect("cannot run ctr");
        assert_eq!(status.code(), Some(7), "from {}", tarball.display());
    }
}
