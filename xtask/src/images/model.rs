//! The artifact test image, `outpost.test/model:v1`: data files only (no shell, no
//! binary), as models and configuration are shipped for image volumes (KEP-4639, V4):
//! `/model/weights.txt` and `/model/config.json`. It cannot run; a pod mounts it with
//! `volumes[].image`. Deterministic, as the other images.

use std::path::Path;

use super::Image;
use crate::tarball::{Entry, archive};
use crate::{sha256, write_atomically};

/// The reference the tarball carries.
pub const IMAGE_NAME: &str = "outpost.test/model:v1";
/// The tarball's name in the images directory.
pub const TARBALL: &str = "model-oci.tar";
/// `/model/weights.txt`'s text (the tests read it back).
pub const WEIGHTS: &str = "outpost test weights v1\n";
/// `/model/config.json`'s text.
pub const CONFIG: &str = "{\"name\": \"outpost-test-model\", \"version\": 1}\n";

/// Builds `model-oci.tar` into `dir`.
pub fn build(dir: &Path) -> anyhow::Result<()> {
    let layer = archive(
        vec![
            Entry::dir("model"),
            Entry::file("model/config.json", CONFIG.as_bytes().to_vec()),
            Entry::file("model/weights.txt", WEIGHTS.as_bytes().to_vec()),
        ],
        0,
    )?;
    let config = serde_json::json!({});
    let image = Image::new(IMAGE_NAME, layer, config, "cargo xtask images (model files)")?;
    let oci = image.oci_archive()?;
    let path = dir.join(TARBALL);
    write_atomically(&path, &oci)?;
    println!("images: {} ({} bytes, sha256:{})", path.display(), oci.len(), sha256(&oci));
    Ok(())
}
