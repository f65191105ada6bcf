//! A CDI spec's container edits (the spec's own, applied once with any of its devices,
//! and each device's) as they are written, their validation, and how the edits of several
//! devices add up, as the CDI library's `ContainerEdits` does.

use serde::{Deserialize, Deserializer};

/// The hook names the OCI runtime spec has.
pub const HOOK_NAMES: [&str; 6] =
    ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"];

/// Why container edits are refused; in the library's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("invalid container edits: invalid environment variable {0:?}")]
    Env(String),
    #[error("invalid (empty) device path")]
    EmptyDevicePath,
    #[error("device {path:?}: invalid type {typ:?}")]
    DeviceType { path: String, typ: String },
    #[error("device {path:?}: invalid permissions {permissions:?}")]
    Permissions { path: String, permissions: String },
    #[error("invalid hook name {0:?}")]
    HookName(String),
    #[error("invalid hook {0:?} with empty path")]
    HookPath(String),
    #[error("invalid hook {hook:?}: invalid environment variable {variable:?}")]
    HookEnv { hook: String, variable: String },
    #[error("invalid mount, empty host path")]
    MountHostPath,
    #[error("invalid mount, empty container path")]
    MountContainerPath,
    #[error("invalid ClosID")]
    ClosId,
    #[error("invalid linux net device, empty HostInterfaceName")]
    NetDeviceHost,
    #[error("invalid linux net device, empty Name")]
    NetDeviceName,
    #[error(
        "invalid linux net device, duplicate HostInterfaceName {host:?} with names {name:?} and \
         {other:?}"
    )]
    NetDeviceHostTwice { host: String, name: String, other: String },
    #[error(
        "invalid linux net device, duplicate Name {name:?} with HostInterfaceName {host:?} and \
         {other:?}"
    )]
    NetDeviceNameTwice { name: String, host: String, other: String },
}

/// What a device (or a spec, for all its devices) changes in a container's OCI spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerEdits {
    /// `NAME=value`: set in the process's environment (replacing a variable of that
    /// name).
    #[serde(default, deserialize_with = "nullable")]
    pub env: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub device_nodes: Vec<DeviceNode>,
    /// Network devices moved into the container's network namespace (CDI 1.1.0).
    #[serde(default, deserialize_with = "nullable")]
    pub net_devices: Vec<NetDevice>,
    #[serde(default, deserialize_with = "nullable")]
    pub hooks: Vec<Hook>,
    #[serde(default, deserialize_with = "nullable")]
    pub mounts: Vec<Mount>,
    /// The container's Intel RDT class (CDI 0.7.0); the last device's wins.
    #[serde(default)]
    pub intel_rdt: Option<IntelRdt>,
    /// Groups the process gets (CDI 0.7.0); 0 is left out.
    #[serde(default, rename = "additionalGids", deserialize_with = "nullable")]
    pub additional_gids: Vec<u32>,
}

/// A device node made in the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceNode {
    /// Where it is made in the container.
    #[serde(default, deserialize_with = "nullable")]
    pub path: String,
    /// The host's node whose type, numbers and mode it takes (CDI 0.5.0); `path` when
    /// empty.
    #[serde(default, deserialize_with = "nullable")]
    pub host_path: String,
    /// `b`, `c`, `u` or `p`; the host node's when empty.
    #[serde(default, rename = "type", deserialize_with = "nullable")]
    pub typ: String,
    #[serde(default, deserialize_with = "nullable")]
    pub major: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub minor: i64,
    /// The node's permission bits; the host node's when not given.
    #[serde(default)]
    pub file_mode: Option<u32>,
    /// The device cgroup's access, letters of `rwm` (`rwm` when empty).
    #[serde(default, deserialize_with = "nullable")]
    pub permissions: String,
    /// The node's owner; the process's uid when not given and not 0.
    #[serde(default)]
    pub uid: Option<u32>,
    /// The node's group; the process's gid when not given and not 0.
    #[serde(default)]
    pub gid: Option<u32>,
}

/// A mount added to the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mount {
    #[serde(default, deserialize_with = "nullable")]
    pub host_path: String,
    #[serde(default, deserialize_with = "nullable")]
    pub container_path: String,
    #[serde(default, deserialize_with = "nullable")]
    pub options: Vec<String>,
    /// The mount's type (CDI 0.4.0), e.g. `bind`.
    #[serde(default, rename = "type", deserialize_with = "nullable")]
    pub typ: String,
}

/// An OCI hook added to the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hook {
    /// One of [`HOOK_NAMES`].
    #[serde(default, deserialize_with = "nullable")]
    pub hook_name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub path: String,
    #[serde(default, deserialize_with = "nullable")]
    pub args: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub env: Vec<String>,
    /// Seconds.
    #[serde(default)]
    pub timeout: Option<i64>,
}

