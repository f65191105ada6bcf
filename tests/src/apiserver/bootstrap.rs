//! Joining with a bootstrap token (J1), the server's side: the `cluster-info` ConfigMap
//! in `kube-public` that `kubeadm init` publishes (its `kubeconfig`: the server's URL and
//! CA), and the bootstrap signer controller of kube-controller-manager, which signs that
//! kubeconfig with every bootstrap token that may sign (`jws-kubeconfig-<id>`, a
//! detached HS256 JWS, `outpost_core::bootstrap_token::jws`).
//!
//! Tokens are Secrets `kube-system/bootstrap-token-<id>` of type
//! `bootstrap.kubernetes.io/token`; [`TestApiServer::add_bootstrap_token`] makes one as
//! `kubeadm token create` does. The signer follows the store's writes, as the controller
//! follows its informers: a token created, changed or deleted (through the API or the
//! test's handle) has its signature added, changed or removed, and so has a
//! `cluster-info` written by someone else. A token signs when its Secret is well formed
//! (name, type, `token-id`, `token-secret`), has `usage-bootstrap-signing: "true"` and
//! has not expired.
//!
//! `cluster-info` is readable without credentials, as kubeadm's RBAC Role for
//! `system:anonymous` allows ([`anonymous_read`]), also on a server that requires its
//! static token. Simplified: `cluster-info` is published when the first token is added
//! (not at start); an expired token's signature goes at the next write the signer sees
//! (no token cleaner, no periodic resync).

use std::sync::{Arc, Weak};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hyper::Method;
use outpost_core::bootstrap_token::{self as bt, Token};
use serde_json::{Map, Value, json};

use super::TestApiServer;
use super::error::{Error, Result};
use super::resource::{CONFIGMAPS, SECRETS};
use super::store::Store;

/// Where tokens live.
const TOKEN_NAMESPACE: &str = "kube-system";
/// The group kubeadm's tokens authenticate nodes into, besides `system:bootstrappers`.
pub const KUBEADM_NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

/// Whether a request may read `cluster-info` without credentials: a GET of the object
/// itself, with no `Authorization` header.
pub fn anonymous_read(method: &Method, path: &str, headers: &hyper::HeaderMap) -> bool {
    let object = format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        bt::CLUSTER_INFO_NAMESPACE,
        bt::CLUSTER_INFO
    );
    method == Method::GET && path == object && !headers.contains_key(hyper::header::AUTHORIZATION)
}

/// The Secret `kubeadm token create` makes for `id.secret`: both usages, kubeadm's
/// node group, no expiry (tests set `data.expiration` themselves).
pub fn token_secret(id: &str, secret: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": format!("{}{id}", bt::SECRET_PREFIX), "namespace": TOKEN_NAMESPACE },
        "type": bt::SECRET_TYPE,
        "stringData": {
            "description": "made by the test API server",
            "token-id": id,
            "token-secret": secret,
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": KUBEADM_NODE_TOKEN_GROUP,
        },
    })
}

/// `cluster-info` as kubeadm publishes it: a kubeconfig with one cluster (the server
/// and its CA, when it has one) and nothing else.
fn cluster_info(server: &str, ca_pem: Option<&str>) -> Value {
    let mut cluster = json!({ "server": server });
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] = json!(BASE64.encode(ca));
    }
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "", "cluster": cluster }],
        "contexts": [],
        "current-context": "",
        "preferences": {},
        "users": [],
    });
    let text = serde_saphyr::to_string(&kubeconfig).unwrap_or_default();
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": bt::CLUSTER_INFO, "namespace": bt::CLUSTER_INFO_NAMESPACE },
        "data": { bt::KUBECONFIG_KEY: text },
    })
}

/// A Secret's `data` value, decoded.
fn data(secret: &Value, key: &str) -> Option<String> {
    let value = secret.pointer(&format!("/data/{key}"))?.as_str()?;
    String::from_utf8(BASE64.decode(value).ok()?).ok()
}

