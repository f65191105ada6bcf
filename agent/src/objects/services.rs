//! K1: the Services pods' variables are made of, watched as narrowly as they can be:
//! the `kubernetes` Service of `default` by name (`fieldSelector=metadata.name=kubernetes`),
//! and the Services of each namespace of this node's pods that use service links (one
//! list+watch per namespace, no selector), each while a pod needs it. Never every Service
//! of the cluster, as kubelet's informer does: a node only ever needs these.
//!
//! A scope counts as read once a list of it has been answered, in this run or in an
//! earlier one (the checkpoint keeps what each scope held, V3), so that an offline reboot
//! gives pods the variables they had. An API pod's container waits for its scopes to have
//! been read (its worker decides, on [`super::Objects::answers`]; kubelet's "services
//! have not yet been read at least once" after the wait); a static pod's takes what is
//! known.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::Api;
use outpost_core::backoff::Backoff;
use outpost_core::claims::Claims;
use serde::{Deserialize, Serialize};
use tracing::{Instrument, debug, debug_span};

use super::{Inner, State};
use crate::apiserver::lock;
use crate::apiserver::watcher::{self, Event, MIN_WATCH_TIMEOUT_SECS, watcher};
use crate::runtime::spec::services::{self, MASTER_NAMESPACE, MASTER_SERVICE, ServiceEnv};

/// What one list+watch follows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    /// The `kubernetes` Service of `default`.
    Master,
    /// Every Service of a namespace.
    Namespace(String),
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Master => write!(f, "service {MASTER_NAMESPACE}/{MASTER_SERVICE}"),
            Scope::Namespace(namespace) => write!(f, "services of {namespace}"),
        }
    }
}

/// What is known of a scope.
#[derive(Debug, Default)]
pub(super) struct Watched {
    /// A list has been answered (now or in an earlier run).
    pub(super) read: bool,
    /// By name.
    pub(super) services: BTreeMap<String, Arc<Service>>,
}

/// The scopes watched and who needs them.
#[derive(Debug, Default)]
pub(super) struct Services {
    /// What is known of each claimed scope, and of those the checkpoint kept that no pod
    /// claimed yet.
    pub(super) scopes: BTreeMap<Scope, Watched>,
    pub(super) claims: Claims<Scope>,
}

/// Whether `pod` uses service links (`enableServiceLinks`, true unless false).
fn links(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.enable_service_links) != Some(false)
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or(MASTER_NAMESPACE)
}

/// The scopes `pod`'s variables come from: its namespace's with service links (which
/// hold `default`'s `kubernetes` for a pod of `default`), and the `kubernetes` Service.
pub(super) fn scopes(pod: &Pod) -> BTreeSet<Scope> {
    let namespace = namespace(pod);
    let mut scopes = BTreeSet::new();
    if links(pod) {
        scopes.insert(Scope::Namespace(namespace.to_owned()));
    }
    if !(links(pod) && namespace == MASTER_NAMESPACE) {
        scopes.insert(Scope::Master);
    }
    scopes
}

impl Services {
    /// Drops what nobody claims (the checkpoint's leftovers); how many.
    pub(super) fn collect_garbage(&mut self) -> usize {
        let before = self.scopes.len();
        let claims = &self.claims;
        self.scopes.retain(|scope, _| claims.is_claimed(scope));
        before - self.scopes.len()
    }

    /// A scope as the checkpoint kept it (read, watched by nobody yet).
    pub(super) fn restore(&mut self, scope: Scope, services: Vec<Arc<Service>>) {
        let services =
            services.into_iter().filter_map(|s| Some((s.metadata.name.clone()?, s))).collect();
        self.scopes.insert(scope, Watched { read: true, services });
    }

    /// Whether every one of `scopes` has been read.
    pub(super) fn read(&self, scopes: &BTreeSet<Scope>) -> bool {
        scopes.iter().all(|s| self.scopes.get(s).is_some_and(|w| w.read))
    }

