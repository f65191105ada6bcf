//! The API objects API pods refer to (SEMANTICS.md V1, V3): ConfigMaps and Secrets, each
//! watched alone while a pod refers to it, and tokens of the pods' service accounts; and
//! (K3) the PersistentVolumeClaims of claim volumes, with the PersistentVolume each is
//! bound to (cluster-scoped; a key derived from the claim once it names its volume).
//!
//! As kubelet's watch-based managers do, every referenced ConfigMap and Secret gets its
//! own list+watch (`fieldSelector=metadata.name=<name>` in its namespace): no polling, no
//! cluster-wide list. Claims and volumes are read with `get` each time the pod's volumes
//! are set up, as kubelet's volume manager reads them: a node may only `get` them (K5,
//! the Node authorizer), so a pod waiting for its claim to bind reads it again on each
//! retry of its sandbox, at the sandbox's backoff. A pod [`Objects::claim`]s its
//! references once, when the merge hands it over (the pod workers' dispatcher does), and
//! [`Objects::release`]s them when it is gone; what it resolves or reads later is what
//! it claimed. An object nobody claims any more is no longer watched, nor kept
//! ([`outpost_core::claims`] decides, [`watches`] carries it out).
//!
//! What is known of each object, present or known absent, and the tokens, are kept in
//! the private checkpoint `api-objects` (mode 0600: it holds Secrets), written before
//! anyone is told of a change, so that after a reboot without the API server the pods
//! come back with the same volumes and variables (V3). The checkpoint's entries nobody
//! claims once every source has been seen are dropped ([`Objects::collect_garbage`]).
//!
//! A change (an object came, changed, or went; a token is due for refresh) is told to
//! the pods that claim it through the [`Changes`] stream, by pod full name; the pod
//! workers write the volumes again, and retry what waited for the object.
//!
//! K1: the Services the pods' variables are made of are watched, kept and told the same
//! way, by scope (`services`).
//!
//! D5: an API pod's RuntimeClass (cluster-scoped) is watched by name as a ConfigMap is:
//! its sandbox waits for the first answer as for its volumes' objects, and what was read
//! is kept through an outage.
//!
//! V1: while any pod projects a `clusterTrustBundle`, every ClusterTrustBundle is listed
//! and watched as one object (kubelet's ClusterTrustBundle informer: a source selects by
//! signer and labels, which a watch by name cannot follow), kept and told the same way.

mod claiming;
mod saved;
mod services;
mod token;
mod watch;
mod watches;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use outpost_core::claims::Claims;
use outpost_core::pod::{self, FullName};
use outpost_core::pod_worker::Answers;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tracing::debug;

use self::claiming::apply;
use self::token::{Token, TokenKey};
use self::watches::Watches;
use crate::apiserver::{ApiClient, lock};
use crate::checkpoint::Checkpoints;
use crate::runtime::spec::claims;
use crate::runtime::spec::projection::{self, Object, Reference, Resolution, Resolved};
use crate::runtime::spec::services::ServiceEnv;
pub use outpost_core::pod_worker::objects::SERVICES_NOT_READ;

/// The kinds of object watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    ConfigMap,
    Secret,
    /// K3.
    PersistentVolumeClaim,
    /// K3: cluster-scoped (its key's namespace is empty).
    PersistentVolume,
    /// D5: cluster-scoped, watched by name as ConfigMaps and Secrets are.
    RuntimeClass,
    /// V1: every ClusterTrustBundle (cluster-scoped), as one object of no name.
    ClusterTrustBundles,
}

impl Kind {
    /// ConfigMaps and Secrets are watched; claims and volumes are read with `get` when
    /// they are used (K5).
    fn is_watched(self) -> bool {
        matches!(
            self,
            Kind::ConfigMap | Kind::Secret | Kind::RuntimeClass | Kind::ClusterTrustBundles
        )
    }

    /// As kubelet's messages name it (`configmap "x" not found`).
    fn as_str(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
            Kind::PersistentVolumeClaim => "persistentvolumeclaim",
            Kind::PersistentVolume => "persistentvolume",
            Kind::RuntimeClass => "runtimeclass",
            Kind::ClusterTrustBundles => "clustertrustbundles",
        }
    }
}

