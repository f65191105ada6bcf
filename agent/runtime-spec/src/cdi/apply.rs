//! Container edits applied to a container's OCI spec, in the CDI library's order and
//! manner (its `ContainerEdits.Apply`, containerd's CRI calls it through
//! `InjectDevices`):
//!
//! 1. `env`: a variable replaces the one of the same name, else is appended.
//! 2. `deviceNodes`: each node's missing type, numbers and mode come from the host's node
//!    ([`HostDevice`], a fact the caller reads: this module does no IO); the node takes
//!    the process's uid and gid unless it names its own or they are 0; it replaces the
//!    node at the same path, else is appended; a block or character node adds a device
//!    cgroup rule allowing it (`permissions`, `rwm` when empty).
//! 3. `netDevices`: set by host interface name.
//! 4. `mounts`: each replaces the mount at the same container path, else is appended;
//!    then all the spec's mounts are sorted, stably, by the number of `/` in their
//!    cleaned destination (so a mount is never hidden by one above it).
//! 5. `hooks`: appended to their hook point's list.
//! 6. `intelRdt`: replaces the container's.
//! 7. `additionalGids`: each added to the process's groups unless 0 or there already.
//!
//! A spec without a process or a Linux section gets oci-spec's default one first (the
//! agent's container specs always have both).

use std::collections::HashMap;
use std::path::Path;

use oci_spec::runtime::{
    Hook as OciHook, Hooks, LinuxDevice, LinuxDeviceCgroup, LinuxDeviceType, LinuxIntelRdt,
    LinuxNetDevice, Mount as OciMount, Spec,
};

use super::edits::{ContainerEdits, DeviceNode, Hook, IntelRdt, Mount};

/// Why edits cannot be applied; the library's words.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The host node a device node takes its missing facts from cannot be read (or is
    /// not a device node).
    #[error("failed to stat CDI host device {host_path:?}: {source}")]
    HostDevice {
        host_path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("CDI device ({path:?}, {host_path:?}), host type mismatch ({given}, {host})")]
    TypeMismatch { path: String, host_path: String, given: String, host: &'static str },
    #[error("unknown hook name {0:?}")]
    HookName(String),
}

/// What the host says of a device node's host path (`lstat`: a symbolic link is not
/// followed, and is not a device node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostDevice {
    pub typ: HostDeviceType,
    pub major: i64,
    pub minor: i64,
    /// The permission bits (with set-user-ID, set-group-ID and sticky), no file type.
    pub file_mode: u32,
}

/// A host device node's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostDeviceType {
    Block,
    Char,
    Fifo,
}

impl HostDeviceType {
    /// CDI's letter for it.
    pub fn letter(self) -> &'static str {
        match self {
            HostDeviceType::Block => "b",
            HostDeviceType::Char => "c",
            HostDeviceType::Fifo => "p",
        }
    }
}

/// The host's answer for a path: a device node, something else (`Ok(None)`), or the
/// error reading it.
pub type HostLookup<'a> = dyn FnMut(&Path) -> std::io::Result<Option<HostDevice>> + 'a;

/// Applies `edits` to `spec` (see the module's documentation); `host` answers for the
/// device nodes' host paths. On an error `spec` may be partly edited.
pub fn apply(
    spec: &mut Spec,
    edits: &ContainerEdits,
    host: &mut HostLookup<'_>,
) -> Result<(), Error> {
    if !edits.env.is_empty() {
        apply_env(spec, &edits.env);
    }
    for node in &edits.device_nodes {
        apply_device_node(spec, node, host)?;
    }
    for device in &edits.net_devices {
        let mut net = LinuxNetDevice::default();
        net.set_name(Some(device.name.clone()).filter(|n| !n.is_empty()));
        let linux = linux(spec);
        linux
            .net_devices_mut()
            .get_or_insert_with(HashMap::new)
            .insert(device.host_interface_name.clone(), net);
    }
    if !edits.mounts.is_empty() {
        apply_mounts(spec, &edits.mounts);
    }
    for hook in &edits.hooks {
        apply_hook(spec, hook)?;
    }
    if let Some(rdt) = &edits.intel_rdt {
        linux(spec).set_intel_rdt(Some(intel_rdt(rdt)));
    }
    for gid in edits.additional_gids.iter().copied().filter(|gid| *gid != 0) {
        let user = process(spec).user_mut();
        let groups = user.additional_gids_mut().get_or_insert_with(Vec::new);
        if !groups.contains(&gid) {
            groups.push(gid);
        }
    }
    Ok(())
}

