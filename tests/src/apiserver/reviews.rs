//! The review APIs a node's kubelet calls: `authentication.k8s.io/v1` `tokenreviews`
//! (who a bearer token is) and `authorization.k8s.io/v1` `subjectaccessreviews` (whether
//! a user may do something), both created (201) and never stored, as on the real server.
//!
//! A TokenReview authenticates what the server's own authenticators do (`authn`): the
//! service account tokens it issued, checked as the real server checks them, and its
//! static token. A SubjectAccessReview is answered from RBAC-like [`Rule`]s a test sets
//! on the handle: a rule grants a verb on a resource and subresource (each may be `*`)
//! to a user or a group. As on a kubeadm cluster, the group `system:masters` may do
//! everything (the real server's authorizer) and so may `kubeadm:cluster-admins` (kubeadm
//! binds it to `cluster-admin`), the group of the server's kubelet-client certificate.
//! Simplified: only resource attributes are matched (no namespaces, names or
//! non-resource URLs), and a denial is "no opinion" (`allowed: false`, no `denied`),
//! as RBAC answers.

use std::sync::Mutex;

use serde_json::{Value, json};

use super::authn;
use super::error::{Cause, Error, Result};
use super::store::Store;
use super::token::Signer;

pub const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
pub const SUBJECT_ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// Groups allowed everything, as on a kubeadm cluster.
const SUPERUSER_GROUPS: [&str; 2] = ["system:masters", "kubeadm:cluster-admins"];

/// Who a [`Rule`] grants to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    User(String),
    Group(String),
}

/// A grant: `verb` on `resource`/`subresource` (an empty subresource: the resource
/// itself; `*` matches anything) to a subject, as a RoleBinding's PolicyRule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub subject: Subject,
    pub verb: String,
    pub resource: String,
    pub subresource: String,
}

impl Rule {
    /// `verb` on `resource` (`nodes/proxy`, `nodes/*`, `*`) for the user `name`.
    pub fn user(name: &str, verb: &str, resource: &str) -> Rule {
        Rule::new(Subject::User(name.to_owned()), verb, resource)
    }

    /// `verb` on `resource` for the members of `group`.
    pub fn group(name: &str, verb: &str, resource: &str) -> Rule {
        Rule::new(Subject::Group(name.to_owned()), verb, resource)
    }

    fn new(subject: Subject, verb: &str, resource: &str) -> Rule {
        let (resource, subresource) = match resource.split_once('/') {
            Some((resource, sub)) => (resource, sub),
            None if resource == "*" => ("*", "*"),
            None => (resource, ""),
        };
        Rule {
            subject,
            verb: verb.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
        }
    }

    fn grants(&self, user: &str, groups: &[&str], verb: &str, resource: &str, sub: &str) -> bool {
        let subject = match &self.subject {
            Subject::User(name) => name == user,
            Subject::Group(name) => groups.contains(&name.as_str()),
        };
        let matches = |rule: &str, asked: &str| rule == "*" || rule == asked;
        subject
            && matches(&self.verb, verb)
            && matches(&self.resource, resource)
            && matches(&self.subresource, sub)
    }
}

/// What SubjectAccessReviews are answered from: kubeadm's bindings for node client
/// certificates, which every kubeadm cluster has, and the rules tests set.
#[derive(Debug)]
pub struct Rules {
    cluster: Vec<Rule>,
    added: Mutex<Vec<Rule>>,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules { cluster: kubeadm_node_certificate_bindings(), added: Mutex::default() }
    }
}

/// kubeadm's ClusterRoleBindings that kube-controller-manager's approver finds through its
/// SubjectAccessReviews: `kubeadm:node-autoapprove-bootstrap` (its bootstrap tokens' group
/// may ask for a new node's client certificate) and
/// `kubeadm:node-autoapprove-certificate-rotation` (a node may renew its own).
fn kubeadm_node_certificate_bindings() -> Vec<Rule> {
    vec![
        Rule::group(
            super::bootstrap_auth::KUBEADM_GROUP,
            "create",
            "certificatesigningrequests/nodeclient",
        ),
        Rule::group("system:nodes", "create", "certificatesigningrequests/selfnodeclient"),
    ]
}

