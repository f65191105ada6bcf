//! The shared services of the API server, below every task that talks to it: the
//! [`ApiClient`] (one token bucket, one [`Connectivity`] flag, woken by the kernel's
//! network changes through [`network`]), the [`watcher`] every list+watch of the agent
//! is built on, the [`MirrorView`] the API source feeds, the emit side of Kubernetes Events ([`events::Recorder`]), and
//! [`Health`], how the sync fares, for the metrics and `GET /status`.
//!
//! Sources, workers and the runtime record what they need here; the writers that send
//! it (the Node, the Lease, pod status, mirror pods, the Events) are `crate::sync`,
//! which reads this module and is never read by it.

pub mod client;
pub mod connectivity;
pub mod credentials;
pub mod events;
pub mod kubeconfig;
pub mod network;
pub mod server_time;
pub mod transport;
pub mod watcher;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use outpost_core::pod::{self, CONFIG_MIRROR, FullName};
use tokio::sync::watch;

pub use self::client::{ApiClient, CallError, ConfigError, Pacer, Reconnects};
pub use self::connectivity::{Connectivity, Reconnect, Wakeups, Woken};
pub use self::credentials::Credentials;
pub use self::events::Recorder;

/// A mirror pod as the API server has it (R1–R5).
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorPod {
    pub uid: String,
    /// Its `kubernetes.io/config.mirror` annotation: the static pod's hash it mirrors.
    pub mirror_of: String,
    pub deleting: bool,
    pub pod: Arc<Pod>,
}

impl MirrorPod {
    /// `None` if `pod` is not a mirror pod.
    pub fn of(pod: &Arc<Pod>) -> Option<MirrorPod> {
        let mirror_of = pod::annotation(pod, CONFIG_MIRROR)?.to_owned();
        Some(MirrorPod {
            uid: pod::uid(pod).to_owned(),
            mirror_of,
            deleting: pod.metadata.deletion_timestamp.is_some(),
            pod: pod.clone(),
        })
    }
}

/// The mirror pods bound to this node, as the API source's list and watch last saw
/// them (the source drops them from the merge, R6, and hands them here instead).
/// `None` until the first list: before it, nothing is known about them.
#[derive(Debug, Clone)]
pub struct MirrorView(Arc<watch::Sender<Option<Mirrors>>>);

/// The mirror pods by full name.
pub type Mirrors = Arc<BTreeMap<FullName, MirrorPod>>;

impl Default for MirrorView {
    fn default() -> MirrorView {
        MirrorView(Arc::new(watch::Sender::new(None)))
    }
}

impl MirrorView {
    /// A list: replaces everything known.
    pub fn listed(&self, pods: impl IntoIterator<Item = Arc<Pod>>) {
        let map = pods
            .into_iter()
            .filter_map(|p| Some((FullName::of(&p), MirrorPod::of(&p)?)))
            .collect::<BTreeMap<_, _>>();
        self.0.send_replace(Some(Arc::new(map)));
    }

    /// A watch ADDED/MODIFIED of a mirror pod.
    pub fn upserted(&self, pod: &Arc<Pod>) {
        let Some(mirror) = MirrorPod::of(pod) else { return };
        self.edit(|map| {
            map.insert(FullName::of(pod), mirror);
        });
    }

    /// A watch DELETED of a mirror pod (only if it is still the same pod).
    pub fn deleted(&self, pod: &Pod) {
        let uid = pod::uid(pod);
        self.edit(|map| {
            let name = FullName::of(pod);
            if map.get(&name).is_some_and(|m| m.uid == uid) {
                map.remove(&name);
            }
        });
    }

    fn edit(&self, change: impl FnOnce(&mut BTreeMap<FullName, MirrorPod>)) {
        self.0.send_if_modified(|current| {
            let Some(map) = current else { return false };
            change(Arc::make_mut(map));
            true
        });
    }

    /// The latest view (`None` before the first list).
    pub fn current(&self) -> Option<Mirrors> {
        self.0.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Option<Mirrors>> {
        self.0.subscribe()
    }
}

/// Where the pod status task stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusBacklog {
    /// The [`StatusStore::version`](crate::status::StatusStore::version) its last pass took in.
    pub version: u64,
    /// Updates waiting to be sent (offline, or backing off after an error).
    pub queued: usize,
    /// Of those, the ones due now (offline: all; reachable, after a pass: none, unless
    /// the pass stopped because the server went away).
    pub due: usize,
}

/// How the sync to the API server fares (when a kubeconfig is given): what the metrics
/// and `GET /status` read.
#[derive(Debug, Clone)]
pub struct Health {
    pub connectivity: Connectivity,
    pub status_backlog: watch::Receiver<StatusBacklog>,
}

/// A poisoned lock still holds usable data here (plain maps).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str, mirror_of: Option<&str>) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_owned());
        pod.metadata.namespace = Some("default".to_owned());
        pod.metadata.uid = Some(uid.to_owned());
        if let Some(hash) = mirror_of {
            pod.metadata.annotations =
                Some([(CONFIG_MIRROR.to_owned(), hash.to_owned())].into_iter().collect());
        }
        Arc::new(pod)
    }

    fn full(name: &str) -> FullName {
        FullName { namespace: "default".to_owned(), name: name.to_owned() }
    }

    #[test]
    fn the_mirror_view_follows_lists_and_watch_events() {
        let view = MirrorView::default();
        view.upserted(&pod("a", "1", Some("h1")));
        assert!(view.current().is_none(), "nothing is known before the first list");
        view.listed([pod("a", "1", Some("h1")), pod("api", "2", None)]);
        let now = view.current().unwrap_or_default();
        assert_eq!(now.keys().cloned().collect::<Vec<_>>(), [full("a")], "only mirrors");
        view.upserted(&pod("b", "3", Some("h2")));
        view.upserted(&pod("a", "4", Some("h3")));
        let now = view.current().unwrap_or_default();
        assert_eq!((now[&full("a")].uid.as_str(), now[&full("a")].mirror_of.as_str()), ("4", "h3"));
        // A DELETED of the replaced pod (old UID) leaves its successor alone.
        view.deleted(&pod("a", "1", Some("h1")));
        assert!(view.current().unwrap_or_default().contains_key(&full("a")));
        view.deleted(&pod("a", "4", Some("h3")));
        let now = view.current().unwrap_or_default();
        assert_eq!(now.keys().cloned().collect::<Vec<_>>(), [full("b")]);
    }
}
