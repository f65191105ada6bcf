//! `certificates.k8s.io/v1` `certificatesigningrequests`, with the control plane's part
//! in them: kube-controller-manager's approver of kubelet client certificates and the
//! cluster signer (module `signer`).
//!
//! As the real registry: a create takes `spec.username`, `uid`, `groups` and `extra`
//! from who sent it (whatever the body says) and starts with an empty status; the
//! `approval` subresource changes only `status.conditions` (`Approved`, `Denied`), the
//! `status` subresource the rest of the status, never those two conditions.
//!
//! The approver (`csrapproving`) approves a request for
//! `kubernetes.io/kube-apiserver-client-kubelet` whose subject is `CN=system:node:<name>,
//! O=system:nodes` with no SANs and the usages digital signature and client auth (key
//! encipherment allowed), sent by a bootstrap token (`system:bootstrap:*`, a new node)
//! or by that node itself (a renewal), when the sender passes the approver's
//! SubjectAccessReview, answered from the server's rules (module `reviews`): `create` on
//! `certificatesigningrequests/selfnodeclient` for a node renewing its own certificate,
//! else on `certificatesigningrequests/nodeclient`. The rules hold kubeadm's two
//! bindings, so a kubeadm bootstrap token's request and a node's renewal are approved; a
//! token outside kubeadm's group, or a node asking for another node's name, is left
//! pending, as the real approver leaves it (it never denies). Serving requests
//! (`kubernetes.io/kubelet-serving`) are left to the test to approve, as clusters do.
//!
//! The signer signs each approved request of the two kubelet signers at once, after the
//! approval, in a write of its own; an unreadable request gets a `Failed` condition.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::authn::User;
use super::error::{Error, Result};
use super::resource::CERTIFICATESIGNINGREQUESTS as CSRS;
use super::reviews::{Rules, strings};
use super::signer::CertificateSigner;
use super::store::Store;
use super::strategy::now;

/// The signer of kubelet client certificates.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The signer of kubelet serving certificates.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// A create: the sender's identity in `spec`, an empty status; then the approver and
/// the signer have their turn. Returns the object as created.
pub fn create(
    store: &Store,
    signer: &CertificateSigner,
    rules: &Rules,
    user: &User,
    mut object: Value,
    approve_serving: bool,
) -> Result<Value> {
    validate(&object)?;
    let spec = object
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| invalid("spec", "Required value"))?;
    for field in ["username", "uid", "groups", "extra"] {
        match user.0.get(field) {
            Some(value) => spec.insert(field.into(), value.clone()),
            None => spec.remove(field),
        };
    }
    object["status"] = json!({});
    let created = store.create(&CSRS, None, object)?;
    let name = created.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let serving =
        created.pointer("/spec/signerName").and_then(Value::as_str) == Some(SERVING_SIGNER);
    if let Some(reason) = auto_approvable(&created, rules) {
        approve(store, name, "AutoApproved", reason)?;
        sign_if_approved(store, signer, name)?;
    } else if serving && approve_serving {
        approve(store, name, "ApprovedByTest", "The test approves serving requests.")?;
        sign_if_approved(store, signer, name)?;
    }
    Ok(created)
}

/// Sets the `Approved` condition (as `kubectl certificate approve` and the approver do).
pub fn approve(store: &Store, name: &str, reason: &str, message: &str) -> Result<Value> {
    store.update(&CSRS, None, name, true, |old| {
        let mut new = old.clone();
        let conditions = new["status"]["conditions"].as_array().cloned().unwrap_or_default();
        if conditions.iter().any(|c| c["type"] == "Approved") {
            return Ok(new);
        }
        let mut conditions = conditions;
        conditions.push(json!({
            "type": "Approved",
            "status": "True",
            "reason": reason,
            "message": message,
            "lastUpdateTime": now(),
            "lastTransitionTime": now(),
        }));
        new["status"]["conditions"] = Value::Array(conditions);
        Ok(new)
    })
}

/// The body of an `approval` write: only its conditions count.
pub fn approval_update(old: &Value, new: &Value) -> Value {
    let mut updated = old.clone();
    updated["status"]["conditions"] =
        new.pointer("/status/conditions").cloned().unwrap_or(json!([]));
    updated
}

/// The body of a `status` write: everything but the `Approved` and `Denied` conditions,
/// which stay as they were.
pub fn status_update(old: &Value, new: &Value) -> Value {
    let decision = |c: &&Value| matches!(c["type"].as_str(), Some("Approved" | "Denied"));
    let mut updated = new.clone();
    let kept = old.pointer("/status/conditions").and_then(Value::as_array).into_iter().flatten();
    let sent = new.pointer("/status/conditions").and_then(Value::as_array).into_iter().flatten();
    let conditions: Vec<Value> =
        kept.filter(decision).chain(sent.filter(|c| !decision(c))).cloned().collect();
    if updated.get("status").is_none_or(|s| !s.is_object()) {
        updated["status"] = json!({});
    }
    updated["status"]["conditions"] = Value::Array(conditions);
    updated
}

