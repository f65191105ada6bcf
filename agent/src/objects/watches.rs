//! The one executor of the objects' watches: what [`Claims`](outpost_core::claims)
//! decides to start is watched (a ConfigMap's or a Secret's list+watch by name, a scope
//! of Services), and what it decides to stop is no longer watched, nor kept. Claims and
//! volumes are claimed too but never watched: they are read with `get` when used (K5).

use std::collections::HashMap;
use std::sync::Arc;

use outpost_core::claims::Action;
use tokio::task::AbortHandle;

use super::services::{self, Scope};
use super::{Inner, Key, Known, State, watch};

/// What one list+watch follows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Watch {
    Object(Key),
    Services(Scope),
}

/// The running list+watches.
#[derive(Debug, Default)]
pub(super) struct Watches(HashMap<Watch, AbortHandle>);

impl Watches {
    fn start(&mut self, inner: &Arc<Inner>, watch: Watch) {
        let task = match &watch {
            Watch::Object(key) if key.kind.is_watched() => {
                tokio::spawn(watch::follow(inner.clone(), key.clone()))
            }
            Watch::Object(_) => return,
            Watch::Services(scope) => tokio::spawn(services::follow(inner.clone(), scope.clone())),
        };
        if let Some(old) = self.0.insert(watch, task.abort_handle()) {
            old.abort();
        }
    }

    fn stop(&mut self, watch: &Watch) {
        if let Some(task) = self.0.remove(watch) {
            task.abort();
        }
    }

    /// How many run (tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether `key` is watched (tests).
    #[cfg(test)]
    pub(super) fn is_watching(&self, key: &Key) -> bool {
        self.0.contains_key(&Watch::Object(key.clone()))
    }
}

impl State {
    /// Carries out the objects' starts and stops: a started object is known as what the
    /// checkpoint kept of it, or not yet; a stopped one is forgotten. Whether any stopped.
    pub(super) fn apply_objects(&mut self, inner: &Arc<Inner>, actions: Vec<Action<Key>>) -> bool {
        let mut stopped = false;
        for action in actions {
            match action {
                Action::Start(key) => {
                    self.objects.entry(key.clone()).or_insert(Known::Unknown);
                    self.watches.start(inner, Watch::Object(key));
                }
                Action::Stop(key) => {
                    self.objects.remove(&key);
                    self.watches.stop(&Watch::Object(key));
                    stopped = true;
                }
            }
        }
        stopped
    }

    /// K1: the pod `uid` needs `scopes` (and no others).
    pub(super) fn claim_services(
        &mut self,
        inner: &Arc<Inner>,
        uid: &str,
        scopes: std::collections::BTreeSet<Scope>,
    ) {
        let actions = self.services.claims.claim(uid, scopes);
        self.apply_scopes(inner, actions);
    }

    /// Carries out the Services' starts and stops, as [`State::apply_objects`] does.
    pub(super) fn apply_scopes(&mut self, inner: &Arc<Inner>, actions: Vec<Action<Scope>>) {
        for action in actions {
            match action {
                Action::Start(scope) => {
                    self.services.scopes.entry(scope.clone()).or_default();
                    self.watches.start(inner, Watch::Services(scope));
                }
                Action::Stop(scope) => {
                    self.services.scopes.remove(&scope);
                    self.watches.stop(&Watch::Services(scope));
                }
            }
        }
    }
}
