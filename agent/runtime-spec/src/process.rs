//! The container's process: arguments (kubelet's and containerd CRI's rules over the
//! image's ENTRYPOINT and CMD), user, working directory and privileges.

use k8s_openapi::api::core::v1::Container;
use oci_spec::image::Config;
use oci_spec::runtime::{Process, User};

use super::context::ContainerFiles;
use super::env::Environment;
use super::error::{Error, Result};
use super::expansion;
use super::security::Security;
use super::subject::Subject;
use super::users::{self, Unresolved, UserRef};

pub(super) fn process(
    container: &Container,
    image: Option<&Config>,
    env: &Environment,
    security: &Security,
    files: &ContainerFiles,
    at: &Subject,
) -> Result<Process> {
    // oci_spec's default process has containerd's rlimits (RLIMIT_NOFILE 1024).
    let mut process = Process::default();
    process
        .set_terminal(Some(container.tty.unwrap_or(false)))
        .set_args(Some(args(container, image, env, at)?))
        .set_env(Some(env.entries.clone()))
        .set_cwd(working_dir(container, image).into())
        .set_user(user(image, security, files, at)?)
        .set_no_new_privileges(Some(security.no_new_privileges))
        .set_oom_score_adj(None);
    Ok(process)
}

/// `command` (expanded) replaces the image's ENTRYPOINT and drops its CMD; `args`
/// (expanded) replaces CMD. The process runs ENTRYPOINT then CMD.
fn args(
    container: &Container,
    image: Option<&Config>,
    env: &Environment,
    at: &Subject,
) -> Result<Vec<String>> {
    let expand = |list: &Option<Vec<String>>| -> Vec<String> {
        list.iter().flatten().map(|arg| expansion::expand(arg, |name| env.var(name))).collect()
    };
    let image_list = |list: Option<&Vec<String>>| list.cloned().unwrap_or_default();
    let mut command = expand(&container.command);
    let mut args = expand(&container.args);
    if command.is_empty() {
        if args.is_empty() {
            args = image_list(image.and_then(|c| c.cmd().as_ref()));
        }
        command = image_list(image.and_then(|c| c.entrypoint().as_ref()));
    }
    command.extend(args);
    if command.is_empty() {
        return Err(Error::NoCommand { at: at.clone() });
    }
    Ok(command)
}

/// The container's `workingDir`, else the image's, else `/`.
fn working_dir(container: &Container, image: Option<&Config>) -> String {
    container
        .working_dir
        .clone()
        .filter(|dir| !dir.is_empty())
        .or_else(|| image.and_then(|c| c.working_dir().clone()).filter(|dir| !dir.is_empty()))
        .unwrap_or_else(|| "/".to_owned())
}

/// `runAsUser`, else the image USER's user part (see [`users`] for the rest);
/// `runAsGroup` over the user's primary group; supplementary groups are the image's for
/// the user, then the pod's, sorted without duplicates (containerd CRI's `mergeGids`).
fn user(
    image: Option<&Config>,
    security: &Security,
    files: &ContainerFiles,
    at: &Subject,
) -> Result<User> {
    let id = |field: &'static str, value: i64| {
        u32::try_from(value).ok().filter(|v| *v != u32::MAX).ok_or(Error::Id {
            at: at.clone(),
            field,
            value,
        })
    };
    let user = match security.run_as_user {
        Some(uid) => UserRef::Id(id("securityContext.runAsUser", uid)?),
        None => UserRef::of_image(image.and_then(|c| c.user().as_deref()).unwrap_or_default()),
    };
    let gid = security.run_as_group.map(|gid| id("securityContext.runAsGroup", gid)).transpose()?;
    let resolved = users::resolve(&user, gid, files.passwd.as_deref(), files.group.as_deref())
        .map_err(|unresolved| match unresolved {
            Unresolved::NoPasswd(user) => Error::NoPasswd { at: at.clone(), user },
            Unresolved::UnknownUser(user) => Error::UnknownUser { at: at.clone(), user },
        })?;
    if security.run_as_non_root && resolved.uid == 0 {
        return Err(Error::RunAsRoot { at: at.clone() });
    }
    let mut additional = resolved.groups;
    for group in &security.supplemental_groups {
        additional.push(id("securityContext.supplementalGroups", *group)?);
    }
    additional.sort_unstable();
    additional.dedup();
    let mut oci_user = User::default();
    oci_user
        .set_uid(resolved.uid)
        .set_gid(resolved.gid)
        .set_additional_gids((!additional.is_empty()).then_some(additional));
    Ok(oci_user)
}
