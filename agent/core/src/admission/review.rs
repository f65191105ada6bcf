//! A review in progress: the pod, the node, where the walk is, and what it found; the
//! checks and the walk both add findings to it.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::{Finding, NodeFacts, Severity, UNSUPPORTED_FIELD};
use crate::pod::Source;

/// Why a static pod may not refer to an API object (V2).
const STATIC_POD_API_OBJECT: &str = "static pods may not refer to API objects (ConfigMaps, \
Secrets, service-account tokens, PersistentVolumeClaims exist only for pods from the API server, V2); put the data in \
the manifest or in a hostPath file";

/// A review in progress: the pod, the node, where the walk is, and what it found.
pub(super) struct Review<'a> {
    pub(super) pod: &'a Pod,
    pub(super) facts: &'a NodeFacts,
    /// Where the pod comes from: static pods may not refer to API objects (V2).
    pub(super) source: Source,
    /// Whether the walk is in an init container.
    pub(super) in_init_container: bool,
    /// The `restartPolicy` of the container the walk is in (its rules need it, I4).
    pub(super) restart_policy: Option<String>,
    pub(super) findings: Vec<Finding>,
}

impl<'a> Review<'a> {
    pub(super) fn new(pod: &'a Pod, facts: &'a NodeFacts, source: Source) -> Self {
        Review {
            pod,
            facts,
            source,
            in_init_container: false,
            restart_policy: None,
            findings: Vec::new(),
        }
    }

    /// A reference to an API object at `field`: refused for a static pod (V2).
    pub(super) fn api_object(&mut self, field: &str) {
        if self.source.is_static() {
            let why = STATIC_POD_API_OBJECT;
            self.refuse(field, UNSUPPORTED_FIELD, format!("{field}: not supported: {why}"));
        }
    }

    pub(super) fn refuse(&mut self, field: &str, reason: &'static str, message: String) {
        let field = field.to_owned();
        self.findings.push(Finding { field, severity: Severity::Refused, reason, message });
    }

    pub(super) fn warn(&mut self, field: &str, message: String) {
        let field = field.to_owned();
        let reason = UNSUPPORTED_FIELD;
        self.findings.push(Finding { field, severity: Severity::Warning, reason, message });
    }
}

/// Whether a value says nothing: null, false, "", [] or {} (what a manifest writes for a
/// field left at its default).
pub(super) fn is_unset(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(set) => !set,
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
        Value::Number(_) => false,
    }
}