/// The container's Intel RDT settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntelRdt {
    #[serde(default, rename = "closID", deserialize_with = "nullable")]
    pub clos_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub l3_cache_schema: String,
    #[serde(default, deserialize_with = "nullable")]
    pub mem_bw_schema: String,
    /// CDI 1.1.0 (given, even empty, it needs that version).
    #[serde(default)]
    pub schemata: Option<Vec<String>>,
    /// CDI 1.1.0.
    #[serde(default, deserialize_with = "nullable")]
    pub enable_monitoring: bool,
}

/// A host network interface moved into the container's network namespace as `name`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetDevice {
    #[serde(default, deserialize_with = "nullable")]
    pub host_interface_name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
}

/// A field written `null` is its zero value, as Go's decoder leaves it.
pub(super) fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

impl ContainerEdits {
    /// Checks the edits as the library does, the first fault found.
    pub fn validate(&self) -> Result<(), Error> {
        if let Some(variable) = self.env.iter().find(|v| !is_env(v)) {
            return Err(Error::Env(variable.clone()));
        }
        self.device_nodes.iter().try_for_each(DeviceNode::validate)?;
        self.hooks.iter().try_for_each(Hook::validate)?;
        self.mounts.iter().try_for_each(Mount::validate)?;
        if let Some(rdt) = &self.intel_rdt {
            rdt.validate()?;
        }
        validate_net_devices(&self.net_devices)
    }

    /// Whether nothing is edited (a device must edit something; a spec need not).
    pub fn is_empty(&self) -> bool {
        self.env.is_empty()
            && self.device_nodes.is_empty()
            && self.hooks.is_empty()
            && self.mounts.is_empty()
            && self.additional_gids.is_empty()
            && self.intel_rdt.is_none()
            && self.net_devices.is_empty()
    }

    /// `other`'s edits after these: every list appended, its Intel RDT class (if any)
    /// replacing this one's.
    pub fn append(&mut self, other: &ContainerEdits) {
        self.env.extend_from_slice(&other.env);
        self.device_nodes.extend_from_slice(&other.device_nodes);
        self.net_devices.extend_from_slice(&other.net_devices);
        self.hooks.extend_from_slice(&other.hooks);
        self.mounts.extend_from_slice(&other.mounts);
        if other.intel_rdt.is_some() {
            self.intel_rdt.clone_from(&other.intel_rdt);
        }
        self.additional_gids.extend_from_slice(&other.additional_gids);
    }
}

/// `NAME=value` with a non-empty name.
fn is_env(variable: &str) -> bool {
    variable.find('=').is_some_and(|at| at > 0)
}

impl DeviceNode {
    fn validate(&self) -> Result<(), Error> {
        if self.path.is_empty() {
            return Err(Error::EmptyDevicePath);
        }
        if !matches!(self.typ.as_str(), "" | "b" | "c" | "u" | "p") {
            return Err(Error::DeviceType { path: self.path.clone(), typ: self.typ.clone() });
        }
        if !self.permissions.chars().all(|c| matches!(c, 'r' | 'w' | 'm')) {
            return Err(Error::Permissions {
                path: self.path.clone(),
                permissions: self.permissions.clone(),
            });
        }
        Ok(())
    }
}

impl Hook {
    fn validate(&self) -> Result<(), Error> {
        if !HOOK_NAMES.contains(&self.hook_name.as_str()) {
            return Err(Error::HookName(self.hook_name.clone()));
        }
        if self.path.is_empty() {
            return Err(Error::HookPath(self.hook_name.clone()));
        }
        match self.env.iter().find(|v| !is_env(v)) {
            Some(variable) => {
                Err(Error::HookEnv { hook: self.hook_name.clone(), variable: variable.clone() })
            }
            None => Ok(()),
        }
    }
}

impl Mount {
    fn validate(&self) -> Result<(), Error> {
        if self.host_path.is_empty() {
            return Err(Error::MountHostPath);
        }
        if self.container_path.is_empty() {
            return Err(Error::MountContainerPath);
        }
        Ok(())
    }
}

impl IntelRdt {
    /// The class is a valid file name, or `/` (the root class).
    fn validate(&self) -> Result<(), Error> {
        let c = self.clos_id.as_str();
        let refused =
            c != "/" && (c.len() >= 4096 || c == "." || c == ".." || c.contains(['/', '\n']));
        if refused { Err(Error::ClosId) } else { Ok(()) }
    }
}

/// Each has both names, and no host or container name is used twice.
fn validate_net_devices(devices: &[NetDevice]) -> Result<(), Error> {
    let mut hosts = std::collections::HashMap::new();
    let mut names = std::collections::HashMap::new();
    for device in devices {
        if device.host_interface_name.is_empty() {
            return Err(Error::NetDeviceHost);
        }
        if device.name.is_empty() {
            return Err(Error::NetDeviceName);
        }
        let (host, name) = (&device.host_interface_name, &device.name);
        if let Some(other) = hosts.insert(host, name) {
            return Err(Error::NetDeviceHostTwice {
                host: host.clone(),
                name: name.clone(),
                other: other.clone(),
            });
        }
        if let Some(other) = names.insert(name, host) {
            return Err(Error::NetDeviceNameTwice {
                name: name.clone(),
                host: host.clone(),
                other: other.clone(),
            });
        }
    }
    Ok(())
}
