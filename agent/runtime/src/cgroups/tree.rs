//! A cgroup made, limited and removed in every hierarchy, with the cgroupfs files:
//! under cgroup v1 the directory in each controller's tree (runc puts a container in each
//! of them, so its parents must be there too; a new `cpuset` cgroup gets its parent's
//! CPUs and memory nodes, as it starts with none) and the limits in `cpu`, `memory` and
//! `pids`; under cgroup v2 one directory, the controllers enabled in
//! `cgroup.subtree_control` down the path, and `cpu.weight`, `cpu.max`, `memory.max`,
//! `pids.max`.

use std::io;
use std::path::{Path, PathBuf};

use outpost_core::resize::Resource;
use outpost_core::resource_config::{ResourceConfig, shares_to_weight};

use super::Hierarchy;

/// The v2 controllers a pod's cgroups use (runc enables them for its containers too).
const V2_CONTROLLERS: [&str; 5] = ["cpu", "cpuset", "io", "memory", "pids"];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create the cgroup {}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {value:?} to {}", file.display())]
    Write {
        file: PathBuf,
        value: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot remove the cgroup {}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// `systemctl` could not be run at all.
    #[error("systemctl {args}: {source}")]
    SystemctlRun {
        args: String,
        #[source]
        source: io::Error,
    },
    /// `systemctl` failed; `message` is what it said on its standard error.
    #[error("systemctl {args}: {message}")]
    Systemctl { args: String, message: String },
}

/// The cgroup hierarchies under the cgroup mount point: the v2 root itself, or (v1)
/// every controller's tree (and a hybrid host's `unified` v2 tree).
pub fn hierarchies(hierarchy: &Hierarchy) -> Vec<PathBuf> {
    match hierarchy {
        Hierarchy::V2 { root } => vec![root.clone()],
        Hierarchy::V1 { root } => {
            let mut trees: Vec<PathBuf> = std::fs::read_dir(root)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.join("cgroup.procs").exists())
                .collect();
            trees.sort();
            trees
        }
    }
}

/// Creates cgroup `path` (and its parents) in every hierarchy.
pub fn create(hierarchy: &Hierarchy, path: &str) -> Result<(), Error> {
    let relative = path.trim_start_matches('/');
    for tree in hierarchies(hierarchy) {
        let dir = tree.join(relative);
        std::fs::create_dir_all(&dir).map_err(|source| Error::Create { path: dir, source })?;
        if hierarchy.is_v2() {
            enable_controllers(&tree, relative)?;
        } else if tree.join("cpuset.cpus").exists() {
            inherit_cpuset(&tree, relative)?;
        }
    }
    Ok(())
}

/// Sets cgroup `path`'s limits to `config`. A limit whose file is missing is an error,
/// unless the value is "unlimited" (that controller's tree is not mounted).
pub fn apply(hierarchy: &Hierarchy, path: &str, config: &ResourceConfig) -> Result<(), Error> {
    write(hierarchy, path, config, None)
}

/// K6: sets cgroup `path`'s limits of `resource` (cpu shares, quota and period; or the
/// memory limit) to `config`'s, leaving the others.
pub fn apply_part(
    hierarchy: &Hierarchy,
    path: &str,
    config: &ResourceConfig,
    resource: Resource,
) -> Result<(), Error> {
    write(hierarchy, path, config, Some(resource))
}

