//! The kubectl test image, `outpost.test/kubectl:latest`: the busybox image's rootfs with
//! the host's `kubectl` (a static Go binary) as `/usr/local/bin/kubectl`, for tests of
//! in-cluster configuration (K1): a container runs `kubectl` with nothing but what the
//! node gives it (the Service variables, the service account token and CA).
//!
//! The binary is the `kubectl` found on `PATH` (its link resolved). Without one the image
//! is not built (a message says so), and with `CI=true` that is an error: the tests that
//! need the image fail then too. Deterministic, as the other images.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::etcd::static_elf;
use super::{Image, PATH_ENV, busybox_config, read_busybox, rootfs_entries};
use crate::tarball::{Entry, archive};
use crate::{sha256, write_atomically};

/// The reference the tarball carries.
pub const IMAGE_NAME: &str = "outpost.test/kubectl:latest";
/// The tarball's name in the images directory.
pub const TARBALL: &str = "kubectl-oci.tar";

/// The `kubectl` on `PATH`, its links resolved.
fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
        .and_then(|found| fs::canonicalize(found).ok())
}

/// Builds `kubectl-oci.tar` into `dir`.
pub fn build(dir: &Path) -> anyhow::Result<()> {
    let Some(kubectl) = find() else {
        if crate::in_ci() {
            bail!("no `kubectl` on PATH: the kubectl test image cannot be built (CI=true)");
        }
        println!("images: no `kubectl` on PATH; {TARBALL} not built (the K1 tests need it)");
        return Ok(());
    };
    let binary =
        fs::read(&kubectl).with_context(|| format!("cannot read {}", kubectl.display()))?;
    static_elf(&binary)
        .with_context(|| format!("{} cannot run in the image", kubectl.display()))?;
    let mut entries = rootfs_entries(&read_busybox()?);
    entries.push(Entry::dir("usr/local"));
    entries.push(Entry::dir("usr/local/bin"));
    entries.push(Entry::executable("usr/local/bin/kubectl", binary));
    let layer = archive(entries, 0)?;
    let mut config = busybox_config();
    config["Env"] = serde_json::json!([PATH_ENV, "HOME=/root"]);
    let created_by = format!("cargo xtask images (busybox-static, {})", kubectl.display());
    let image = Image::new(IMAGE_NAME, layer, config, &created_by)?;
    let oci = image.oci_archive()?;
    let path = dir.join(TARBALL);
    write_atomically(&path, &oci)?;
    println!("images: {} ({} bytes, sha256:{})", path.display(), oci.len(), sha256(&oci));
    Ok(())
}
