//! The container's mounts: containerd's defaults, the pod's `/etc/hosts`,
//! `/etc/resolv.conf` and `/dev/shm`, the container's termination-message file, and the container's volume mounts, combined as containerd's CRI
//! plugin does (a mount replaces a default at the same path, a `/dev` mount replaces
//! every default under `/dev`, parents before children).

use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, VolumeMount};
use oci_spec::runtime::Mount;

use super::context::{HostMount, PodContext};
use super::error::{Error, Result, SourceMount};
use super::security::Security;
use super::subject::Subject;
use super::{defaults, layout, recursive_read_only, sub_path};

pub(super) fn mounts(
    ctx: &PodContext<'_>,
    container: &Container,
    container_id: &str,
    security: &Security,
    vars: &sub_path::Vars<'_>,
    at: &Subject,
) -> Result<Vec<Mount>> {
    let mut added = Vec::new();
    for (index, mount) in container.volume_mounts.iter().flatten().enumerate() {
        let source = volume_source(ctx, mount, index, vars, at)?;
        // kubelet mounts the volumes it writes from API objects read-only, whatever
        // `readOnly` says.
        // A claim's volume mounted read-only (the pod's `persistentVolumeClaim.readOnly`)
        // is read-only in every container, as kubelet's mounter attributes make it (K3).
        let claimed_read_only = ctx.claimed.get(&mount.name).is_some_and(|c| c.read_only);
        // V4: an image volume is read-only, as kubelet mounts it.
        let read_only = mount.read_only.unwrap_or(false)
            || layout::is_projection(ctx.pod, &mount.name)
            || layout::is_image(ctx.pod, &mount.name)
            || claimed_read_only;
        let target = Target { source: &source, index, privileged: security.privileged, at };
        let propagation =
            propagation(mount.mount_propagation.as_deref(), &target, ctx.host_mounts)?;
        let recursive = recursive_read_only::resolve(mount, ctx.recursive_read_only)
            .map_err(|source| Error::RecursiveReadOnly { at: at.clone(), index, source })?;
        let mut bound = bind(&source, &absolute(&mount.mount_path), read_only, propagation);
        if recursive {
            // containerd's CRI: runc's `rro` after the bind's `ro`.
            bound.options_mut().get_or_insert_with(Vec::new).push("rro".to_owned());
        }
        added.push(bound);
    }
    let taken =
        |added: &[Mount], path: &str| added.iter().any(|m| m.destination() == Path::new(path));
    // kubelet mounts its hosts file once the pod has an IP, read-write.
    if !ctx.pod_ips.is_empty() && !taken(&added, "/etc/hosts") {
        let hosts = ctx.pod_dir.join(layout::ETC_HOSTS);
        added.push(bind(&hosts, Path::new("/etc/hosts"), false, PRIVATE));
    }
    if !taken(&added, "/etc/resolv.conf") {
        let source = ctx.pod_dir.join(layout::RESOLV_CONF);
        let read_only = security.read_only_root;
        added.push(bind(&source, Path::new("/etc/resolv.conf"), read_only, PRIVATE));
    }
    // kubelet's termination-message file, one per container instance, read-write.
    let message_file = layout::termination_message_file(ctx.pod_dir, &container.name, container_id);
    let message_path = absolute(layout::termination_message_path(container));
    added.push(bind(&message_file, &message_path, false, PRIVATE));
    // containerd CRI's sandbox shm, shared by the pod's containers (replaces the default
    // tmpfs per container).
    if !taken(&added, "/dev/shm") {
        added.push(bind(ctx.dev_shm, Path::new("/dev/shm"), false, PRIVATE));
    }
    // Parents before children; a stable sort keeps the manifest's order otherwise.
    added.sort_by_key(|m| m.destination().components().count());

    let replaces_dev = added.iter().any(|m| m.destination() == Path::new("/dev"));
    let mut mounts: Vec<Mount> = defaults::mounts(security.privileged)
        .into_iter()
        .filter(|default| {
            let destination = default.destination();
            let overridden = added.iter().any(|m| m.destination() == destination);
            let under_dev = replaces_dev && destination.starts_with("/dev");
            !(overridden || under_dev)
        })
        .collect();
    mounts.extend(added);
    Ok(mounts)
}

