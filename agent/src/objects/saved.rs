//! The objects' checkpoint (V3): what is known of every kept object, and the tokens, of
//! one API server. Private (mode 0600): it holds Secrets and tokens.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret, Service,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use serde::{Deserialize, Serialize};

use super::services::Scope;
use super::token::{Token, TokenKey};
use super::{Key, Known, State};
use crate::checkpoint::Checkpoints;
use crate::runtime::spec::projection::{Object, TrustBundles};

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
    /// K3 (absent from checkpoints written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    persistent_volume_claim: Option<Arc<PersistentVolumeClaim>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    persistent_volume: Option<Arc<PersistentVolume>>,
    /// D5 (absent from checkpoints written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    runtime_class: Option<Arc<RuntimeClass>>,
    /// V1: every ClusterTrustBundle, by name (absent from checkpoints written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster_trust_bundles: Option<Arc<TrustBundles>>,
}

/// What `state` knows, to be written.
pub(super) fn snapshot(server: &str, state: &State) -> Saved {
    let objects = state
        .objects
        .iter()
        .filter_map(|(key, entry)| {
            let mut saved = SavedObject {
                key: key.clone(),
                config_map: None,
                secret: None,
                persistent_volume_claim: None,
                persistent_volume: None,
                runtime_class: None,
                cluster_trust_bundles: None,
            };
            match entry {
                Known::Unknown | Known::Present(Object::Token(_)) => return None,
                Known::Absent => {}
                Known::Present(Object::ConfigMap(c)) => saved.config_map = Some(c.clone()),
                Known::Present(Object::Secret(s)) => saved.secret = Some(s.clone()),
                Known::Present(Object::PersistentVolumeClaim(c)) => {
                    saved.persistent_volume_claim = Some(c.clone());
                }
                Known::Present(Object::PersistentVolume(v)) => {
                    saved.persistent_volume = Some(v.clone());
                }
                Known::Present(Object::RuntimeClass(c)) => saved.runtime_class = Some(c.clone()),
                Known::Present(Object::ClusterTrustBundles(b)) => {
                    saved.cluster_trust_bundles = Some(b.clone());
                }
            }
            Some(saved)
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
    let read =
        tokio::task::spawn_blocking(move || checkpoints.read_private::<Saved>(CHECKPOINT)).await;
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
        let known = if let Some(c) = object.config_map {
            Known::Present(Object::ConfigMap(c))
        } else if let Some(s) = object.secret {
            Known::Present(Object::Secret(s))
        } else if let Some(c) = object.persistent_volume_claim {
            Known::Present(Object::PersistentVolumeClaim(c))
        } else if let Some(v) = object.persistent_volume {
            Known::Present(Object::PersistentVolume(v))
        } else if let Some(c) = object.runtime_class {
            Known::Present(Object::RuntimeClass(c))
        } else if let Some(b) = object.cluster_trust_bundles {
            Known::Present(Object::ClusterTrustBundles(b))
        } else {
            Known::Absent
        };
        state.objects.insert(object.key, known);
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
