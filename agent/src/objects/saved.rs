//! The objects' checkpoint (V3): what is known of every kept object, and the tokens, of
//! one API server. Private (mode 0600): it holds Secrets and tokens.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use serde::{Deserialize, Serialize};

use super::services::Scope;
use super::token::{Token, TokenKey};
use super::{Entry, Key, Known, State};
use crate::checkpoint::Checkpoints;
use crate::runtime::spec::projection::Object;

/// The checkpoint's name.
pub(super) const CHECKPOINT: &str = "api-objects";

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Saved {
    /// The API server the objects came from; another server's are not used.
    server: String,
    objects: Vec<SavedObject>,
    tokens: Vec<(TokenKey, Token)>,
    /// K1: the Services of every scope that has been read (absent in older checkpoints).
    #[serde(default)]
    services: Vec<(Scope, Vec<Arc<Service>>)>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedObject {
    key: Key,
    /// `None`: the API server said it does not exist.
    config_map: Option<Arc<ConfigMap>>,
    secret: Option<Arc<Secret>>,
}

/// What `state` knows, to be written.
pub(super) fn snapshot(server: &str, state: &State) -> Saved {
    let objects = state
        .objects
        .iter()
        .filter_map(|(key, entry)| {
            let (config_map, secret) = match &entry.known {
                Known::Unknown => return None,
                Known::Absent => (None, None),
                Known::Present(Object::ConfigMap(c)) => (Some(c.clone()), None),
                Known::Present(Object::Secret(s)) => (None, Some(s.clone())),
                Known::Present(Object::Token(_)) => return None,
            };
            Some(SavedObject { key: key.clone(), config_map, secret })
        })
        .collect();
    let tokens = state.tokens.iter().map(|(k, t)| (k.clone(), t.clone())).collect();
    let services = state
        .services
        .scopes
        .iter()
        .filter(|(_, watched)| watched.read)
        .map(|(scope, watched)| (scope.clone(), watched.services.values().cloned().collect()))
        .collect();
    Saved { server: server.to_owned(), objects, tokens, services }
}

/// The state the checkpoint of `server` kept (nothing claimed, nothing watched yet);
/// empty when there is none, it is another server's, or it cannot be read.
pub(super) async fn restore(checkpoints: &Checkpoints, server: &str) -> State {
    let checkpoints = checkpoints.clone();
    let read = tokio::task::spawn_blocking(move || checkpoints.read::<Saved>(CHECKPOINT)).await;
    let saved = match read {
        Ok(Ok(Some(saved))) => saved,
        Ok(Ok(None)) => return State::default(),
        Ok(Err(e)) => {
            tracing::warn!(error = %crate::error_chain::describe(&e), "ignoring the objects' checkpoint");
            return State::default();
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the objects' checkpoint");
            return State::default();
        }
    };
    if saved.server != server {
        tracing::warn!(
            checkpoint_server = saved.server,
            "the objects' checkpoint is of another API server; not using it"
        );
        return State::default();
    }
    let mut state = State::default();
    for object in saved.objects {
        let known = match (object.config_map, object.secret) {
            (Some(c), _) => Known::Present(Object::ConfigMap(c)),
            (None, Some(s)) => Known::Present(Object::Secret(s)),
            (None, None) => Known::Absent,
        };
        let entry = Entry { known, claimants: BTreeSet::new(), watch: None };
        state.objects.insert(object.key, entry);
    }
    state.tokens = saved.tokens.into_iter().collect();
    for (scope, services) in saved.services {
        state.services.restore(scope, services);
    }
    tracing::info!(
        objects = state.objects.len(),
        tokens = state.tokens.len(),
        service_scopes = state.services.scopes.len(),
        "restored the API pods' objects from the checkpoint"
    );
    state
}
