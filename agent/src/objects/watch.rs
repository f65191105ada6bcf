//! One object's list+watch (a ConfigMap's, a Secret's, a RuntimeClass's, D5), as
//! kubelet's watch-based ConfigMap and Secret managers do:
//! the agent's [`watcher`] with `fieldSelector=metadata.name=<name>` (a list of one
//! object or none, then its watch; resumed, re-listed on `410 Gone`, backed off with
//! jitter so that many watches coming back after an outage do not arrive together).
//! What the watcher tells is stepped into what is known of the object.
//!
//! V1: the ClusterTrustBundles are listed and watched whole, as kubelet's informer does
//! ([`follow_all`]).
//!
//! Claims and volumes are not watched: a node may only `get` them (K5), and [`get`]
//! reads one.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::Api;
use outpost_core::backoff::Backoff;
use serde::de::DeserializeOwned;
use tracing::{Instrument, debug, debug_span};

use super::{Inner, Key, Kind, Known};
use crate::apiserver::watcher::{self, Event, ListWatch, MIN_WATCH_TIMEOUT_SECS, watcher};
use crate::runtime::spec::projection::{Object, TrustBundles};

/// A kind of object watched, namespaced or cluster-scoped (the [`Api`] given to
/// [`follow_with`] says where), and how it becomes an [`Object`].
pub(super) trait Watched:
    kube::Resource<DynamicType = ()>
    + DeserializeOwned
    + Clone
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    fn wrap(self) -> Object;

    /// The object as it is kept ([`stripped`]).
    fn object(self) -> Object {
        stripped(self).wrap()
    }
}

/// An object as it is kept: without `metadata.managedFields`, which nothing here reads
/// and which is much of an object's memory (for a local-path claim and its volume, 9.8 KB
/// without, 20.8 KB with them), as K1 keeps Services.
fn stripped<K: kube::Resource>(mut object: K) -> K {
    object.meta_mut().managed_fields = None;
    object
}

impl Watched for ConfigMap {
    fn wrap(self) -> Object {
        Object::ConfigMap(Arc::new(self))
    }
}

impl Watched for Secret {
    fn wrap(self) -> Object {
        Object::Secret(Arc::new(self))
    }
}

impl Watched for PersistentVolumeClaim {
    fn wrap(self) -> Object {
        Object::PersistentVolumeClaim(Arc::new(self))
    }
}

impl Watched for PersistentVolume {
    fn wrap(self) -> Object {
        Object::PersistentVolume(Arc::new(self))
    }
}

impl Watched for RuntimeClass {
    fn wrap(self) -> Object {
        Object::RuntimeClass(Arc::new(self))
    }
}

/// Follows `key` (a ConfigMap, a Secret or a RuntimeClass) until the task is aborted
/// (when no pod refers to it any more).
pub(super) async fn follow(inner: Arc<Inner>, key: Key) {
    let kube = inner.client.kube().clone();
    let span = debug_span!("watch", object = %key);
    match key.kind {
        Kind::ConfigMap => {
            let api = Api::<ConfigMap>::namespaced(kube, &key.namespace);
            follow_with(inner, key, api).instrument(span).await;
        }
        Kind::Secret => {
            let api = Api::<Secret>::namespaced(kube, &key.namespace);
            follow_with(inner, key, api).instrument(span).await;
        }
        Kind::RuntimeClass => {
            let api = Api::<RuntimeClass>::all(kube);
            follow_with(inner, key, api).instrument(span).await;
        }
        Kind::ClusterTrustBundles => {
            let api = Api::<ClusterTrustBundle>::all(kube);
            follow_all(inner, key, api).instrument(span).await;
        }
        Kind::PersistentVolumeClaim | Kind::PersistentVolume => {
            debug!(object = %key, "claims and volumes are read with get, never watched");
        }
    }
}

/// K3, K5: one `get` of `key` (a claim or a volume): the object, or `None` when the server
/// says it does not exist.
pub(super) async fn get(inner: &Inner, key: &Key) -> Result<Option<Object>, kube::Error> {
    let kube = inner.client.kube().clone();
    let found = match key.kind {
        Kind::PersistentVolumeClaim => {
            let api = Api::<PersistentVolumeClaim>::namespaced(kube, &key.namespace);
            api.get_opt(&key.name).await?.map(Watched::object)
        }
        Kind::PersistentVolume => {
            let api = Api::<PersistentVolume>::all(kube);
            api.get_opt(&key.name).await?.map(Watched::object)
        }
        Kind::ConfigMap => {
            let api = Api::<ConfigMap>::namespaced(kube, &key.namespace);
            api.get_opt(&key.name).await?.map(Watched::object)
        }
        Kind::Secret => {
            let api = Api::<Secret>::namespaced(kube, &key.namespace);
            api.get_opt(&key.name).await?.map(Watched::object)
        }
        Kind::RuntimeClass => {
            let api = Api::<RuntimeClass>::all(kube);
            api.get_opt(&key.name).await?.map(Watched::object)
        }
        Kind::ClusterTrustBundles => {
            let api = Api::<ClusterTrustBundle>::all(kube);
            let list = api.list(&kube::api::ListParams::default()).await?;
            let set = list.items.into_iter().map(stripped).map(named).collect();
            Some(Object::ClusterTrustBundles(Arc::new(set)))
        }
    };
    Ok(found)
}