fn process(spec: &mut Spec) -> &mut oci_spec::runtime::Process {
    spec.process_mut().get_or_insert_with(Default::default)
}

fn linux(spec: &mut Spec) -> &mut oci_spec::runtime::Linux {
    spec.linux_mut().get_or_insert_with(Default::default)
}

/// Each variable replaces the one of its name (the last one of that name the spec had),
/// else is appended.
fn apply_env(spec: &mut Spec, variables: &[String]) {
    let env = process(spec).env_mut().get_or_insert_with(Vec::new);
    let key = |v: &str| v.split_once('=').map_or(v, |(k, _)| k).to_owned();
    let mut at: HashMap<String, usize> = env.iter().enumerate().map(|(i, v)| (key(v), i)).collect();
    for variable in variables {
        match at.get(&key(variable)) {
            Some(&i) => env[i].clone_from(variable),
            None => {
                at.insert(key(variable), env.len());
                env.push(variable.clone());
            }
        }
    }
}

fn apply_device_node(
    spec: &mut Spec,
    node: &DeviceNode,
    host: &mut HostLookup<'_>,
) -> Result<(), Error> {
    let mut device = filled(node, host)?;
    let user = spec.process().as_ref().map(|p| (p.user().uid(), p.user().gid()));
    if let Some((uid, gid)) = user {
        if device.uid().is_none() && uid > 0 {
            device.set_uid(Some(uid));
        }
        if device.gid().is_none() && gid > 0 {
            device.set_gid(Some(gid));
        }
    }
    let typ = device.typ();
    let (major, minor) = (device.major(), device.minor());
    let devices = linux(spec).devices_mut().get_or_insert_with(Vec::new);
    if let Some(at) = devices.iter().position(|d| d.path() == device.path()) {
        devices.remove(at);
    }
    match devices.iter_mut().find(|d| d.path() == device.path()) {
        Some(same) => *same = device,
        None => devices.push(device),
    }
    if matches!(typ, LinuxDeviceType::B | LinuxDeviceType::C) {
        let access = if node.permissions.is_empty() { "rwm" } else { &node.permissions };
        let mut rule = LinuxDeviceCgroup::default();
        rule.set_allow(true)
            .set_typ(Some(typ))
            .set_major(Some(major))
            .set_minor(Some(minor))
            .set_access(Some(access.to_owned()));
        let resources = linux(spec).resources_mut().get_or_insert_with(Default::default);
        resources.devices_mut().get_or_insert_with(Vec::new).push(rule);
    }
    Ok(())
}

/// The node with what it leaves out taken from its host path (the library's
/// `fillMissingInfo`). A node that gives its type and major number (a FIFO: its type)
/// needs no host node, and takes only the mode from one that is there.
fn filled(node: &DeviceNode, host: &mut HostLookup<'_>) -> Result<LinuxDevice, Error> {
    let minimal = !node.typ.is_empty() && (node.major != 0 || node.typ == "p");
    let host_path = if node.host_path.is_empty() { &node.path } else { &node.host_path };
    let (mut typ, mut major, mut minor, mut file_mode) =
        (node.typ.clone(), node.major, node.minor, node.file_mode);
    let looked_up = host(Path::new(host_path))
        .and_then(|found| found.ok_or_else(|| std::io::Error::other("not a device node")));
    match looked_up {
        Err(source) if !minimal => {
            return Err(Error::HostDevice { host_path: host_path.clone(), source });
        }
        Err(_) => {}
        Ok(found) => {
            file_mode.get_or_insert(found.file_mode);
            if !minimal {
                let host_type = found.typ.letter();
                if typ.is_empty() {
                    typ = host_type.to_owned();
                }
                if typ != host_type {
                    return Err(Error::TypeMismatch {
                        path: node.path.clone(),
                        host_path: host_path.clone(),
                        given: typ,
                        host: host_type,
                    });
                }
                if typ != "p" && major == 0 {
                    (major, minor) = (found.major, found.minor);
                }
            }
        }
    }
    let mut device = LinuxDevice::default();
    device
        .set_path(node.path.clone().into())
        .set_typ(device_type(&typ))
        .set_major(major)
        .set_minor(minor)
        .set_file_mode(file_mode)
        .set_uid(node.uid)
        .set_gid(node.gid);
    Ok(device)
}

