//! The `serviceaccounts/{name}/token` subresource: a POSTed `authentication.k8s.io/v1`
//! `TokenRequest` is answered with a token of the service account, as the real
//! server's token REST storage does.
//!
//! The spec is defaulted (audiences to [`ISSUER`], `expirationSeconds` to 3600), the
//! service account and a bound pod must exist (404) and the pod's uid must match the
//! reference's (409). A token bound to a pod and asked for 3607 s (the
//! `kube-api-access-*` volume's lifetime) is extended to a year, with a `warnafter` at
//! the asked-for end, as the real server's `--service-account-extend-token-expiration`
//! (on by default) does; `status.expirationTimestamp` stays the asked-for one.
//!
//! Deviation: the minimum `expirationSeconds` is the server's
//! [`Config::min_token_expiration`](super::super::Config::min_token_expiration), 600 s
//! as on the real server unless a test asks for shorter tokens. Simplified: only pods
//! may be bound (the real server also binds to secrets and nodes); no maximum besides
//! the real 2^32 s.

use serde_json::{Value, json};

use super::super::error::{Cause, Error, GroupResource, Result};
use super::super::resource::{NODES, PODS, SERVICEACCOUNTS};
use super::super::store::Store;
use super::super::strategy::{self, meta};
use super::{ISSUER, KubernetesClaims, ObjectRef, Signer, TokenClaims};

/// `expirationSeconds` when the request has none.
const DEFAULT_EXPIRATION: i64 = 3600;
/// The lifetime the `kube-api-access-*` volume asks for, which is extended.
pub const WARN_ONLY_EXPIRATION: i64 = 3607;
/// The extended lifetime: a year.
const EXTENDED_EXPIRATION: i64 = 365 * 24 * 3600;
/// The largest `expirationSeconds`.
const MAX_EXPIRATION: i64 = 1 << 32;

/// Answers a TokenRequest for the service account `namespace/name`: the request with
/// its spec defaulted and its status (`token`, `expirationTimestamp`).
pub fn create(
    store: &Store,
    signer: &Signer,
    min_expiration: i64,
    namespace: &str,
    name: &str,
    mut request: Value,
) -> Result<Value> {
    check_type(&request)?;
    for (field, want) in [("name", name), ("namespace", namespace)] {
        if let Some(got) = meta(&request, field).filter(|got| !got.is_empty() && *got != want) {
            let cause = Cause::invalid(
                &format!("metadata.{field}"),
                format!(
                    "Invalid value: {got:?}: must match the service account {field} if specified"
                ),
            );
            return Err(invalid(name, cause));
        }
    }
    let account = store.get(&SERVICEACCOUNTS, Some(namespace), name)?;
    let spec = match request.get("spec") {
        None | Some(Value::Null) => json!({}),
        Some(spec) if spec.is_object() => spec.clone(),
        Some(_) => {
            return Err(Error::BadRequest("the TokenRequest's spec is not an object".into()));
        }
    };
    let audiences: Vec<String> = match spec.get("audiences").and_then(Value::as_array) {
        Some(list) if !list.is_empty() => {
            list.iter().map(|a| a.as_str().unwrap_or_default().to_string()).collect()
        }
        _ => vec![ISSUER.to_string()],
    };
    let expiration = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION,
        Some(seconds) => seconds
            .as_i64()
            .ok_or_else(|| Error::BadRequest("spec.expirationSeconds must be an integer".into()))?,
    };
    if expiration < min_expiration {
        let cause = Cause::invalid(
            "spec.expirationSeconds",
            format!(
                "Invalid value: {expiration}: may not specify a duration less than {}",
                duration(min_expiration)
            ),
        );
        return Err(invalid(name, cause));
    }
    if expiration > MAX_EXPIRATION {
        let cause = Cause::invalid(
            "spec.expirationSeconds",
            format!(
                "Invalid value: {expiration}: may not specify a duration larger than 2^32 seconds"
            ),
        );
        return Err(invalid(name, cause));
    }
    let bound = spec.get("boundObjectRef").filter(|r| !r.is_null());
    let pod = bound.map(|reference| bound_pod(store, namespace, name, reference)).transpose()?;

    let now = jiff::Timestamp::now().as_second();
    let extend = pod.is_some()
        && expiration == WARN_ONLY_EXPIRATION
        && audiences.iter().all(|a| a == ISSUER);
    let lifetime = if extend { EXTENDED_EXPIRATION } else { expiration };
    let node = pod.as_ref().and_then(|pod| {
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str)?;
        let uid = store.get(&NODES, None, node).ok().and_then(|n| uid_of(&n));
        Some(ObjectRef { name: node.to_string(), uid: uid.unwrap_or_default() })
    });
    let claims = TokenClaims {
        iss: ISSUER.to_string(),
        sub: format!("system:serviceaccount:{namespace}:{name}"),
        aud: audiences.clone(),
        exp: now + lifetime,
        iat: now,
        nbf: now,
        jti: strategy::uid(),
        kubernetes: KubernetesClaims {
            namespace: namespace.to_string(),
            serviceaccount: ObjectRef {
                name: name.to_string(),
                uid: uid_of(&account).unwrap_or_default(),
            },
            pod: pod.as_ref().map(|pod| ObjectRef {
                name: meta(pod, "name").unwrap_or_default().to_string(),
                uid: uid_of(pod).unwrap_or_default(),
            }),
            node,
            warnafter: extend.then_some(now + expiration),
        },
    };
    let token = signer.sign(&claims).map_err(|e| Error::Internal(e.to_string()))?;
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"] = json!({
        "name": name,
        "namespace": namespace,
        "creationTimestamp": strategy::now(),
    });
    let mut spec = spec;
    spec["audiences"] = json!(audiences);
    spec["expirationSeconds"] = json!(expiration);
    request["spec"] = spec;
    request["status"] = json!({
        "token": token,
        "expirationTimestamp": strategy::seconds_from_now(expiration),
    });
    Ok(request)
}

