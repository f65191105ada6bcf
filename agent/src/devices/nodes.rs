//! D2: the plugins' answers for one container, made into what its spec takes: each
//! `DeviceSpec`'s host node read from the host (a directory gives every device node
//! under it, as containerd's `HostDevicesFromPath` walks it), each mount, variable and
//! annotation as given.

use std::path::{Path, PathBuf};

use oci_spec::runtime::LinuxDevice;
use outpost_runtime::device_node::from_metadata as node;
use outpost_runtime::spec::{PluginDevices, PluginMount};

use super::ContainerDevices;

/// Directories under a device directory that hold no device to give (containerd's list).
const SKIPPED: [&str; 7] = ["pts", "shm", "fd", "mqueue", ".lxc", ".lxd-mounts", ".udev"];

/// A plugin's device that cannot be given.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("device plugin {resource:?} gave {}, which cannot be read on the host: {source}", path.display())]
    Read {
        resource: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("device plugin {resource:?} gave {}, which is not a device node", path.display())]
    NotADevice { resource: String, path: PathBuf },
}

/// What the container's spec takes from its plugins' answers.
pub fn plugin_devices(devices: &ContainerDevices) -> Result<PluginDevices, Error> {
    let mut out = PluginDevices::default();
    for (resource, response) in &devices.responses {
        for spec in &response.devices {
            let host = Path::new(&spec.host_path);
            let read =
                |source| Error::Read { resource: resource.clone(), path: host.to_owned(), source };
            let metadata = std::fs::metadata(host).map_err(read)?;
            if metadata.is_dir() {
                let mut found = Vec::new();
                walk(host, Path::new(&spec.container_path), &mut found);
                out.nodes.extend(found.into_iter().map(|node| (node, spec.permissions.clone())));
                continue;
            }
            let Some(node) = node(&metadata, Path::new(&spec.container_path)) else {
                return Err(Error::NotADevice {
                    resource: resource.clone(),
                    path: host.to_owned(),
                });
            };
            out.nodes.push((node, spec.permissions.clone()));
        }
        out.mounts.extend(response.mounts.iter().map(|m| PluginMount {
            container_path: m.container_path.clone().into(),
            host_path: m.host_path.clone().into(),
            read_only: m.read_only,
        }));
        let mut env: Vec<(String, String)> = response.envs.clone().into_iter().collect();
        env.sort();
        out.env.extend(env);
        out.annotations.extend(response.annotations.clone());
    }
    Ok(out)
}

/// The CDI names the plugins' answers give (D3).
pub fn cdi_names(devices: &ContainerDevices) -> Vec<String> {
    let names = devices.responses.iter().flat_map(|(_, r)| r.cdi_devices.iter());
    names.map(|d| d.name.clone()).collect()
}

/// The device nodes under `dir`, at the same place under `container_dir`; what cannot be
/// read is left out, as containerd leaves it.
fn walk(dir: &Path, container_dir: &Path, found: &mut Vec<LinuxDevice>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let (host, inside) = (entry.path(), container_dir.join(&name));
        let Ok(metadata) = std::fs::metadata(&host) else { continue };
        if metadata.is_dir() {
            if !SKIPPED.iter().any(|s| name == *s) {
                walk(&host, &inside, found);
            }
        } else if let Some(node) = node(&metadata, &inside) {
            found.push(node);
        }
    }
}
