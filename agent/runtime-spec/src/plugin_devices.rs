//! D2: what a container's device plugins gave it (their `Allocate` answers, with each
//! device node's type and numbers read from the host by the caller), applied to its spec
//! as containerd's CRI applies kubelet's request: each device node made in the container
//! and admitted by its device cgroup with the plugin's permissions, each mount a private
//! bind mount, the variables set over the image's (the container's own `env` wins), and
//! the annotations on the spec.

use std::collections::BTreeMap;
use std::path::PathBuf;

use oci_spec::runtime::{LinuxDevice, LinuxDeviceCgroup, Mount, Spec};

/// What a container's device plugins gave it, merged over its resources.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginDevices {
    /// Device nodes: where in the container, the host node's type, numbers, mode and
    /// owner, and the device cgroup's access (`r`, `w`, `m`).
    pub nodes: Vec<(LinuxDevice, String)>,
    pub mounts: Vec<PluginMount>,
    /// Variables, set before the container's `envFrom` and `env` (which win).
    pub env: Vec<(String, String)>,
    pub annotations: BTreeMap<String, String>,
}

/// A plugin's mount: a host path bound into the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginMount {
    pub container_path: PathBuf,
    pub host_path: PathBuf,
    pub read_only: bool,
}

impl PluginDevices {
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
            && self.mounts.is_empty()
            && self.env.is_empty()
            && self.annotations.is_empty()
    }
}

/// Adds the device nodes, their cgroup rules, the mounts and the annotations to `spec`
/// (the variables are set with the environment, [`crate::container_spec`]).
pub(crate) fn apply(spec: &mut Spec, devices: &PluginDevices) {
    if let Some(linux) = spec.linux_mut() {
        let mut nodes = linux.devices().clone().unwrap_or_default();
        let mut rules = Vec::new();
        for (node, access) in &devices.nodes {
            nodes.retain(|n| n.path() != node.path());
            nodes.push(node.clone());
            let mut rule = LinuxDeviceCgroup::default();
            rule.set_allow(true)
                .set_typ(Some(node.typ()))
                .set_major(Some(node.major()))
                .set_minor(Some(node.minor()))
                .set_access(Some(access.clone()));
            rules.push(rule);
        }
        if !nodes.is_empty() {
            linux.set_devices(Some(nodes));
        }
        if let Some(resources) = linux.resources_mut() {
            let mut all = resources.devices().clone().unwrap_or_default();
            all.extend(rules);
            resources.set_devices(Some(all));
        }
    }
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    for plugin in &devices.mounts {
        let mut options = vec!["rbind".to_owned(), "rprivate".to_owned()];
        options.push(if plugin.read_only { "ro" } else { "rw" }.to_owned());
        let mut mount = Mount::default();
        mount
            .set_destination(plugin.container_path.clone())
            .set_typ(Some("bind".to_owned()))
            .set_source(Some(plugin.host_path.clone()))
            .set_options(Some(options));
        mounts.push(mount);
    }
    spec.set_mounts(Some(mounts));
    if !devices.annotations.is_empty() {
        let mut annotations = spec.annotations().clone().unwrap_or_default();
        annotations.extend(devices.annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        spec.set_annotations(Some(annotations));
    }
}
