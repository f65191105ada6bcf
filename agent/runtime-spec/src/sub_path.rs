//! A volume mount's `subPathExpr`, expanded as kubelet's `makeMounts` expands it: each
//! `$(NAME)` becomes the value of the container's variable NAME (its `env`, with the
//! downward API, its `envFrom`, the Service variables and its devices' variables: what
//! kubelet hands the runtime, not the image's); `$$` is a `$`. A name with no value, or
//! an empty one, fails the container (`CreateContainerConfigError`) with kubelet's
//! `missing value for NAME`; so does a result that is absolute or steps out with `..`,
//! in kubelet's words. An expansion to nothing mounts the volume's root.
//!
//! [`sub_path_dirs`] names the directories such mounts need, which the caller makes
//! before the container is created, with the mode of their volume's directory, as
//! kubelet does.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Container;

use super::context::{ContainerFiles, PodContext};
use super::env::Environment;
use super::error::Result;
use super::subject::Subject;
use super::{env, expansion, layout, mounts};

/// Why a `subPathExpr` cannot be used, in kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Names referred to that have no value (or an empty one), in order.
    #[error("missing value for {}", .names.join(", "))]
    Missing { names: Vec<String> },
    #[error("error SubPath `{sub_path}` must not be an absolute path")]
    Absolute { sub_path: String },
    #[error("unable to provision SubPath `{sub_path}`: must not contain '..'")]
    Backsteps { sub_path: String },
}

/// The variables a `subPathExpr` sees: the container's own, then its devices'.
pub(super) struct Vars<'a> {
    pub(super) environment: &'a Environment,
    pub(super) devices: &'a [(String, String)],
}

impl Vars<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.environment.var(name).or_else(|| {
            self.devices.iter().find(|(n, _)| n == name).map(|(_, value)| value.as_str())
        })
    }
}

/// `expr` expanded with `vars`, checked as kubelet checks a sub path.
pub(super) fn expand(expr: &str, vars: &Vars<'_>) -> Result<String, Error> {
    let missing = RefCell::new(BTreeSet::new());
    let expanded = expansion::expand(expr, |name| match vars.get(name) {
        Some(value) if !value.is_empty() => Some(value),
        _ => {
            missing.borrow_mut().insert(name.to_owned());
            Some("")
        }
    });
    let missing = missing.into_inner();
    if !missing.is_empty() {
        return Err(Error::Missing { names: missing.into_iter().collect() });
    }
    check(&expanded)?;
    Ok(expanded)
}

/// kubelet's checks of a sub path: relative, and no `..` among its parts.
fn check(sub_path: &str) -> Result<(), Error> {
    if sub_path.starts_with('/') {
        return Err(Error::Absolute { sub_path: sub_path.to_owned() });
    }
    if sub_path.split('/').any(|part| part == "..") {
        return Err(Error::Backsteps { sub_path: sub_path.to_owned() });
    }
    Ok(())
}

/// A directory a volume mount binds that may have to be made: `path`, in the volume's
/// directory `volume`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubPathDir {
    pub volume: PathBuf,
    pub path: PathBuf,
}

/// The directories the container's `subPathExpr` mounts bind, expanded, in the volumes
/// Outpost may write (not those made from API objects, which only their writer writes);
/// an expansion to nothing binds the volume itself and needs none. Fails as
/// [`container_spec`](crate::container_spec) does for an expression that cannot be used.
pub fn sub_path_dirs(
    ctx: &PodContext<'_>,
    container: &Container,
    files: &ContainerFiles,
) -> Result<Vec<SubPathDir>> {
    let at = Subject::container(ctx.pod, &container.name);
    let environment =
        env::environment(ctx, container, None, &files.devices.env, &files.env_files, &at)?;
    let vars = Vars { environment: &environment, devices: &files.devices.env };
    let mut dirs = Vec::new();
    for (index, mount) in container.volume_mounts.iter().flatten().enumerate() {
        let has_expr = mount.sub_path_expr.as_deref().is_some_and(|e| !e.is_empty());
        if !has_expr || layout::is_projection(ctx.pod, &mount.name) {
            continue;
        }
        let volume = mounts::volume_dir(ctx, mount, index, &at)?;
        let path = mounts::volume_source(ctx, mount, index, &vars, &at)?;
        if path != volume {
            dirs.push(SubPathDir { volume, path });
        }
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests;