fn write(
    hierarchy: &Hierarchy,
    path: &str,
    config: &ResourceConfig,
    part: Option<Resource>,
) -> Result<(), Error> {
    let quota = config.cpu_quota;
    let memory = config.memory_limit;
    let pids = config.pids_limit;
    let writes: Vec<(PathBuf, String, bool)> = match hierarchy {
        Hierarchy::V1 { .. } => {
            let cpu = hierarchy.dir("cpu", path);
            vec![
                (cpu.join("cpu.shares"), config.cpu_shares.to_string(), true),
                (cpu.join("cpu.cfs_period_us"), config.cpu_period.to_string(), quota.is_some()),
                (cpu.join("cpu.cfs_quota_us"), quota.unwrap_or(-1).to_string(), quota.is_some()),
                (
                    hierarchy.dir("memory", path).join("memory.limit_in_bytes"),
                    memory.unwrap_or(-1).to_string(),
                    memory.is_some(),
                ),
                (hierarchy.dir("pids", path).join("pids.max"), max_or(pids), pids.is_some()),
            ]
        }
        Hierarchy::V2 { .. } => {
            let dir = hierarchy.dir("", path);
            let weight = shares_to_weight(config.cpu_shares).to_string();
            vec![
                (dir.join("cpu.weight"), weight, true),
                (dir.join("cpu.max"), format!("{} {}", max_or(quota), config.cpu_period), true),
                (dir.join("memory.max"), max_or(memory), memory.is_some()),
                (dir.join("pids.max"), max_or(pids), pids.is_some()),
            ]
        }
    };
    let of = |file: &PathBuf| {
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with("cpu.") {
            Some(Resource::Cpu)
        } else if name.starts_with("memory.") {
            Some(Resource::Memory)
        } else {
            None
        }
    };
    for (file, value, required) in writes {
        if part.is_some() && of(&file) != part {
            continue;
        }
        if !required && !file.exists() {
            continue;
        }
        std::fs::write(&file, &value).map_err(|source| Error::Write { file, value, source })?;
    }
    Ok(())
}

fn max_or(limit: Option<i64>) -> String {
    limit.map_or_else(|| "max".to_owned(), |l| l.to_string())
}

/// Removes the cgroup `path` from every hierarchy, with the empty cgroups below it
/// (deepest first): a container's, left in one v1 hierarchy when runc's own removal was
/// cut short. A cgroup that still holds a process cannot go. Missing ones are fine. All
/// hierarchies are tried; the first failure is returned.
pub fn remove(hierarchy: &Hierarchy, path: &str) -> Result<(), Error> {
    let relative = path.trim_start_matches('/');
    let mut first = None;
    for tree in hierarchies(hierarchy) {
        if let Err(e) = remove_tree(&tree.join(relative)) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Removes cgroup `dir` and the cgroups below it, deepest first.
fn remove_tree(dir: &Path) -> Result<(), Error> {
    let children = match std::fs::read_dir(dir) {
        Ok(entries) => entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(Error::Remove { path: dir.to_owned(), source }),
    };
    for child in children {
        remove_tree(&child.path())?;
        tracing::info!(cgroup = %child.path().display(), "removed a cgroup left below a pod's");
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Remove { path: dir.to_owned(), source }),
    }
}

/// Whether cgroup `path` exists in the hierarchy that holds the memory controller.
pub fn exists(hierarchy: &Hierarchy, path: &str) -> bool {
    hierarchy.dir("memory", path).is_dir()
}

/// Gives each level of `relative` under a v1 `cpuset` tree its parent's CPUs and memory
/// nodes where it has none (a new cpuset cgroup starts empty, and no task may join it).
fn inherit_cpuset(tree: &Path, relative: &str) -> Result<(), Error> {
    let mut dir = tree.to_owned();
    for component in relative.split('/').filter(|c| !c.is_empty()) {
        let parent = dir.clone();
        dir.push(component);
        for file in ["cpuset.cpus", "cpuset.mems"] {
            let own = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
            if !own.trim().is_empty() {
                continue;
            }
            let value = std::fs::read_to_string(parent.join(file)).unwrap_or_default();
            let value = value.trim().to_owned();
            std::fs::write(dir.join(file), &value).map_err(|source| Error::Write {
                file: dir.join(file),
                value,
                source,
            })?;
        }
    }
    Ok(())
}

/// Enables the pods' controllers in `cgroup.subtree_control` of the v2 root and each
/// level above the last of `relative`, those the level has (`cgroup.controllers`).
fn enable_controllers(root: &Path, relative: &str) -> Result<(), Error> {
    let components: Vec<&str> = relative.split('/').filter(|c| !c.is_empty()).collect();
    let mut dir = root.to_owned();
    for component in components {
        let available = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        let enabled =
            std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
        let missing: Vec<String> = V2_CONTROLLERS
            .iter()
            .filter(|c| available.split_whitespace().any(|a| a == **c))
            .filter(|c| !enabled.split_whitespace().any(|e| e == **c))
            .map(|c| format!("+{c}"))
            .collect();
        if !missing.is_empty() {
            let file = dir.join("cgroup.subtree_control");
            let value = missing.join(" ");
            std::fs::write(&file, &value).map_err(|source| Error::Write { file, value, source })?;
        }
        dir.push(component);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