/// A watched object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Key {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name.is_empty() {
            return f.write_str(self.kind.as_str());
        }
        if self.namespace.is_empty() {
            return write!(f, "{} {}", self.kind.as_str(), self.name);
        }
        write!(f, "{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// What is known of an object.
#[derive(Debug, Clone, PartialEq)]
enum Known {
    /// No answer yet (never listed, not in the checkpoint).
    Unknown,
    Present(Object),
    Absent,
}

/// A pod that claimed objects: its full name (changes are told by name) and what it
/// refers to itself (its claim in [`State::claims`] adds what derives from that: the
/// PersistentVolume of each bound claim, K3).
#[derive(Debug)]
struct Claimant {
    name: FullName,
    base: BTreeSet<Key>,
}

#[derive(Debug, Default)]
struct State {
    /// What is known of each claimed object, and of those the checkpoint kept that no
    /// pod claimed yet.
    objects: BTreeMap<Key, Known>,
    /// Who claims which object.
    claims: Claims<Key>,
    /// The pods that claimed, by UID.
    pods: HashMap<String, Claimant>,
    tokens: BTreeMap<TokenKey, Token>,
    /// The refresh timer of each token.
    timers: HashMap<TokenKey, AbortHandle>,
    /// K1: the Services of the pods' variables.
    services: services::Services,
    /// Every list+watch running, objects' and Services'.
    watches: Watches,
}

#[derive(Debug)]
struct Inner {
    client: ApiClient,
    checkpoints: Checkpoints,
    state: Mutex<State>,
    /// One checkpoint write at a time, each of the state as it is then.
    saving: tokio::sync::Mutex<()>,
    changes: mpsc::UnboundedSender<FullName>,
}

/// The objects service; cheap to clone. Without an API server it knows nothing, and
/// nothing refers to it (static pods may not, V2).
#[derive(Debug, Clone, Default)]
pub struct Objects(Option<Arc<Inner>>);

/// The pods whose objects changed, by full name.
pub type Changes = mpsc::UnboundedReceiver<FullName>;

impl Objects {
    /// The service of the API server behind `client`, with what the checkpoint kept of an
    /// earlier run of the same server. Makes no request.
    pub async fn start(client: ApiClient, checkpoints: Checkpoints) -> (Objects, Changes) {
        let (tx, rx) = mpsc::unbounded_channel();
        let state = saved::restore(&checkpoints, client.server()).await;
        let inner = Inner {
            client,
            checkpoints,
            state: Mutex::new(state),
            saving: tokio::sync::Mutex::new(()),
            changes: tx,
        };
        (Objects(Some(Arc::new(inner))), rx)
    }

    /// Takes note of what `pod` refers to (watching what is new, dropping what it no
    /// longer refers to). Cheap when nothing changed.
    pub fn claim(&self, pod: &Pod) {
        let Some(inner) = &self.0 else { return };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let base: BTreeSet<Key> = projection::references(pod)
            .into_iter()
            .filter_map(|reference| key(namespace, &reference))
            .collect();
        let uid = pod::uid(pod).to_owned();
        let mut state = lock(&inner.state);
        state.claim_services(inner, &uid, services::scopes(pod));
        if state.pods.get(&uid).is_some_and(|claimant| claimant.base == base) {
            return;
        }
        let dropped = apply(inner, &mut state, &uid, FullName::of(pod), base);
        drop(state);
        if dropped {
            inner.save_later();
        }
    }

    /// K1: a static pod takes note of the Services its variables come from, as kubelet
    /// gives a static pod the variables of the Services its informer knows; it refers to
    /// no other object (V2).
    pub fn claim_services(&self, pod: &Pod) {
        let Some(inner) = &self.0 else { return };
        let uid = pod::uid(pod).to_owned();
        lock(&inner.state).claim_services(inner, &uid, services::scopes(pod));
    }

    /// The pod `uid` is gone: what only it referred to is no longer watched nor kept,
    /// its tokens are forgotten.
    pub fn release(&self, uid: &str) {
        let Some(inner) = &self.0 else { return };
        let mut state = lock(&inner.state);
        let scopes = state.services.claims.release(uid);
        state.apply_scopes(inner, scopes);
        if state.pods.remove(uid).is_none() {
            return;
        }
        let keys = state.claims.release(uid);
        state.apply_objects(inner, keys);
        let tokens: Vec<TokenKey> = state.tokens.keys().filter(|k| k.uid == uid).cloned().collect();
        for key in tokens {
            state.tokens.remove(&key);
            if let Some(timer) = state.timers.remove(&key) {
                timer.abort();
            }
        }
        drop(state);
        inner.save_later();
    }

    /// Every source has been seen (M9): what the checkpoint kept that no pod claimed is
    /// dropped.
    pub fn collect_garbage(&self) {
        let Some(inner) = &self.0 else { return };
        let mut state = lock(&inner.state);
        let before = state.objects.len();
        let State { objects, claims, pods, tokens, .. } = &mut *state;
        objects.retain(|key, _| claims.is_claimed(key));
        tokens.retain(|key, _| pods.contains_key(&key.uid));
        let dropped = before - state.objects.len() + state.services.collect_garbage();
        drop(state);
        if dropped > 0 {
            tracing::info!(objects = dropped, "dropped cached objects no pod refers to any more");
            inner.save_later();
        }
    }

    /// V1, K1: what has been answered of what `pod` claimed, for its worker to decide what
    /// waits ([`outpost_core::pod_worker::objects`]): every ConfigMap and Secret found or
    /// known absent, the Services of its variables read (an API pod's: a static pod's
    /// are what is known), and whether the API server answers. Everything, without one.
    pub fn answers(&self, pod: &Pod) -> Answers {
        let Some(inner) = &self.0 else { return Answers::ALL };
        let state = lock(&inner.state);
        let base = state.pods.get(pod::uid(pod)).map(|claimant| &claimant.base);
        let objects =
            base.into_iter().flatten().filter(|key| key.kind.is_watched()).all(|key| {
                matches!(state.objects.get(key), Some(Known::Present(_) | Known::Absent))
            });
        let services = is_static(pod) || state.services.read(&services::scopes(pod));
        Answers { objects, services, reachable: inner.client.connectivity().is_reachable() }
    }

    /// What `references` of `pod` resolve to now: an object not answered yet is
    /// unavailable (its worker waited for the answer, [`Objects::answers`]); a token is
    /// requested when there is none or it is due for refresh (the old one is kept if
    /// that fails).
    pub async fn resolve(&self, pod: &Pod, references: &BTreeSet<Reference>) -> Resolved {
        let Some(inner) = &self.0 else {
            let why = "no API server is configured (--kubeconfig)";
            return Resolved(
                references
                    .iter()
                    .map(|r| (r.clone(), Resolution::Unavailable(why.into())))
                    .collect(),
            );
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut resolved = BTreeMap::new();
        for reference in references {
            let resolution = match key(namespace, reference) {
                Some(key) => inner.object(&key).await,
                None => token::resolve(inner, pod, reference).await,
            };
            resolved.insert(reference.clone(), resolution);
        }
        // K3: the volume of each bound claim, derived from it.
        let volumes: Vec<Reference> = resolved
            .values()
            .filter_map(|resolution| match resolution {
                Resolution::Found(Object::PersistentVolumeClaim(claim)) => {
                    claims::bound_volume(claim).map(|v| Reference::PersistentVolume(v.to_owned()))
                }
                _ => None,
            })
            .collect();
        for reference in volumes {
            if let Some(key) = key(namespace, &reference) {
                let resolution = inner.object(&key).await;
                resolved.insert(reference, resolution);
            }
        }
        Resolved(resolved)
    }

    /// K1: the Service variables of `pod`'s containers: an API pod's once their Services
    /// were read (kubelet's [`SERVICES_NOT_READ`] before: its worker waited for them and
    /// fails the start itself), a static pod's what is known. None without an API
    /// server, as kubelet without one.
    pub fn service_env(&self, pod: &Pod) -> Result<ServiceEnv, &'static str> {
        let Some(inner) = &self.0 else { return Ok(ServiceEnv::new()) };
        let state = lock(&inner.state);
        if !is_static(pod) && !state.services.read(&services::scopes(pod)) {
            return Err(SERVICES_NOT_READ);
        }
        Ok(state.services.env(pod))
    }
}

/// Not an API pod: its Services are what is known, nothing is waited for (K1); its
/// class names a handler of the node, not a RuntimeClass (D5).
pub fn is_static(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let source = annotations.and_then(|a| a.get(pod::CONFIG_SOURCE)).map(String::as_str);
    source != Some(pod::Source::Api.config_source())
}

impl Inner {
    /// What is known of `key`: a watched object's as answered so far; a claim's or a
    /// volume's, read now.
    async fn object(self: &Arc<Self>, key: &Key) -> Resolution {
        if !key.kind.is_watched() {
            return self.fetch(key).await;
        }
        let known = lock(&self.state).objects.get(key).cloned();
        match known {
            Some(Known::Present(object)) => Resolution::Found(object),
            Some(Known::Absent) => Resolution::Absent,
            _ if self.client.connectivity().is_reachable() => {
                Resolution::Unavailable("the API server has not answered yet".to_owned())
            }
            _ => Resolution::Unavailable(
                "the API server is unreachable and the object is not cached".to_owned(),
            ),
        }
    }

    /// K3, K5: a claim or a volume read with `get`. What the server answers is kept and
    /// checkpointed (the caller uses it; its claimants are not told, as they read it
    /// again when they use it); when the server cannot answer, what was kept is used
    /// (V3), else the pod waits.
    async fn fetch(self: &Arc<Self>, key: &Key) -> Resolution {
        let known = match watch::get(self, key).await {
            Ok(Some(object)) => Known::Present(object),
            Ok(None) => Known::Absent,
            Err(error) => {
                debug!(object = %key, error = %crate::error_chain::describe(&error), "cannot get the object");
                let kept = lock(&self.state).objects.get(key).cloned();
                return match kept {
                    Some(Known::Present(object)) => Resolution::Found(object),
                    Some(Known::Absent) => Resolution::Absent,
                    _ => Resolution::Unavailable(format!(
                        "cannot get {key}: {}",
                        crate::error_chain::describe(&error)
                    )),
                };
            }
        };
        if self.keep(key, known.clone()).is_some() {
            self.save().await;
        }
        match known {
            Known::Present(object) => Resolution::Found(object),
            _ => Resolution::Absent,
        }
    }

    /// A watch's answer for `key`: kept, checkpointed, then told to the claimants.
    async fn answer(self: &Arc<Self>, key: &Key, known: Known) {
        let Some(claimants) = self.keep(key, known) else { return };
        self.save().await;
        for name in claimants {
            let _ = self.changes.send(name);
        }
    }

    /// Keeps what is now known of `key`; the pods that claim it, if that changed.
    fn keep(self: &Arc<Self>, key: &Key, known: Known) -> Option<Vec<FullName>> {
        let mut state = lock(&self.state);
        let kept = state.objects.get_mut(key)?;
        if *kept == known {
            return None;
        }
        *kept = known;
        let uids: Vec<String> = state.claims.claimants(key).map(str::to_owned).collect();
        if key.kind == Kind::PersistentVolumeClaim {
            // K3: the claim's volume joins (or leaves) its claimants' claims.
            for uid in &uids {
                let Some(claimant) = state.pods.get(uid) else { continue };
                let (name, base) = (claimant.name.clone(), claimant.base.clone());
                apply(self, &mut state, uid, name, base);
            }
        }
        let names = uids.iter().filter_map(|uid| state.pods.get(uid));
        Some(names.map(|claimant| claimant.name.clone()).collect())
    }

    /// Writes the checkpoint of the state as it is now.
    async fn save(&self) {
        let _one = self.saving.lock().await;
        let snapshot = saved::snapshot(self.client.server(), &lock(&self.state));
        let checkpoints = self.checkpoints.clone();
        let written = tokio::task::spawn_blocking(move || {
            checkpoints.write_private(saved::CHECKPOINT, &snapshot)
        })
        .await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %crate::error_chain::describe(&e), "cannot checkpoint the API pods' objects; they will not survive a reboot without network");
            }
            Err(e) => tracing::warn!(error = %e, "the objects' checkpoint write did not finish"),
        }
    }

    /// [`Inner::save`] off the caller's path (from synchronous code).
    fn save_later(self: &Arc<Self>) {
        let this = self.clone();
        tokio::spawn(async move { this.save().await });
    }

    /// Tells the pod `uid` that something it refers to changed.
    fn tell(&self, uid: &str) {
        if let Some(claimant) = lock(&self.state).pods.get(uid) {
            let _ = self.changes.send(claimant.name.clone());
        }
    }
}

/// The watched object a reference names (`None` for a token).
fn key(namespace: &str, reference: &Reference) -> Option<Key> {
    let (kind, name) = match reference {
        Reference::ConfigMap(name) => (Kind::ConfigMap, name),
        Reference::Secret(name) => (Kind::Secret, name),
        Reference::PersistentVolumeClaim(name) => (Kind::PersistentVolumeClaim, name),
        Reference::PersistentVolume(name) => {
            let (kind, name) = (Kind::PersistentVolume, name.clone());
            return Some(Key { kind, namespace: String::new(), name });
        }
        Reference::RuntimeClass(name) => {
            let (kind, name) = (Kind::RuntimeClass, name.clone());
            return Some(Key { kind, namespace: String::new(), name });
        }
        Reference::ClusterTrustBundles => {
            let kind = Kind::ClusterTrustBundles;
            return Some(Key { kind, namespace: String::new(), name: String::new() });
        }
        Reference::ServiceAccountToken { .. } => return None,
    };
    Some(Key { kind, namespace: namespace.to_owned(), name: name.clone() })
}

#[cfg(test)]
mod tests;