    /// K1: the variables of `pod` from what is known of its scopes.
    pub(super) fn env(&self, pod: &Pod) -> ServiceEnv {
        let known = scopes(pod).into_iter().filter_map(|s| self.scopes.get(&s));
        let all = known.flat_map(|w| w.services.values().map(AsRef::as_ref));
        services::service_env(namespace(pod), links(pod), all)
    }
}

impl Inner {
    /// A list or watch event of `scope`, applied; checkpointed, and told to the pods
    /// that need it when it is the scope's first read (those waiting for it).
    async fn services_answer(self: &Arc<Self>, scope: &Scope, change: Change) {
        let told = {
            let mut state = lock(&self.state);
            let State { services, pods, .. } = &mut *state;
            let Some(watched) = services.scopes.get_mut(scope) else { return };
            let first = !watched.read;
            match change {
                Change::Listed(listed) => {
                    watched.services = listed;
                    watched.read = true;
                }
                Change::Applied(service) => {
                    let Some(name) = service.metadata.name.clone() else { return };
                    watched.services.insert(name, service);
                }
                Change::Deleted(name) => {
                    watched.services.remove(&name);
                }
            }
            let told = first && watched.read;
            let uids: Vec<&str> =
                if told { services.claims.claimants(scope).collect() } else { Vec::new() };
            uids.into_iter()
                .filter_map(|uid| pods.get(uid))
                .map(|c| c.name.clone())
                .collect::<Vec<_>>()
        };
        self.save().await;
        for name in told {
            let _ = self.changes.send(name);
        }
    }
}

/// What an event changes of a scope.
#[derive(Debug)]
enum Change {
    Listed(BTreeMap<String, Arc<Service>>),
    Applied(Arc<Service>),
    Deleted(String),
}

/// A Service as it is kept: without `metadata.managedFields` (client-go's
/// `TransformStripManagedFields`, as kube-controller-manager's informers do), which no
/// variable needs and which is much of a Service's memory (measured for a two-port
/// Service: 9.6 KB as `kubectl apply` wrote it, 2.7 KB with neither its managedFields
/// nor its last-applied annotation).
fn kept(mut service: Service) -> Arc<Service> {
    service.metadata.managed_fields = None;
    Arc::new(service)
}

/// Follows `scope` until the task is aborted (when no pod needs it any more).
pub(super) async fn follow(inner: Arc<Inner>, scope: Scope) {
    let kube = inner.client.kube().clone();
    let (namespace, field_selector) = match &scope {
        Scope::Master => (MASTER_NAMESPACE, Some(format!("metadata.name={MASTER_SERVICE}"))),
        Scope::Namespace(namespace) => (namespace.as_str(), None),
    };
    let api = Api::<Service>::namespaced(kube, namespace);
    let config = watcher::Config {
        field_selector,
        page_size: None,
        watch_timeout_secs: MIN_WATCH_TIMEOUT_SECS,
        backoff: Backoff::WATCH,
        pacer: Some(inner.client.pacer()),
    };
    let span = debug_span!("watch", services = %scope);
    let events = watcher(api, config, inner.client.connectivity().clone());
    async move {
        let mut events = std::pin::pin!(events);
        let mut listing: Option<BTreeMap<String, Arc<Service>>> = None;
        while let Some(event) = events.next().await {
            let change = match event {
                Event::Init => {
                    listing = Some(BTreeMap::new());
                    None
                }
                Event::InitApply(service) => {
                    if let (Some(list), Some(name)) = (&mut listing, service.metadata.name.clone())
                    {
                        list.insert(name, kept(service));
                    }
                    None
                }
                Event::InitDone => listing.take().map(Change::Listed),
                Event::Apply(service) => Some(Change::Applied(kept(service))),
                Event::Delete(service) => service.metadata.name.map(Change::Deleted),
                Event::Bookmark | Event::Recovered => None,
                Event::Failed(error) => {
                    debug!(error = %error, "cannot watch the services");
                    listing = None;
                    None
                }
            };
            if let Some(change) = change {
                inner.services_answer(&scope, change).await;
            }
        }
    }
    .instrument(span)
    .await;
}

#[cfg(test)]
mod tests;