fn check_type(request: &Value) -> Result<()> {
    if !request.is_object() {
        return Err(Error::BadRequest("the TokenRequest is not a JSON object".into()));
    }
    let field = |name: &str| request.get(name).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if (api_version.is_empty() || api_version == "authentication.k8s.io/v1")
        && (kind.is_empty() || kind == "TokenRequest")
    {
        return Ok(());
    }
    Err(Error::BadRequest(format!(
        "the body of a token request is {api_version}/{kind}, not authentication.k8s.io/v1 TokenRequest"
    )))
}

/// The pod a token is bound to: it must exist, run as the service account and have
/// the reference's uid.
fn bound_pod(store: &Store, namespace: &str, account: &str, reference: &Value) -> Result<Value> {
    let field = |name: &str| reference.get(name).and_then(Value::as_str).unwrap_or_default();
    let (kind, api_version, name) = (field("kind"), field("apiVersion"), field("name"));
    if kind != "Pod" || !matches!(api_version, "" | "v1") {
        let group = api_version.rsplit_once('/').map(|(group, _)| group).unwrap_or_default();
        let version = api_version.rsplit('/').next().unwrap_or_default();
        return Err(Error::BadRequest(format!(
            "cannot bind token to object of type {group}/{version}, Kind={kind}"
        )));
    }
    let pod = store.get(&PODS, Some(namespace), name)?;
    let runs_as = pod.pointer("/spec/serviceAccountName").and_then(Value::as_str);
    if runs_as != Some(account) {
        return Err(Error::BadRequest(format!(
            "cannot bind token for serviceaccount {account:?} to pod running with different \
             serviceaccount name."
        )));
    }
    let want = field("uid");
    let have = uid_of(&pod).unwrap_or_default();
    if !want.is_empty() && want != have {
        return Err(Error::Conflict {
            resource: GroupResource { group: "", resource: "Pod" },
            name: name.to_string(),
            problem: format!(
                "the UID in the bound object reference ({want}) does not match the UID in \
                 record. The object might have been deleted and then recreated"
            ),
        });
    }
    Ok(pod)
}

fn uid_of(object: &Value) -> Option<String> {
    meta(object, "uid").map(str::to_string)
}

fn invalid(name: &str, cause: Cause) -> Error {
    Error::Invalid {
        kind: "TokenRequest".into(),
        group: "authentication.k8s.io".into(),
        name: name.to_string(),
        causes: vec![cause],
    }
}

/// A duration as the validation message words it: `10 minutes`, `30 seconds`.
fn duration(seconds: i64) -> String {
    if seconds >= 120 && seconds % 60 == 0 {
        format!("{} minutes", seconds / 60)
    } else {
        format!("{seconds} seconds")
    }
}
