//! The runtime's truth as the rest of the agent reads it: each pod's status as the pod
//! workers last published it, and whether containerd is connected. The local API, the
//! metrics and the sync to the API server read it; only the runtime writes it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::PodStatus;

/// Whether the container runtime has answered (set once the agent has connected).
pub type RuntimeReady = Arc<std::sync::atomic::AtomicBool>;

/// The latest status of every pod a worker runs, by pod UID (read by `/pods` and the
/// status sync). A status equal to the one stored (conditions' transition times aside)
/// is not a change: the stored one, with its times, stays, and no one is woken.
#[derive(Debug, Clone, Default)]
pub struct StatusStore(Arc<StatusInner>);

#[derive(Debug, Default)]
struct StatusInner {
    map: RwLock<HashMap<String, Arc<PodStatus>>>,
    /// Bumped on every change; readers wait on it.
    changes: tokio::sync::watch::Sender<u64>,
}

impl StatusStore {
    pub fn get(&self, uid: &str) -> Option<Arc<PodStatus>> {
        self.0.map.read().ok().and_then(|map| map.get(uid).cloned())
    }

    /// Every pod's status, by UID.
    pub fn all(&self) -> HashMap<String, Arc<PodStatus>> {
        self.0.map.read().map(|map| map.clone()).unwrap_or_default()
    }

    /// How many changes there have been (it only grows).
    pub fn version(&self) -> u64 {
        *self.0.changes.borrow()
    }

    /// Changes after this call mark the receiver changed.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.changes.subscribe()
    }

    pub fn set(&self, uid: &str, mut status: PodStatus) {
        let Ok(mut map) = self.0.map.write() else { return };
        if let Some(old) = map.get(uid) {
            keep_transition_times(old, &mut status);
            if **old == status {
                return;
            }
        }
        map.insert(uid.to_owned(), Arc::new(status));
        drop(map);
        self.0.changes.send_modify(|n| *n += 1);
    }

    pub fn remove(&self, uid: &str) {
        let Ok(mut map) = self.0.map.write() else { return };
        if map.remove(uid).is_some() {
            drop(map);
            self.0.changes.send_modify(|n| *n += 1);
        }
    }
}

/// A condition whose status did not change keeps the time it last changed (kubelet's
/// `lastTransitionTime`).
fn keep_transition_times(old: &PodStatus, new: &mut PodStatus) {
    let old = old.conditions.as_deref().unwrap_or_default();
    for condition in new.conditions.iter_mut().flatten() {
        if let Some(before) =
            old.iter().find(|c| c.type_ == condition.type_ && c.status == condition.status)
        {
            condition.last_transition_time.clone_from(&before.last_transition_time);
        }
    }
}