/// The token a Secret holds, if it may sign now (the signer's checks).
fn signing_token(secret: &Value, now: jiff::Timestamp) -> Option<Token> {
    if secret.get("type").and_then(Value::as_str) != Some(bt::SECRET_TYPE) {
        return None;
    }
    let id = data(secret, "token-id")?;
    let name = secret.pointer("/metadata/name").and_then(Value::as_str)?;
    if name != format!("{}{id}", bt::SECRET_PREFIX)
        || data(secret, "usage-bootstrap-signing").as_deref() != Some("true")
    {
        return None;
    }
    if let Some(expiration) = data(secret, "expiration") {
        let expires: jiff::Timestamp = expiration.parse().ok()?;
        if expires <= now {
            return None;
        }
    }
    Token::new(&id, &data(secret, "token-secret")?).ok()
}

/// Brings `cluster-info`'s signatures in line with the tokens: one per signing token,
/// none other. Nothing when there is no `cluster-info` or nothing changes.
pub fn sign(store: &Store) {
    let Ok(info) = store.get(&CONFIGMAPS, Some(bt::CLUSTER_INFO_NAMESPACE), bt::CLUSTER_INFO)
    else {
        return;
    };
    let Some(kubeconfig) =
        info.pointer(&format!("/data/{}", bt::KUBECONFIG_KEY)).and_then(Value::as_str)
    else {
        return;
    };
    let now = jiff::Timestamp::now();
    let Ok((secrets, _)) = store.objects_at(&SECRETS, Some(TOKEN_NAMESPACE), None) else {
        return;
    };
    let mut data: Map<String, Value> = info
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(key, _)| !key.starts_with(bt::JWS_KEY_PREFIX))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    for token in secrets.iter().filter_map(|(_, secret)| signing_token(secret, now)) {
        data.insert(bt::jws_key(token.id()), json!(bt::jws::sign(kubeconfig, &token)));
    }
    if info.get("data").and_then(Value::as_object) == Some(&data) {
        return;
    }
    let resource_version = info.pointer("/metadata/resourceVersion").cloned();
    // A concurrent write (a conflict) is followed by another round.
    let _ = store.update(
        &CONFIGMAPS,
        Some(bt::CLUSTER_INFO_NAMESPACE),
        bt::CLUSTER_INFO,
        false,
        |current| {
            let mut new = current.clone();
            new["data"] = Value::Object(data);
            new["metadata"]["resourceVersion"] = resource_version.unwrap_or(Value::Null);
            Ok(new)
        },
    );
}

/// Whether a write may change the signatures: to a Secret of `kube-system` or to
/// `cluster-info`.
fn concerns_signer(key: &super::store::Key) -> bool {
    (key.within(&SECRETS, Some(TOKEN_NAMESPACE)))
        || (key.within(&CONFIGMAPS, Some(bt::CLUSTER_INFO_NAMESPACE))
            && key.name == bt::CLUSTER_INFO)
}

/// The bootstrap signer: a task that re-signs after each write that concerns it, until
/// the store is gone.
pub fn spawn_signer(store: &Arc<Store>) {
    let weak: Weak<Store> = Arc::downgrade(store);
    let mut changed = store.subscribe();
    let mut seen = store.resource_version();
    tokio::spawn(async move {
        while changed.changed().await.is_ok() {
            let Some(store) = weak.upgrade() else { return };
            let relevant = match store.events_after(seen) {
                Ok((events, rv)) => {
                    seen = rv;
                    events.iter().any(|event| concerns_signer(&event.key))
                }
                // Compacted past what was seen: look at everything.
                Err(_) => {
                    seen = store.resource_version();
                    true
                }
            };
            if relevant {
                sign(&store);
            }
        }
    });
}

impl TestApiServer {
    /// Adds the bootstrap token `id.secret`, as `kubeadm token create` does (the Secret
    /// of [`token_secret`]), publishing `cluster-info` first if it is not there; returns
    /// once `cluster-info` carries the token's signature.
    pub fn add_bootstrap_token(&self, id: &str, secret: &str) -> Result<Value> {
        self.publish_cluster_info()?;
        let created = self.create(token_secret(id, secret))?;
        sign(&self.shared.store);
        Ok(created)
    }

    /// Publishes `cluster-info` (this server's URL and CA) unless it exists.
    pub fn publish_cluster_info(&self) -> Result<()> {
        match self.create(cluster_info(&self.url(), self.ca_pem())) {
            Ok(_) | Err(Error::AlreadyExists { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// Who an anonymous reader of `cluster-info` is.
pub fn anonymous() -> super::authn::User {
    super::authn::User(json!({
        "username": "system:anonymous",
        "groups": ["system:unauthenticated"],
    }))
}
