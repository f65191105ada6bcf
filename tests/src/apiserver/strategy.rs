//! What the real registry's strategies do to an object on create, update and delete:
//! system metadata, status handling, pod spec immutability, validation, graceful
//! deletion. Pure functions on JSON values.
//!
//! Simplified: no defaulting (a pod keeps the fields it was sent with, except that
//! create resets its status to `Pending` with a QoS class and the deprecated
//! `spec.serviceAccount` mirrors `spec.serviceAccountName`, and a new PersistentVolumeClaim's
//! or PersistentVolume's status is reset to `Pending`), validation covers names,
//! pod containers, a RuntimeClass's `handler`, ClusterTrustBundles ([`trust_bundle`])
//! and the data of ConfigMaps and Secrets only (see [`data`]), no `managedFields`, and a
//! status-subresource write takes
//! only `.status` from the request (the real one also takes label and annotation
//! changes).

mod data;
mod trust_bundle;

use serde_json::{Map, Value, json};

use super::error::{Cause, Error, Result};
use super::resource::{
    CLUSTERTRUSTBUNDLES, PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, PODS, RUNTIMECLASSES,
    ResourceType,
};

/// Now, as Kubernetes writes times (RFC 3339, whole seconds, UTC).
pub fn now() -> String {
    seconds_from_now(0)
}

/// `seconds` from now, as [`now`] writes it.
pub fn seconds_from_now(seconds: i64) -> String {
    let second = jiff::Timestamp::now().as_second().saturating_add(seconds);
    jiff::Timestamp::from_second(second).unwrap_or(jiff::Timestamp::now()).to_string()
}

/// A random UUID (version 4), as the real server's `metadata.uid`.
pub fn uid() -> String {
    let hex = |n: usize| (0..n).map(|_| format!("{:x}", fastrand::u8(0..16))).collect::<String>();
    let variant = ['8', '9', 'a', 'b'][fastrand::usize(0..4)];
    format!("{}-{}-4{}-{variant}{}-{}", hex(8), hex(4), hex(3), hex(3), hex(12))
}

/// Five random characters for a generated name (`generateName`, the
/// `kube-api-access-` volume), from the real name generator's alphabet.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5).map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())])).collect()
}

/// The v1 conversion of a pod's deprecated `spec.serviceAccount`: it stands in for an
/// empty `spec.serviceAccountName`, and is written back as its copy.
pub fn mirror_service_account(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let name = ["serviceAccountName", "serviceAccount"]
        .iter()
        .find_map(|field| spec.get(*field).and_then(Value::as_str).filter(|n| !n.is_empty()))
        .map(str::to_string);
    if let Some(name) = name {
        spec.insert("serviceAccountName".into(), json!(name));
        spec.insert("serviceAccount".into(), json!(name));
    }
}

/// Conversion and defaulting every write of an object goes through.
fn convert(resource: &ResourceType, object: &mut Value) -> Result<()> {
    if resource == &PODS {
        mirror_service_account(object);
    }
    data::convert(resource, object)
}

/// The kind and apiVersion check, and filling them in when absent.
pub fn check_type(resource: &ResourceType, object: &mut Value) -> Result<()> {
    let Value::Object(map) = object else {
        return Err(Error::BadRequest("the request body is not a JSON object".into()));
    };
    let api_version = resource.api_version();
    for (field, want) in [("apiVersion", api_version.as_str()), ("kind", resource.kind)] {
        match map.get(field).and_then(Value::as_str) {
            None | Some("") => {
                map.insert(field.to_string(), json!(want));
            }
            Some(got) if got == want => {}
            Some(got) => {
                return Err(Error::BadRequest(format!(
                    "{field} {got:?} in the request body does not match {want:?} of {}",
                    resource.qualified_name()
                )));
            }
        }
    }
    if !map.get("metadata").is_some_and(Value::is_object) {
        map.insert("metadata".into(), Value::Object(Map::new()));
    }
    Ok(())
}

fn metadata(object: &mut Value) -> Result<&mut Map<String, Value>> {
    let not_object = || Error::BadRequest("the request body is not a JSON object".into());
    let map = object.as_object_mut().ok_or_else(not_object)?;
    let meta = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().ok_or_else(not_object)
}

/// Sets `object[field]` to `value`, or removes the field when `value` is `None`.
fn set_field(object: &mut Value, field: &str, value: Option<&Value>) {
    if let Some(map) = object.as_object_mut() {
        match value {
            Some(value) => map.insert(field.to_string(), value.clone()),
            None => map.remove(field),
        };
    }
}