/// The signer's turn: an approved, unsigned request of a kubelet signer gets its
/// certificate (or a `Failed` condition).
pub fn sign_if_approved(store: &Store, signer: &CertificateSigner, name: &str) -> Result<()> {
    let object = store.get(&CSRS, None, name)?;
    let conditions = object.pointer("/status/conditions").and_then(Value::as_array);
    let has = |kind: &str| conditions.into_iter().flatten().any(|c| c["type"] == kind);
    let signed = object.pointer("/status/certificate").is_some_and(|c| !c.is_null());
    let signer_name = object.pointer("/spec/signerName").and_then(Value::as_str);
    if !has("Approved") || has("Denied") || has("Failed") || signed {
        return Ok(());
    }
    if !matches!(signer_name, Some(CLIENT_SIGNER | SERVING_SIGNER)) {
        return Ok(());
    }
    let request = object
        .pointer("/spec/request")
        .and_then(Value::as_str)
        .and_then(|r| BASE64.decode(r).ok())
        .and_then(|r| String::from_utf8(r).ok())
        .unwrap_or_default();
    let usages: Vec<String> = object
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_str().map(str::to_owned))
        .collect();
    let expiration = object.pointer("/spec/expirationSeconds").and_then(Value::as_i64);
    let outcome = signer.sign(&request, &usages, expiration);
    store.update(&CSRS, None, name, true, |old| {
        let mut new = old.clone();
        match &outcome {
            Ok(pem) => new["status"]["certificate"] = json!(BASE64.encode(pem)),
            Err(problem) => {
                let mut conditions =
                    new["status"]["conditions"].as_array().cloned().unwrap_or_default();
                conditions.push(json!({
                    "type": "Failed",
                    "status": "True",
                    "reason": "SignerValidationFailure",
                    "message": problem,
                    "lastUpdateTime": now(),
                    "lastTransitionTime": now(),
                }));
                new["status"]["conditions"] = Value::Array(conditions);
            }
        }
        Ok(new)
    })?;
    Ok(())
}

/// Why the approver approves `object`, or `None` when it leaves it alone: a node client
/// request as kubelet makes it, whose sender passes the SubjectAccessReview of the first
/// of kube-controller-manager's recognizers that fits (a renewal of the sender's own
/// name, then any node's).
fn auto_approvable(object: &Value, rules: &Rules) -> Option<&'static str> {
    if object.pointer("/spec/signerName").and_then(Value::as_str) != Some(CLIENT_SIGNER) {
        return None;
    }
    let subject = request_subject(object)?;
    let node = subject.common_name.strip_prefix("system:node:")?;
    if node.is_empty() || subject.organizations != ["system:nodes"] || subject.has_sans {
        return None;
    }
    let usages: Vec<&str> = object
        .pointer("/spec/usages")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let allowed = ["digital signature", "key encipherment", "client auth"];
    if !usages.contains(&"client auth") || !usages.iter().all(|u| allowed.contains(u)) {
        return None;
    }
    let username = object.pointer("/spec/username").and_then(Value::as_str).unwrap_or_default();
    let groups = strings(object.pointer("/spec/groups"));
    let may = |permission: &str| {
        rules.allows(username, &groups, "create", "certificatesigningrequests", permission)
    };
    if username == subject.common_name && may("selfnodeclient") {
        Some("Auto approving self kubelet client certificate after SubjectAccessReview.")
    } else if may("nodeclient") {
        Some("Auto approving kubelet client certificate after SubjectAccessReview.")
    } else {
        None
    }
}

/// What a request asks for.
struct Subject {
    common_name: String,
    organizations: Vec<String>,
    has_sans: bool,
}

fn request_subject(object: &Value) -> Option<Subject> {
    let pem = BASE64.decode(object.pointer("/spec/request")?.as_str()?).ok()?;
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let (_, request) =
        <x509_parser::certification_request::X509CertificationRequest as x509_parser::prelude::FromDer<_>>::from_der(&block.contents)
            .ok()?;
    let info = &request.certification_request_info;
    let common_name = info.subject.iter_common_name().next()?.as_str().ok()?.to_owned();
    let organizations = info
        .subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    let has_sans = request.requested_extensions().into_iter().flatten().any(|e| {
        matches!(e, x509_parser::extensions::ParsedExtension::SubjectAlternativeName(san) if !san.general_names.is_empty())
    });
    Some(Subject { common_name, organizations, has_sans })
}

/// The create validation of the real registry, as far as clients get it wrong: a
/// signer, usages, and a PEM `CERTIFICATE REQUEST` in `spec.request`.
fn validate(object: &Value) -> Result<()> {
    let spec = object.get("spec").ok_or_else(|| invalid("spec", "Required value"))?;
    if spec.get("signerName").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(invalid("spec.signerName", "Required value"));
    }
    if spec.get("usages").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        return Err(invalid("spec.usages", "Required value"));
    }
    let request = spec
        .get("request")
        .and_then(Value::as_str)
        .and_then(|r| BASE64.decode(r).ok())
        .ok_or_else(|| invalid("spec.request", "Required value"))?;
    let parsed = x509_parser::pem::parse_x509_pem(&request);
    match parsed {
        Ok((_, block)) if block.label == "CERTIFICATE REQUEST" => Ok(()),
        _ => Err(invalid(
            "spec.request",
            "Invalid value: \"<binary>\": PEM block type must be CERTIFICATE REQUEST",
        )),
    }
}

fn invalid(field: &str, message: &str) -> Error {
    Error::Invalid {
        kind: "CertificateSigningRequest".into(),
        group: "certificates.k8s.io".into(),
        name: String::new(),
        causes: vec![super::error::Cause {
            reason: "FieldValueInvalid",
            message: message.into(),
            field: field.into(),
        }],
    }
}
