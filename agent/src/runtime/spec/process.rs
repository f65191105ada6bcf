//! The container's process: arguments (kubelet's and containerd CRI's rules over the
//! image's ENTRYPOINT and CMD), user, working directory and privileges.

use k8s_openapi::api::core::v1::Container;
use oci_spec::image::Config;
use oci_spec::runtime::{Process, User};

use super::env::Environment;
use super::security::Security;
use super::{Error, Result, Subject, expansion};

pub(super) fn process(
    container: &Container,
    image: Option<&Config>,
    env: &Environment,
    security: &Security,
    at: &Subject,
) -> Result<Process> {
    // oci_spec's default process has containerd's rlimits (RLIMIT_NOFILE 1024).
    let mut process = Process::default();
    process
        .set_terminal(Some(container.tty.unwrap_or(false)))
        .set_args(Some(args(container, image, env, at)?))
        .set_env(Some(env.entries.clone()))
        .set_cwd(working_dir(container, image).into())
        .set_user(user(image, security, at)?)
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

/// `runAsUser` and `runAsGroup`, else the image's numeric USER (`uid` or `uid:gid`),
/// else root; supplementary groups are the pod's. A `runAsUser` without `runAsGroup`
/// runs with group 0 (the image's `/etc/passwd` is not read).
fn user(image: Option<&Config>, security: &Security, at: &Subject) -> Result<User> {
    let id = |field: &'static str, value: i64| {
        u32::try_from(value).ok().filter(|v| *v != u32::MAX).ok_or(Error::Id {
            at: at.clone(),
            field,
            value,
        })
    };
    let (uid, gid) = match security.run_as_user {
        Some(uid) => (id("securityContext.runAsUser", uid)?, 0),
        None => {
            let user = image.and_then(|c| c.user().as_deref()).unwrap_or_default();
            image_user(user)
                .ok_or_else(|| Error::NonNumericUser { at: at.clone(), user: user.to_owned() })?
        }
    };
    let gid = match security.run_as_group {
        Some(gid) => id("securityContext.runAsGroup", gid)?,
        None => gid,
    };
    if security.run_as_non_root && uid == 0 {
        return Err(Error::RunAsRoot { at: at.clone() });
    }
    let mut additional = Vec::with_capacity(security.supplemental_groups.len());
    for group in &security.supplemental_groups {
        let group = id("securityContext.supplementalGroups", *group)?;
        if !additional.contains(&group) {
            additional.push(group);
        }
    }
    let mut user = User::default();
    user.set_uid(uid)
        .set_gid(gid)
        .set_additional_gids((!additional.is_empty()).then_some(additional));
    Ok(user)
}

/// An image USER of `""`, `uid` or `uid:gid`; `None` when a part is not numeric.
fn image_user(user: &str) -> Option<(u32, u32)> {
    if user.is_empty() {
        return Some((0, 0));
    }
    let (uid, gid) = user.split_once(':').unwrap_or((user, "0"));
    Some((uid.parse().ok()?, gid.parse().ok()?))
}