/// A string field of `metadata`.
pub fn meta<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// `PrepareForCreate`, `BeforeCreate` and validation: the object as it will be stored
/// (without `resourceVersion`, which the store stamps).
pub fn prepare_create(
    resource: &ResourceType,
    namespace: Option<&str>,
    mut object: Value,
) -> Result<Value> {
    check_type(resource, &mut object)?;
    convert(resource, &mut object)?;
    let meta = metadata(&mut object)?;
    match (resource.namespaced, namespace, meta.get("namespace").and_then(Value::as_str)) {
        (true, Some(want), Some(got)) if !got.is_empty() && got != want => {
            return Err(Error::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
                    .into(),
            ));
        }
        (true, Some(want), _) => {
            meta.insert("namespace".into(), json!(want));
        }
        (true, None, _) => {
            return Err(Error::BadRequest("a namespace is required to create this object".into()));
        }
        (false, _, _) => {
            meta.remove("namespace");
        }
    }
    if meta.get("resourceVersion").and_then(Value::as_str).is_some_and(|rv| !rv.is_empty()) {
        return Err(Error::Internal(
            "resourceVersion should not be set on objects to be created".into(),
        ));
    }
    let name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
    let generate = meta.get("generateName").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() && !generate.is_empty() {
        meta.insert("name".into(), json!(format!("{generate}{}", random_suffix())));
    }
    meta.insert("uid".into(), json!(uid()));
    meta.insert("creationTimestamp".into(), json!(now()));
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("resourceVersion");
    if resource == &PODS {
        meta.insert("generation".into(), json!(1));
        // SetDefaults_PodSpec: a pod always has a securityContext (clients such as
        // `kubectl debug` read it without a nil check).
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            spec.entry("securityContext").or_insert_with(|| json!({}));
        }
        let qos = qos_class(&object);
        set_field(&mut object, "status", Some(&json!({ "phase": "Pending", "qosClass": qos })));
    }
    // The real strategies clear a new claim's or volume's status; defaulting makes it
    // Pending (a volume's with the time of that phase).
    if resource == &PERSISTENTVOLUMECLAIMS {
        set_field(&mut object, "status", Some(&json!({ "phase": "Pending" })));
    }
    if resource == &PERSISTENTVOLUMES {
        let status = json!({ "phase": "Pending", "lastPhaseTransitionTime": now() });
        set_field(&mut object, "status", Some(&status));
    }
    validate(resource, &object, Vec::new())?;
    Ok(object)
}