/// V1: every ClusterTrustBundle, listed then watched, stepped into one object (the set,
/// by name) told whole on each change.
pub(super) async fn follow_all(
    inner: Arc<Inner>,
    key: Key,
    lw: impl ListWatch<ClusterTrustBundle>,
) {
    let config = watcher::Config {
        field_selector: None,
        page_size: Some(LIST_PAGE),
        watch_timeout_secs: MIN_WATCH_TIMEOUT_SECS,
        backoff: Backoff::WATCH,
        pacer: Some(inner.client.pacer()),
    };
    let events = watcher(lw, config, inner.client.connectivity().clone());
    let mut events = std::pin::pin!(events);
    let mut set = Set::default();
    while let Some(event) = events.next().await {
        if let Some(known) = set.step(event) {
            inner.answer(&key, known).await;
        }
    }
}

/// Bundles per list page, as kubelet's informers page.
const LIST_PAGE: u32 = 500;

/// The ClusterTrustBundles known (shared with what [`Inner`] keeps), and the list under
/// way.
#[derive(Debug, Default)]
struct Set {
    /// `None` until the first list is complete.
    current: Option<Arc<TrustBundles>>,
    listing: Option<TrustBundles>,
}

impl Set {
    /// One event of the watcher: the set, when it changed.
    fn step(&mut self, event: Event<ClusterTrustBundle>) -> Option<Known> {
        match event {
            Event::Init => self.listing = Some(TrustBundles::new()),
            Event::InitApply(bundle) => {
                if let Some(listing) = &mut self.listing {
                    listing.extend([named(stripped(bundle))]);
                }
            }
            Event::InitDone => {
                let listed = self.listing.take()?;
                return self.replace(listed);
            }
            Event::Apply(bundle) => {
                let mut next = TrustBundles::clone(self.current.as_ref()?);
                next.extend([named(stripped(bundle))]);
                return self.replace(next);
            }
            Event::Delete(bundle) => {
                let mut next = TrustBundles::clone(self.current.as_ref()?);
                next.remove(bundle.metadata.name.as_deref().unwrap_or_default());
                return self.replace(next);
            }
            Event::Bookmark | Event::Recovered => {}
            Event::Failed(error) => {
                debug!(error = %error, "cannot watch the ClusterTrustBundles");
                self.listing = None;
            }
        }
        None
    }

    fn replace(&mut self, next: TrustBundles) -> Option<Known> {
        if self.current.as_deref() == Some(&next) {
            return None;
        }
        let next = Arc::new(next);
        self.current = Some(next.clone());
        Some(Known::Present(Object::ClusterTrustBundles(next)))
    }
}

/// A bundle by its name, as [`TrustBundles`] keeps it.
fn named(bundle: ClusterTrustBundle) -> (String, ClusterTrustBundle) {
    (bundle.metadata.name.clone().unwrap_or_default(), bundle)
}

/// [`follow`] with the list and watch calls of `lw`.
pub(super) async fn follow_with<K: Watched>(inner: Arc<Inner>, key: Key, lw: impl ListWatch<K>) {
    let config = watcher::Config {
        field_selector: Some(format!("metadata.name={}", key.name)),
        page_size: None,
        watch_timeout_secs: MIN_WATCH_TIMEOUT_SECS,
        backoff: Backoff::WATCH,
        pacer: Some(inner.client.pacer()),
    };
    let events = watcher(lw, config, inner.client.connectivity().clone());
    let mut events = std::pin::pin!(events);
    let mut state = State::Watching;
    while let Some(event) = events.next().await {
        let (next, known) = step(state, &key, event);
        state = next;
        if let Some(known) = known {
            debug!(present = matches!(known, Known::Present(_)), "answered");
            inner.answer(&key, known).await;
        }
    }
}

/// Where an object's watch stands.
#[derive(Debug)]
enum State {
    /// Between lists.
    Watching,
    /// A list is under way: the object, if it has come.
    Listing(Option<Object>),
}

/// One event of the watcher: the next state, and what is now known of `key`, if the
/// event tells.
fn step<K: Watched>(state: State, key: &Key, event: Event<K>) -> (State, Option<Known>) {
    match (state, event) {
        (_, Event::Init) => (State::Listing(None), None),
        (State::Listing(found), Event::InitApply(object)) => {
            if object.meta().name.as_deref() == Some(&key.name) {
                return (State::Listing(Some(object.object())), None);
            }
            (State::Listing(found), None)
        }
        (State::Listing(found), Event::InitDone) => {
            let known = found.map_or(Known::Absent, Known::Present);
            (State::Watching, Some(known))
        }
        (State::Watching, Event::InitApply(_) | Event::InitDone) => (State::Watching, None),
        (state, Event::Apply(object)) => (state, Some(Known::Present(object.object()))),
        (state, Event::Delete(_)) => (state, Some(Known::Absent)),
        (state, Event::Bookmark | Event::Recovered) => (state, None),
        // A list that failed midway is dropped: the next one begins with `Init`.
        (_, Event::Failed(error)) => {
            debug!(error = %error, "cannot watch the object");
            (State::Watching, None)
        }
    }
}