impl Rules {
    pub fn add(&self, rule: Rule) {
        self.added.lock().unwrap_or_else(|p| p.into_inner()).push(rule);
    }

    /// Drops the rules tests added; kubeadm's bindings stay.
    pub fn clear(&self) {
        self.added.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Whether `user` in `groups` may `verb` the `resource`'s `sub` (empty: the resource
    /// itself), as the authorizer answers a SubjectAccessReview.
    pub(super) fn allows(
        &self,
        user: &str,
        groups: &[&str],
        verb: &str,
        resource: &str,
        sub: &str,
    ) -> bool {
        let grants = |rule: &Rule| rule.grants(user, groups, verb, resource, sub);
        groups.iter().any(|g| SUPERUSER_GROUPS.contains(g))
            || self.cluster.iter().any(grants)
            || self.added.lock().unwrap_or_else(|p| p.into_inner()).iter().any(grants)
    }
}

/// The answer to a TokenReview create: the review with its `status` filled in.
pub fn token_review(
    store: &Store,
    signer: &Signer,
    static_token: Option<&str>,
    mut review: Value,
) -> Result<Value> {
    let token = review.pointer("/spec/token").and_then(Value::as_str).unwrap_or_default();
    if token.is_empty() {
        return Err(invalid("TokenReview", "authentication.k8s.io", Cause::required("spec.token")));
    }
    let status = match authn::user_of_token(store, signer, static_token, token) {
        Some(user) => {
            json!({ "authenticated": true, "user": user.0, "audiences": [super::ISSUER] })
        }
        None => {
            json!({ "user": {}, "error": "[invalid bearer token, service account token is not valid]" })
        }
    };
    review["status"] = status;
    stamp(&mut review, "TokenReview", "authentication.k8s.io/v1");
    Ok(review)
}

/// The strings of a list field such as a review's or a CSR's `groups` (absent: none).
pub fn strings(list: Option<&Value>) -> Vec<&str> {
    let list = list.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    list.iter().filter_map(Value::as_str).collect()
}

/// The answer to a SubjectAccessReview create.
pub fn subject_access_review(rules: &Rules, mut review: Value) -> Result<Value> {
    let spec = review.get("spec").cloned().unwrap_or_default();
    let user = spec.get("user").and_then(Value::as_str).unwrap_or_default();
    let groups = strings(spec.get("groups"));
    let kind = ("SubjectAccessReview", "authorization.k8s.io");
    if user.is_empty() && groups.is_empty() {
        let cause = Cause::invalid("spec.user", "at least one of user or group must be specified");
        return Err(invalid(kind.0, kind.1, cause));
    }
    let attributes = match (spec.get("resourceAttributes"), spec.get("nonResourceAttributes")) {
        (Some(attributes), None) if attributes.is_object() => attributes,
        _ => {
            let cause = Cause::invalid(
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            );
            return Err(invalid(kind.0, kind.1, cause));
        }
    };
    let field = |name: &str| attributes.get(name).and_then(Value::as_str).unwrap_or_default();
    let (verb, resource, sub) = (field("verb"), field("resource"), field("subresource"));
    review["status"] = if rules.allows(user, &groups, verb, resource, sub) {
        json!({ "allowed": true, "reason": format!("allowed by the test API server's rules for {user:?}") })
    } else {
        json!({ "allowed": false })
    };
    stamp(&mut review, kind.0, "authorization.k8s.io/v1");
    Ok(review)
}

fn stamp(review: &mut Value, kind: &str, api_version: &str) {
    review["kind"] = json!(kind);
    review["apiVersion"] = json!(api_version);
    review["metadata"] = json!({ "creationTimestamp": null });
}

fn invalid(kind: &str, group: &str, cause: Cause) -> Error {
    Error::Invalid {
        kind: kind.to_owned(),
        group: group.to_owned(),
        name: String::new(),
        causes: vec![cause],
    }
}

/// The discovery document of `authorization.k8s.io/v1` (what is served of it).
pub fn authorization_discovery() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "authorization.k8s.io/v1",
        "resources": [
            { "name": "subjectaccessreviews", "singularName": "subjectaccessreview", "namespaced": false, "kind": "SubjectAccessReview", "verbs": ["create"] },
        ],
    })
}