/// `PrepareForUpdate` and validation for a write of `new` over `old` (on the main
/// resource, or on `/status` when `status_only`).
pub fn prepare_update(
    resource: &ResourceType,
    old: &Value,
    mut new: Value,
    status_only: bool,
) -> Result<Value> {
    check_type(resource, &mut new)?;
    let name = meta(old, "name").unwrap_or_default();
    let new_name = meta(&new, "name").unwrap_or_default();
    if new_name != name {
        return Err(Error::BadRequest(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    let namespace = meta(old, "namespace").unwrap_or_default();
    if meta(&new, "namespace").is_some_and(|ns| !ns.is_empty() && ns != namespace) {
        return Err(Error::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    if status_only {
        let mut updated = old.clone();
        set_field(&mut updated, "status", new.get("status"));
        return Ok(updated);
    }
    convert(resource, &mut new)?;
    let old_meta = old.get("metadata").cloned().unwrap_or_default();
    let meta = metadata(&mut new)?;
    for field in [
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
    ] {
        match old_meta.get(field) {
            Some(value) => meta.insert(field.into(), value.clone()),
            None => meta.remove(field),
        };
    }
    if resource.status {
        set_field(&mut new, "status", old.get("status"));
    }
    if resource == &PODS && old.get("spec") != new.get("spec") {
        check_pod_spec_update(old, &new)?;
        let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        metadata(&mut new)?.insert("generation".into(), json!(generation + 1));
    }
    let mut causes = Vec::new();
    if resource == &RUNTIMECLASSES && old.get("handler") != new.get("handler") {
        causes.push(Cause::invalid("handler", "Invalid value: field is immutable"));
    }
    let signer = |o: &Value| o.pointer("/spec/signerName").cloned();
    if resource == &CLUSTERTRUSTBUNDLES && signer(old) != signer(&new) {
        causes.push(Cause::invalid("spec.signerName", "Invalid value: field is immutable"));
    }
    data::check_update(resource, old, &new, &mut causes);
    validate(resource, &new, causes)?;
    Ok(new)
}

/// The grace period a delete gets (`CheckGracefulDelete`): only pods are deleted
/// gracefully, and only when bound to a node and not terminated; the default is
/// `spec.terminationGracePeriodSeconds`, or 30. 0 means "remove now".
pub fn deletion_grace(resource: &ResourceType, object: &Value, requested: Option<i64>) -> i64 {
    if resource != &PODS {
        return 0;
    }
    let bound =
        object.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    let phase = object.pointer("/status/phase").and_then(Value::as_str);
    if !bound || matches!(phase, Some("Succeeded" | "Failed")) {
        return 0;
    }
    let default = object.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64);
    requested.or(default).unwrap_or(30).max(0)
}

/// The 422 for the object `name` of `resource`, with each cause.
pub(super) fn invalid(resource: &ResourceType, name: &str, causes: Vec<Cause>) -> Error {
    Error::Invalid {
        kind: resource.kind.to_string(),
        group: resource.group.to_string(),
        name: name.to_string(),
        causes,
    }
}

/// Validation of a written object; `causes` are those found before (by update checks).
fn validate(resource: &ResourceType, object: &Value, mut causes: Vec<Cause>) -> Result<()> {
    let name = meta(object, "name").unwrap_or_default();
    if name.is_empty() {
        causes.push(Cause {
            message: "Required value: name or generateName is required".into(),
            ..Cause::required("metadata.name")
        });
    } else if resource == &CLUSTERTRUSTBUNDLES {
        trust_bundle::validate(object, &mut causes);
    } else if !is_dns_subdomain(name) {
        causes.push(Cause::invalid(
            "metadata.name",
            format!("Invalid value: {name:?}: {NOT_A_DNS_SUBDOMAIN}"),
        ));
    }
    if resource == &PODS {
        let containers = object.pointer("/spec/containers").and_then(Value::as_array);
        match containers {
            None => causes.push(Cause::required("spec.containers")),
            Some(list) if list.is_empty() => causes.push(Cause::required("spec.containers")),
            Some(list) => {
                for (i, container) in list.iter().enumerate() {
                    for field in ["name", "image"] {
                        if container.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
                            causes.push(Cause::required(&format!("spec.containers[{i}].{field}")));
                        }
                    }
                }
            }
        }
    }
    if resource == &RUNTIMECLASSES {
        runtime_class_handler(object, &mut causes);
    }
    data::validate(resource, object, &mut causes);
    if causes.is_empty() {
        return Ok(());
    }
    Err(invalid(resource, name, causes))
}

/// D5: a RuntimeClass's `handler` is required, and a DNS label (RFC 1123).
fn runtime_class_handler(object: &Value, causes: &mut Vec<Cause>) {
    match object.get("handler").and_then(Value::as_str) {
        None | Some("") => causes.push(Cause::required("handler")),
        Some(handler)
            if handler.len() > 63 || !is_dns_subdomain(handler) || handler.contains('.') =>
        {
            causes.push(Cause::invalid(
                "handler",
                format!(
                    "Invalid value: {handler:?}: a lowercase RFC 1123 label must consist of lower \
                     case alphanumeric characters or '-', and must start and end with an \
                     alphanumeric character"
                ),
            ));
        }
        Some(_) => {}
    }
}

/// `IsDNS1123Subdomain`'s message.
const NOT_A_DNS_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
                && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        })
}

/// A pod's spec may change only in container images, `activeDeadlineSeconds`,
/// `tolerations` and `terminationGracePeriodSeconds` (simplified: any toleration
/// change is allowed, not only additions).
fn check_pod_spec_update(old: &Value, new: &Value) -> Result<()> {
    let mutable_cleared = |pod: &Value| {
        let mut spec = pod.get("spec").cloned().unwrap_or_default();
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(containers)) = spec.get_mut(list) {
                for container in containers {
                    if let Some(c) = container.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
        if let Some(spec) = spec.as_object_mut() {
            for field in ["activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"] {
                spec.remove(field);
            }
        }
        spec
    };
    if mutable_cleared(old) == mutable_cleared(new) {
        return Ok(());
    }
    let name = meta(old, "name").unwrap_or_default();
    Err(invalid(
        &PODS,
        name,
        vec![Cause::forbidden(
            "spec",
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,\
             `spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` \
             (only additions to existing tolerations),`spec.terminationGracePeriodSeconds`",
        )],
    ))
}

/// The pod's QoS class from its containers' resources (requests default to limits).
fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|list| pod.get("spec")?.get(*list)?.as_array())
        .flatten()
        .collect();
    let resource = |c: &Value, kind: &str, name: &str| {
        c.get("resources")?.get(kind)?.get(name).map(|q| q.to_string())
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        for name in ["cpu", "memory"] {
            let limit = resource(c, "limits", name);
            let request = resource(c, "requests", name).or_else(|| limit.clone());
            any |= limit.is_some() || request.is_some();
            guaranteed &= limit.is_some() && request == limit;
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}