/// The OCI type of a CDI type letter (validated: `b`, `c`, `u` or `p`; by now never
/// empty).
fn device_type(letter: &str) -> LinuxDeviceType {
    match letter {
        "b" => LinuxDeviceType::B,
        "u" => LinuxDeviceType::U,
        "p" => LinuxDeviceType::P,
        _ => LinuxDeviceType::C,
    }
}

fn apply_mounts(spec: &mut Spec, mounts: &[Mount]) {
    let all = spec.mounts_mut().get_or_insert_with(Vec::new);
    for mount in mounts {
        if let Some(at) =
            all.iter().position(|m| m.destination().as_os_str() == mount.container_path.as_str())
        {
            all.remove(at);
        }
        let mut oci = OciMount::default();
        oci.set_destination(mount.container_path.clone().into())
            .set_source(Some(mount.host_path.clone().into()))
            .set_options(Some(mount.options.clone()).filter(|o| !o.is_empty()))
            .set_typ(Some(mount.typ.clone()).filter(|t| !t.is_empty()));
        all.push(oci);
    }
    all.sort_by_key(|m| depth(&m.destination().to_string_lossy()));
}

/// The number of `/` in `path` cleaned as Go's `filepath.Clean` cleans it.
pub(super) fn depth(path: &str) -> usize {
    clean(path).matches('/').count()
}

/// Go's `filepath.Clean`: no repeated or trailing `/`, no `.`, `..` resolved lexically
/// (at the root of a rooted path it stays the root), `.` for an empty result.
pub(super) fn clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

fn apply_hook(spec: &mut Spec, hook: &Hook) -> Result<(), Error> {
    let mut oci = OciHook::default();
    oci.set_path(hook.path.clone().into())
        .set_args(Some(hook.args.clone()).filter(|a| !a.is_empty()))
        .set_env(Some(hook.env.clone()).filter(|e| !e.is_empty()))
        .set_timeout(hook.timeout);
    let hooks = spec.hooks_mut().get_or_insert_with(Hooks::default);
    let list = match hook.hook_name.as_str() {
        "prestart" => hooks.prestart_mut(),
        "createRuntime" => hooks.create_runtime_mut(),
        "createContainer" => hooks.create_container_mut(),
        "startContainer" => hooks.start_container_mut(),
        "poststart" => hooks.poststart_mut(),
        "poststop" => hooks.poststop_mut(),
        other => return Err(Error::HookName(other.to_owned())),
    };
    list.get_or_insert_with(Vec::new).push(oci);
    Ok(())
}

fn intel_rdt(rdt: &IntelRdt) -> LinuxIntelRdt {
    let given = |s: &String| Some(s.clone()).filter(|s| !s.is_empty());
    let mut oci = LinuxIntelRdt::default();
    oci.set_clos_id(given(&rdt.clos_id))
        .set_l3_cache_schema(given(&rdt.l3_cache_schema))
        .set_mem_bw_schema(given(&rdt.mem_bw_schema))
        .set_schemata(rdt.schemata.clone().filter(|s| !s.is_empty()))
        .set_enable_monitoring(rdt.enable_monitoring.then_some(true));
    oci
}

#[cfg(test)]
mod tests;
