//! The OCI runtime spec of one container: containerd 1.6's default Linux spec with the
//! container's process, security context, resources, namespaces and mounts applied.

use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};
use oci_spec::image::ImageConfiguration;
use oci_spec::runtime::{Capability, Linux, LinuxNamespace, LinuxNamespaceType, Root, Spec};

use crate::context::{ContainerFiles, PodContext};
use crate::error::{Error, Result};
use crate::projection::Resolved;
use crate::subject::Subject;
use crate::{
    apparmor, claims, defaults, env, hosts, mounts, plugin_devices, process, resources, seccomp,
    security, selinux, sub_path, sysctl,
};

/// The OCI runtime spec version written, containerd 1.6's (runc 1.1 reads it).
pub(super) const OCI_VERSION: &str = "1.0.2-dev";

/// The OCI runtime spec of one container of the pod, to be created in containerd as
/// `container_id` with its rootfs at `rootfs` (the snapshot's mounts given at task
/// creation).
pub fn container_spec(
    ctx: &PodContext<'_>,
    container: &Container,
    image: &ImageConfiguration,
    files: &ContainerFiles,
    container_id: &str,
) -> Result<Spec> {
    let at = Subject::container(ctx.pod, &container.name);
    let pod_spec = ctx.pod.spec.as_ref();
    if pod_spec.and_then(|s| s.share_process_namespace).unwrap_or(false)
        && pod_spec.and_then(|s| s.host_pid).unwrap_or(false)
    {
        return Err(Error::SharedAndHostPid { at });
    }
    let security = security::Security::of(ctx.pod, container);
    security.check(&at)?;
    selinux::check(ctx.pod, container, &at)?;
    let image_config = image.config().as_ref();

    let environment =
        env::environment(ctx, container, image_config, &files.devices.env, &files.env_files, &at)?;
    let mut process =
        process::process(container, image_config, &environment, &security, files, &at)?;
    let capabilities = security.capabilities(ctx.host_capabilities, &at)?;
    let bounding: Vec<Capability> = capabilities.bounding().iter().flatten().copied().collect();
    let seccomp = seccomp::seccomp(
        &seccomp::profile(ctx.pod, container)?,
        files.seccomp_profile.as_ref(),
        &bounding,
        security.privileged,
        &at,
    )?;
    let apparmor = apparmor::process_profile(
        &apparmor::profile(ctx.pod, container)?,
        ctx.apparmor_enabled,
        security.privileged,
        &at,
    )?;
    process.set_capabilities(Some(capabilities)).set_apparmor_profile(apparmor);

    let mut linux = Linux::default();
    linux
        .set_namespaces(Some(namespaces(ctx)))
        .set_cgroups_path(Some(ctx.cgroups_path.into()))
        .set_resources(Some(resources::resources(ctx, container, &security, &at)?))
        .set_devices(None)
        .set_uid_mappings(None)
        .set_gid_mappings(None)
        .set_sysctl(sysctl::sysctls(ctx.pod, &at)?)
        .set_seccomp(seccomp);
    if security.privileged {
        linux.set_masked_paths(None).set_readonly_paths(None);
    } else {
        linux
            .set_masked_paths(Some(defaults::masked_paths()))
            .set_readonly_paths(Some(defaults::readonly_paths()));
    }

    let mut root = Root::default();
    root.set_path("rootfs".into()).set_readonly(Some(security.read_only_root));

    let vars = sub_path::Vars { environment: &environment, devices: &files.devices.env };
    let mounts = mounts::mounts(ctx, container, container_id, &security, &vars, &at)?;
    linux.set_rootfs_propagation(mounts::rootfs_propagation(&mounts));
    let mut spec = Spec::default();
    spec.set_version(OCI_VERSION.to_owned())
        .set_root(Some(root))
        .set_mounts(Some(mounts))
        .set_process(Some(process))
        .set_hostname(hosts::container_hostname(ctx, &at)?)
        .set_annotations(None)
        .set_linux(Some(linux));
    // kubelet appends the block volumes to the plugins' devices (K3, D2).
    let mut devices = files.devices.clone();
    let volume_devices = claims::devices(ctx.claimed, container)
        .map_err(|source| Error::VolumeDevice { at, source })?;
    devices.nodes.extend(volume_devices);
    plugin_devices::apply(&mut spec, &devices);
    Ok(spec)
}

/// kubelet's `InvalidEnvironmentVariableNames` warnings for the container: one per
/// `envFrom` source some of whose keys are not valid variable names, and so are left out
/// of its environment. None when the environment cannot be made (its spec says why).
pub fn invalid_env_var_names(pod: &Pod, container: &Container, resolved: &Resolved) -> Vec<String> {
    env::invalid_names(pod, container, resolved)
}

/// A new mount namespace; the pod's pid namespace (`shareProcessNamespace`), else a new
/// one unless `hostPID`; network, IPC and UTS from the pod's paths, or the host's when
/// there is none.
fn namespaces(ctx: &PodContext<'_>) -> Vec<LinuxNamespace> {
    let host_pid = ctx.pod.spec.as_ref().and_then(|s| s.host_pid).unwrap_or(false);
    let new = |typ| Some((typ, None));
    let joined = |typ, path: Option<&Path>| path.map(|p| (typ, Some(p.to_path_buf())));
    [
        match ctx.namespaces.pid {
            Some(pid) => joined(LinuxNamespaceType::Pid, Some(pid)),
            None if host_pid => None,
            None => new(LinuxNamespaceType::Pid),
        },
        joined(LinuxNamespaceType::Ipc, ctx.namespaces.ipc),
        joined(LinuxNamespaceType::Uts, ctx.namespaces.uts),
        new(LinuxNamespaceType::Mount),
        joined(LinuxNamespaceType::Network, ctx.namespaces.network),
    ]
    .into_iter()
    .flatten()
    .map(|(typ, path)| {
        let mut namespace = LinuxNamespace::default();
        namespace.set_typ(typ).set_path(path);
        namespace
    })
    .collect()
}