/// The host path a volume mount binds: the volume's directory, or the `subPath` in it,
/// or its `subPathExpr` expanded with `vars` (`sub_path`).
pub(super) fn volume_source(
    ctx: &PodContext<'_>,
    mount: &VolumeMount,
    index: usize,
    vars: &sub_path::Vars<'_>,
    at: &Subject,
) -> Result<PathBuf> {
    let source = volume_dir(ctx, mount, index, at)?;
    if let Some(expr) = mount.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
        let sub_path = sub_path::expand(expr, vars).map_err(|source| Error::SubPathExpr {
            at: at.clone(),
            index,
            expr: expr.to_owned(),
            source,
        })?;
        return Ok(if sub_path.is_empty() { source } else { source.join(sub_path) });
    }
    match mount.sub_path.as_deref().filter(|p| !p.is_empty()) {
        None => Ok(source),
        Some(sub_path) => {
            if !layout::is_plain_relative(sub_path) {
                return Err(Error::SubPath {
                    at: at.clone(),
                    index,
                    sub_path: sub_path.to_owned(),
                });
            }
            Ok(source.join(sub_path))
        }
    }
}

/// The host directory of the volume a mount binds: its claim's, or the pod's.
pub(super) fn volume_dir(
    ctx: &PodContext<'_>,
    mount: &VolumeMount,
    index: usize,
    at: &Subject,
) -> Result<PathBuf> {
    match ctx.claimed.get(&mount.name) {
        Some(claimed) => Ok(claimed.path.clone()),
        None => {
            layout::source_path(ctx.pod_dir, ctx.pod, &mount.name).map_err(|source| Error::Volume {
                at: at.clone(),
                index,
                volume: mount.name.clone(),
                source: Box::new(source),
            })
        }
    }
}

/// No mount propagates into or out of the mount (kubelet's `None`).
const PRIVATE: &str = "rprivate";

/// The volume mount a propagation is for.
struct Target<'a> {
    /// The host path it binds.
    source: &'a Path,
    index: usize,
    privileged: bool,
    at: &'a Subject,
}

/// D6: a volume mount's propagation, as kubelet translates `mountPropagation` and
/// containerd's CRI applies it: unset or `None` → `rprivate`; `HostToContainer` →
/// `rslave`, its source on a shared or slave host mount (else nothing could propagate
/// from the host); `Bidirectional` → `rshared`, in a privileged container only, its
/// source on a shared host mount.
fn propagation(
    mode: Option<&str>,
    target: &Target<'_>,
    host: &[HostMount],
) -> Result<&'static str> {
    let (at, index) = (target.at.clone(), target.index);
    let wanted = match mode {
        None | Some("None") => return Ok(PRIVATE),
        Some("HostToContainer") => "shared or slave",
        Some("Bidirectional") if !target.privileged => {
            return Err(Error::BidirectionalUnprivileged { at, index });
        }
        Some("Bidirectional") => "shared",
        Some(other) => return Err(Error::PropagationMode { at, index, mode: other.to_owned() }),
    };
    // The mount the source is on: the deepest mount point above it.
    let on = host.iter().filter(|m| target.source.starts_with(&m.mount_point));
    let on = on.max_by_key(|m| m.mount_point.components().count());
    let source =
        |mount_point| Box::new(SourceMount { path: target.source.to_path_buf(), mount_point });
    let Some(on) = on else {
        return Err(Error::PropagationSource { at, index, mount: source(None), wanted });
    };
    match wanted {
        "shared" if on.shared => Ok("rshared"),
        "shared or slave" if on.shared || on.slave => Ok("rslave"),
        _ => {
            let mount = source(Some(on.mount_point.clone()));
            Err(Error::PropagationSource { at, index, mount, wanted })
        }
    }
}

/// The root filesystem's propagation that `mounts` need, as containerd's CRI sets it:
/// `rshared` with a `Bidirectional` mount, else `rslave` with a `HostToContainer` one
/// (`None`: runc's default, private).
pub(super) fn rootfs_propagation(mounts: &[Mount]) -> Option<String> {
    let has =
        |option: &str| mounts.iter().any(|m| m.options().iter().flatten().any(|o| o == option));
    if has("rshared") {
        Some("rshared".to_owned())
    } else if has("rslave") {
        Some("rslave".to_owned())
    } else {
        None
    }
}

/// `path` made absolute and clean (no `.`, `..` or doubled slashes).
fn absolute(path: &str) -> PathBuf {
    let mut clean = PathBuf::from("/");
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::ParentDir => {
                clean.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    clean
}

/// A recursive bind mount, with its propagation (`rprivate`, `rslave` or `rshared`).
fn bind(source: &Path, destination: &Path, read_only: bool, propagation: &str) -> Mount {
    let access = if read_only { "ro" } else { "rw" };
    let mut mount = defaults::mount("", "bind", "", &["rbind", propagation, access]);
    mount.set_destination(destination.to_path_buf()).set_source(Some(source.to_path_buf()));
    mount
}

#[cfg(test)]
mod tests;
