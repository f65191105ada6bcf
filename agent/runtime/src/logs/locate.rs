//! Finding a container's log files under the pod log directory, from directory listings
//! only (no agent, no containerd): the pod's directory, the container's, and the file of
//! its current or previous run.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot list {}", .path.display())]
    List { path: PathBuf, source: io::Error },
    #[error(
        "no logs for pod {namespace}/{name} under {}; pods with logs in namespace {namespace}: {}",
        .root.display(), list_or_none(.existing)
    )]
    PodNotFound { root: PathBuf, namespace: String, name: String, existing: Vec<String> },
    #[error("container {container:?} not found in pod {pod}; its containers: {}", list_or_none(.existing))]
    ContainerNotFound { pod: String, container: String, existing: Vec<String> },
    #[error("pod {pod} has no container logs yet")]
    NoContainers { pod: String },
    #[error("pod {pod} has several containers; choose one with -c: {}", .existing.join(", "))]
    SeveralContainers { pod: String, existing: Vec<String> },
    #[error("container {container} of pod {pod} has no log file yet")]
    NoRun { pod: String, container: String },
    #[error("previous terminated container {container} of pod {pod} not found (it has run once)")]
    NoPreviousRun { pod: String, container: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() { "(none)".into() } else { names.join(", ") }
}

/// `(namespace, name, uid)` of a pod log directory name `<namespace>_<name>_<uid>` (none of
/// the three can hold `_`).
pub fn parse_pod_dir(name: &str) -> Option<(&str, &str, &str)> {
    let mut parts = name.split('_');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(ns), Some(pod), Some(uid), None) if ![ns, pod, uid].contains(&"") => {
            Some((ns, pod, uid))
        }
        _ => None,
    }
}

/// The restart count of a live log file name `<n>.log`.
pub fn parse_log_file(name: &str) -> Option<u32> {
    let digits = name.strip_suffix(".log")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The run to read among the `runs` (restart counts) that have a file: the latest, or with
/// `previous` the one before it.
pub fn choose_run(runs: &[u32], previous: bool) -> Option<u32> {
    let mut sorted = runs.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let skip = usize::from(previous);
    sorted.into_iter().rev().nth(skip)
}

/// The directory of pod `namespace/name` under `root`; if several (pods of the same name
/// with different UIDs), the one changed last.
pub fn pod_dir(root: &Path, namespace: &str, name: &str) -> Result<PathBuf> {
    let mut found: Option<(SystemTime, PathBuf)> = None;
    let mut existing = Vec::new();
    for entry_name in list(root)? {
        let Some((ns, pod, _)) = parse_pod_dir(&entry_name) else { continue };
        if ns != namespace {
            continue;
        }
        if pod != name {
            existing.push(pod.to_owned());
            continue;
        }
        let path = root.join(&entry_name);
        let changed =
            fs::metadata(&path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
        if found.as_ref().is_none_or(|(t, _)| changed > *t) {
            found = Some((changed, path));
        }
    }
    found.map(|(_, path)| path).ok_or_else(|| {
        existing.sort();
        existing.dedup();
        Error::PodNotFound {
            root: root.to_path_buf(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            existing,
        }
    })
}

/// The container directory to read in `pod_dir`: `container`, or the only one.
pub fn container_dir(pod_dir: &Path, pod: &str, container: Option<&str>) -> Result<PathBuf> {
    let mut existing: Vec<String> =
        list(pod_dir)?.into_iter().filter(|n| pod_dir.join(n).is_dir()).collect();
    existing.sort();
    match container {
        Some(c) if existing.iter().any(|e| e == c) => Ok(pod_dir.join(c)),
        Some(c) => Err(Error::ContainerNotFound { pod: pod.into(), container: c.into(), existing }),
        None => match existing.as_slice() {
            [] => Err(Error::NoContainers { pod: pod.into() }),
            [only] => Ok(pod_dir.join(only)),
            _ => Err(Error::SeveralContainers { pod: pod.into(), existing }),
        },
    }
}

/// The restart counts that have a live log file in `container_dir`.
pub fn runs(container_dir: &Path) -> Result<Vec<u32>> {
    Ok(list(container_dir)?.iter().filter_map(|n| parse_log_file(n)).collect())
}

/// The run to read in `container_dir` (see [`choose_run`]); `pod` and `container` name it
/// in errors.
pub fn run(container_dir: &Path, pod: &str, container: &str, previous: bool) -> Result<u32> {
    let runs = runs(container_dir)?;
    choose_run(&runs, previous).ok_or_else(|| {
        let (pod, container) = (pod.to_owned(), container.to_owned());
        if previous && !runs.is_empty() {
            Error::NoPreviousRun { pod, container }
        } else {
            Error::NoRun { pod, container }
        }
    })
}

fn list(dir: &Path) -> Result<Vec<String>> {
    let entries =
        fs::read_dir(dir).map_err(|source| Error::List { path: dir.to_path_buf(), source })?;
    Ok(entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
}

#[cfg(test)]
mod tests;
