//! The ServiceAccount admission plugin, on pod create, as the real one behaves.
//!
//! A mirror pod (annotation `kubernetes.io/config.mirror`) is not defaulted and may not
//! refer to a service account, secrets or service account tokens (403). Any other pod
//! gets `spec.serviceAccountName: default` when it names none; the service account
//! must exist (403); unless `automountServiceAccountToken` is false (the pod's, else
//! the service account's), every container and init container that mounts nothing at
//! [`TOKEN_MOUNT_PATH`] gets the `kube-api-access-<suffix>` projected volume there;
//! and a pod without `imagePullSecrets` takes the service account's.
//!
//! Deviation: a mirror pod may not refer to configmaps either, whoever creates it. The
//! real server refuses that in the NodeRestriction plugin, for requests of a node (module
//! `node_restriction` does too); here the ServiceAccount plugin also refuses it for other
//! users.

use serde_json::{Value, json};

use super::error::{Error, Result};
use super::resource::{PODS, SERVICEACCOUNTS};
use super::store::Store;
use super::strategy::{self, meta};
use super::token::WARN_ONLY_EXPIRATION;

/// Where the plugin mounts the service account's token, CA and namespace.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Admits the creation of `pod` in `namespace`, changing it as the plugin does.
pub fn admit_pod(store: &Store, namespace: &str, pod: &mut Value) -> Result<()> {
    strategy::mirror_service_account(pod);
    let pod_name = meta(pod, "name").unwrap_or_default().to_string();
    let forbidden = |problem: String| Error::Forbidden {
        resource: PODS.group_resource(),
        name: pod_name.clone(),
        problem,
    };
    let mirror = pod.pointer("/metadata/annotations").and_then(|a| a.get(MIRROR_ANNOTATION));
    if mirror.is_some() {
        return check_mirror_pod(pod).map_err(|problem| forbidden(problem.to_string()));
    }
    let spec = &pod["spec"];
    let account_name = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => "default".to_string(),
    };
    let account = store.get(&SERVICEACCOUNTS, Some(namespace), &account_name).map_err(|_| {
        forbidden(format!(
            "error looking up service account {namespace}/{account_name}: serviceaccount \
             {account_name:?} not found"
        ))
    })?;
    let automount = [spec, &account]
        .iter()
        .find_map(|o| o.get("automountServiceAccountToken").and_then(Value::as_bool))
        .unwrap_or(true);
    let pull_secrets = account.get("imagePullSecrets").and_then(Value::as_array);
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return Ok(()) };
    spec.insert("serviceAccountName".into(), json!(account_name));
    spec.insert("serviceAccount".into(), json!(account_name));
    if automount {
        mount_token(spec);
    }
    let has_pull_secrets =
        spec.get("imagePullSecrets").and_then(Value::as_array).is_some_and(|s| !s.is_empty());
    if let Some(secrets) = pull_secrets.filter(|_| !has_pull_secrets) {
        let names: Vec<Value> =
            secrets.iter().map(|s| json!({ "name": s.get("name").cloned() })).collect();
        spec.insert("imagePullSecrets".into(), Value::Array(names));
    }
    Ok(())
}

/// What a mirror pod may not refer to, in the plugin's words.
fn check_mirror_pod(pod: &Value) -> Result<(), &'static str> {
    let spec = &pod["spec"];
    if spec.get("serviceAccountName").and_then(Value::as_str).is_some_and(|n| !n.is_empty()) {
        return Err("a mirror pod may not reference service accounts");
    }
    if refers_to(spec, "secret") {
        return Err("a mirror pod may not reference secrets");
    }
    if projections(spec).any(|source| source.get("serviceAccountToken").is_some()) {
        return Err("a mirror pod may not use ServiceAccountToken volume projections");
    }
    if refers_to(spec, "configMap") {
        return Err("a mirror pod may not reference configmaps");
    }
    Ok(())
}

/// The sources of the pod's projected volumes.
fn projections(spec: &Value) -> impl Iterator<Item = &Value> {
    volumes(spec)
        .filter_map(|v| v.pointer("/projected/sources").and_then(Value::as_array))
        .flatten()
}

fn volumes(spec: &Value) -> impl Iterator<Item = &Value> {
    spec.get("volumes").and_then(Value::as_array).into_iter().flatten()
}

/// Whether the pod spec refers to an object of `kind` (`secret` or `configMap`):
/// in a volume or projection, in a container's `env` or `envFrom`, or (secrets) in
/// `imagePullSecrets` or a volume source's `secretRef`.
fn refers_to(spec: &Value, kind: &str) -> bool {
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|list| spec.get(*list).and_then(Value::as_array))
        .flatten();
    let key_ref = format!("{kind}KeyRef");
    let env_ref = format!("{kind}Ref");
    let in_container = |c: &Value| {
        let env = c.get("env").and_then(Value::as_array).into_iter().flatten();
        let env_from = c.get("envFrom").and_then(Value::as_array).into_iter().flatten();
        env.into_iter().any(|e| e.get("valueFrom").and_then(|v| v.get(&key_ref)).is_some())
            || env_from.into_iter().any(|e| e.get(&env_ref).is_some())
    };
    let in_volume = |v: &Value| {
        v.get(kind).is_some()
            || (kind == "secret"
                && v.as_object().is_some_and(|sources| {
                    sources.values().any(|s| {
                        s.get("secretRef").is_some() || s.get("nodePublishSecretRef").is_some()
                    })
                }))
    };
    let pull_secrets =
        spec.get("imagePullSecrets").and_then(Value::as_array).is_some_and(|s| !s.is_empty());
    (kind == "secret" && pull_secrets)
        || containers.into_iter().any(in_container)
        || volumes(spec).any(in_volume)
        || projections(spec).any(|source| source.get(kind).is_some())
}

/// Mounts the `kube-api-access-*` volume into every container and init container
/// that has nothing at [`TOKEN_MOUNT_PATH`], and adds the volume when one needs it.
fn mount_token(spec: &mut serde_json::Map<String, Value>) {
    let existing = spec.get("volumes").and_then(Value::as_array).and_then(|volumes| {
        volumes.iter().find_map(|v| {
            v.get("name").and_then(Value::as_str).filter(|n| n.starts_with("kube-api-access-"))
        })
    });
    let has_volume = existing.is_some();
    let name = existing
        .map_or_else(|| format!("kube-api-access-{}", strategy::random_suffix()), str::to_string);
    let mount = json!({ "name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH });
    let mut needed = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else { continue };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
            let taken = mounts.as_array().is_some_and(|mounts| {
                mounts
                    .iter()
                    .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
            });
            if taken {
                continue;
            }
            if !mounts.is_array() {
                *mounts = json!([]);
            }
            if let Some(mounts) = mounts.as_array_mut() {
                mounts.push(mount.clone());
                needed = true;
            }
        }
    }
    if has_volume || !needed {
        return;
    }
    let volume = json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                { "serviceAccountToken": { "expirationSeconds": WARN_ONLY_EXPIRATION, "path": "token" } },
                { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
                { "downwardAPI": { "items": [{
                    "path": "namespace",
                    "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" },
                }] } },
            ],
        },
    });
    let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
    if !volumes.is_array() {
        *volumes = json!([]);
    }
    if let Some(volumes) = volumes.as_array_mut() {
        volumes.push(volume);
    }
}
