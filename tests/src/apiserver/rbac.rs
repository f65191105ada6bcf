//! What `deploy/rbac.yaml` grants, held against what nodes ask (K5): on a cluster without
//! the Node authorizer, that file is all a node has, so every request an agent makes in
//! the tests must be one of its rules.
//!
//! The file's ClusterRole rules hold anywhere, its Role's in the Role's namespace; a rule
//! allows a request when its verbs, API groups and resources (`resource` or
//! `resource/subresource`) name the request's (no `*`, no `resourceNames` in the file).
//!
//! Every request a node made (allowed by the Node authorizer or not: a cluster without it
//! has only this file) is also written, one `verb group resource` line each, to
//! the file `OUTPOST_TEST_NODE_REQUESTS` names (when it is set), so that `cargo xtask ci`
//! can check, after the whole suite, that the file grants nothing no agent asked for.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use super::node_authorizer::Attributes;

/// Where every node request of this test process is appended.
pub const REQUESTS_ENV: &str = "OUTPOST_TEST_NODE_REQUESTS";

/// One rule of the file, with the namespace of its Role (`None`: a ClusterRole's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub namespace: Option<String>,
    pub verbs: Vec<String>,
    pub groups: Vec<String>,
    pub resources: Vec<String>,
}

/// A request as the file's rules see it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    pub verb: String,
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: String,
}

impl Request {
    pub fn of(attrs: &Attributes) -> Option<Request> {
        (!attrs.resource.is_empty()).then(|| Request {
            verb: attrs.verb.clone(),
            group: attrs.group.to_owned(),
            resource: attrs.combined(),
            namespace: attrs.namespace.clone(),
        })
    }
}

/// The rules of `deploy/rbac.yaml`, read once.
pub fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/rbac.yaml");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        parse(&text)
    })
}

/// The rules of the Roles and ClusterRoles in a multi-document YAML `text`.
pub fn parse(text: &str) -> Vec<Rule> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).unwrap_or_default();
    let strings = |value: &Value| -> Vec<String> {
        let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
        items.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()
    };
    let mut rules = Vec::new();
    for document in &documents {
        let namespace = match document.get("kind").and_then(Value::as_str) {
            Some("ClusterRole") => None,
            Some("Role") => document.pointer("/metadata/namespace").and_then(Value::as_str),
            _ => continue,
        };
        for rule in document.get("rules").and_then(Value::as_array).into_iter().flatten() {
            rules.push(Rule {
                namespace: namespace.map(str::to_owned),
                verbs: strings(&rule["verbs"]),
                groups: strings(&rule["apiGroups"]),
                resources: strings(&rule["resources"]),
            });
        }
    }
    rules
}

impl Rule {
    pub fn allows(&self, request: &Request) -> bool {
        let named = |list: &[String], item: &str| list.iter().any(|x| x == item);
        self.namespace.as_ref().is_none_or(|ns| *ns == request.namespace)
            && named(&self.verbs, &request.verb)
            && named(&self.groups, &request.group)
            && named(&self.resources, &request.resource)
    }
}

/// The requests nodes made of one server.
#[derive(Debug, Default)]
pub struct NodeRequests(Mutex<BTreeSet<Request>>);

impl NodeRequests {
    /// Notes `request`; a new one is appended to [`REQUESTS_ENV`]'s file.
    pub fn record(&self, request: Request) {
        let mut seen = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !seen.insert(request.clone()) {
            return;
        }
        let Some(path) = std::env::var_os(REQUESTS_ENV) else { return };
        let line = format!("{} {} {}\n", request.verb, quoted(&request.group), request.resource);
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path);
        if let Err(error) = file.and_then(|mut f| f.write_all(line.as_bytes())) {
            tracing::warn!(path = ?path, %error, "cannot note a node's request");
        }
    }

    /// Whether a node asked `verb` on `resource` of `group`.
    pub fn asked(&self, verb: &str, group: &str, resource: &str) -> bool {
        let seen = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        seen.iter().any(|r| r.verb == verb && r.group == group && r.resource == resource)
    }

    /// The requests no rule of `deploy/rbac.yaml` allows.
    pub fn outside_rbac(&self) -> Vec<Request> {
        let seen = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        seen.iter().filter(|r| !rules().iter().any(|rule| rule.allows(r))).cloned().collect()
    }
}

/// The core group, written `""` so that each line has three words.
fn quoted(group: &str) -> &str {
    if group.is_empty() { "\"\"" } else { group }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deploy_file_parses_into_cluster_and_lease_rules() {
        let rules = rules();
        assert!(rules.iter().any(|r| r.namespace.is_none()), "{rules:?}");
        let lease = Request {
            verb: "update".into(),
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            namespace: "kube-node-lease".into(),
        };
        assert!(rules.iter().any(|r| r.allows(&lease)), "{rules:?}");
        let elsewhere = Request { namespace: "default".into(), ..lease };
        assert!(!rules.iter().any(|r| r.allows(&elsewhere)), "{rules:?}");
    }
}
