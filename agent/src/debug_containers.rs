//! X4: the ephemeral containers `outpost debug` adds to static pods. The API server will
//! not change a mirror pod, and a static pod's manifest is the operator's file, so the
//! agent keeps them itself, by pod UID: the local API adds one, the dispatcher puts them
//! in the pod it hands the pod's worker (so a file source's SET of the same manifest
//! keeps them), and the local API's views of the pod show them. They are written to
//! `<state-dir>/pods/<uid>/debug-containers.json`, so that an agent restart finds them
//! (and adopts their containers); the file goes with the pod's directory, and a changed
//! manifest (a new UID) leaves them behind, as a recreated pod does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use outpost_core::pod::FullName;
use tokio::sync::Notify;

/// The file, in the pod's directory.
const FILE: &str = "debug-containers.json";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot record the ephemeral container of pod {pod} in {path}: {source}")]
    Write {
        pod: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The ephemeral containers of static pods, shared by the local API and the dispatcher
/// (clones share them).
#[derive(Debug, Clone, Default)]
pub struct DebugContainers(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    /// `<state-dir>/pods`; `None`: kept in memory only (a hollow node).
    pods_dir: Option<PathBuf>,
    state: Mutex<State>,
    /// Woken when a pod gained a container, for the dispatcher.
    added: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// By pod UID; an empty list once a pod's file was found missing.
    containers: HashMap<String, Vec<EphemeralContainer>>,
    /// The pods that gained a container since the dispatcher last looked.
    changed: Vec<FullName>,
}

impl DebugContainers {
    /// Kept under `pods_dir` (`<state-dir>/pods`).
    pub fn new(pods_dir: PathBuf) -> DebugContainers {
        DebugContainers(Arc::new(Inner { pods_dir: Some(pods_dir), ..Inner::default() }))
    }

    /// The ephemeral containers added to the pod `uid`, oldest first.
    pub fn containers(&self, uid: &str) -> Vec<EphemeralContainer> {
        let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(list) = state.containers.get(uid) {
            return list.clone();
        }
        let list = self.0.pods_dir.as_deref().map(|dir| read(dir, uid)).unwrap_or_default();
        state.containers.insert(uid.to_owned(), list.clone());
        list
    }

    /// `pod` with the ephemeral containers added to it after those its spec has.
    pub fn apply(&self, pod: &mut Pod) {
        let added = self.containers(outpost_core::pod::uid(pod));
        add_to(pod, added);
    }

    /// [`DebugContainers::apply`] to a shared pod: the same pod when it has none.
    pub fn applied(&self, pod: Arc<Pod>) -> Arc<Pod> {
        let added = self.containers(outpost_core::pod::uid(&pod));
        if added.is_empty() {
            return pod;
        }
        let mut pod = Pod::clone(&pod);
        add_to(&mut pod, added);
        Arc::new(pod)
    }

    /// Adds `container` to the static pod `pod` (checked by the caller), recorded before
    /// the dispatcher is told.
    pub fn add(&self, pod: &Pod, container: EphemeralContainer) -> Result<(), Error> {
        let uid = outpost_core::pod::uid(pod).to_owned();
        let mut list = self.containers(&uid);
        list.push(container);
        if let Some(dir) = &self.0.pods_dir {
            let path = dir.join(&uid).join(FILE);
            let shown = FullName::of(pod).to_string();
            write(&path, &list).map_err(|source| Error::Write { pod: shown, path, source })?;
        }
        let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.containers.insert(uid, list);
        state.changed.push(FullName::of(pod));
        drop(state);
        self.0.added.notify_one();
        Ok(())
    }

    /// The pod `uid` is gone or replaced: its containers are forgotten (its directory,
    /// the file with it, is the runtime's to remove).
    pub fn forget(&self, uid: &str) {
        let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.containers.remove(uid);
    }

    /// Waits until a pod gained a container; the pods that did since the last call.
    pub async fn added(&self) -> Vec<FullName> {
        loop {
            let changed = {
                let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
                std::mem::take(&mut state.changed)
            };
            if !changed.is_empty() {
                return changed;
            }
            self.0.added.notified().await;
        }
    }
}

/// `added` appended to the pod's ephemeral containers, each name once.
fn add_to(pod: &mut Pod, added: Vec<EphemeralContainer>) {
    if added.is_empty() {
        return;
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    let list = spec.ephemeral_containers.get_or_insert_with(Vec::new);
    for container in added {
        if !list.iter().any(|c| c.name == container.name) {
            list.push(container);
        }
    }
}

/// The recorded containers of pod `uid`; none when there is no file or it cannot be
/// read (logged: the pod runs without them).
fn read(pods_dir: &Path, uid: &str) -> Vec<EphemeralContainer> {
    let path = pods_dir.join(uid).join(FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the pod's debug containers");
            return Vec::new();
        }
    };
    crate::json::from_slice(&bytes).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "the pod's debug containers file is not valid; ignored");
        Vec::new()
    })
}

/// Writes the list whole: a temporary file renamed over the old one.
fn write(path: &Path, list: &[EphemeralContainer]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let bytes = serde_json::to_vec_pretty(list).map_err(std::io::Error::other)?;
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests;
