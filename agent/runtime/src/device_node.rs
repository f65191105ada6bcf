//! A device node of the host as a container's spec takes it, containerd's
//! `oci.DeviceFromPath`: its type (`b` or `c`), major and minor numbers, permission bits
//! and owner, read from the host's node, at a path in the container. Device plugins'
//! devices (D2) and block volumes (K3) are given this way.

use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use nix::sys::stat::{major, minor};
use oci_spec::runtime::{LinuxDevice, LinuxDeviceBuilder, LinuxDeviceType};

/// The node whose `metadata` the caller read, at `container_path`; `None` when it is not
/// a character or block device.
pub fn from_metadata(metadata: &Metadata, container_path: &Path) -> Option<LinuxDevice> {
    let kind = metadata.file_type();
    let typ = if kind.is_char_device() {
        LinuxDeviceType::C
    } else if kind.is_block_device() {
        LinuxDeviceType::B
    } else {
        return None;
    };
    let rdev = metadata.rdev();
    LinuxDeviceBuilder::default()
        .path(container_path)
        .typ(typ)
        .major(i64::try_from(major(rdev)).ok()?)
        .minor(i64::try_from(minor(rdev)).ok()?)
        .file_mode(metadata.mode() & 0o7777)
        .uid(metadata.uid())
        .gid(metadata.gid())
        .build()
        .ok()
}
