//! The walk of a pod's JSON against the table: each field found is looked up by its
//! path pattern (list indexes as `[]`) and its rule applied.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value};

use super::table::{ANNOTATIONS, CONTAINER, Rule, Table};
use super::{Finding, NodeFacts, Severity, UNSUPPORTED_FIELD};
use crate::pod::Source;

/// Why a static pod may not refer to an API object (V2).
const STATIC_POD_API_OBJECT: &str = "static pods may not refer to API objects (ConfigMaps, \
Secrets, service-account tokens exist only for pods from the API server, V2); put the data in \
the manifest or in a hostPath file";

/// A review in progress: the pod, the node, where the walk is, and what it found.
pub(super) struct Review<'a> {
    pub(super) pod: &'a Pod,
    pub(super) facts: &'a NodeFacts,
    /// Where the pod comes from: static pods may not refer to API objects (V2).
    pub(super) source: Source,
    /// Whether the walk is in an init container.
    pub(super) in_init_container: bool,
    pub(super) findings: Vec<Finding>,
}

impl<'a> Review<'a> {
    pub(super) fn new(pod: &'a Pod, facts: &'a NodeFacts, source: Source) -> Self {
        Review { pod, facts, source, in_init_container: false, findings: Vec::new() }
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

    /// Reviews the fields of an object at `pattern` (the table's path) and `field` (the
    /// path with list indexes).
    pub(super) fn walk(
        &mut self,
        table: Table,
        pattern: &str,
        field: &str,
        object: &Map<String, Value>,
    ) {
        for (key, value) in object {
            let pattern = join(pattern, key);
            let field = join(field, key);
            match table.iter().find(|(path, _)| *path == pattern) {
                Some((_, rule)) => self.apply(*rule, &field, value),
                None => self.descend(table, &pattern, &field, value),
            }
        }
    }

    /// A field the table has no rule for: an object or list of objects whose fields it
    /// has rules for, or a field unknown to Outpost.
    fn descend(&mut self, table: Table, pattern: &str, field: &str, value: &Value) {
        let known = |pattern: &str| {
            let prefix = format!("{pattern}.");
            table.iter().any(|(path, _)| path.starts_with(&prefix))
        };
        match value {
            Value::Object(object) if known(pattern) => self.walk(table, pattern, field, object),
            Value::Array(items) if known(&format!("{pattern}[]")) => {
                let pattern = format!("{pattern}[]");
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::Object(object) => {
                            self.walk(table, &pattern, &format!("{field}[{i}]"), object);
                        }
                        _ => self.unknown(&format!("{field}[{i}]")),
                    }
                }
            }
            _ if is_unset(value) => {}
            _ => self.unknown(field),
        }
    }

    fn unknown(&mut self, field: &str) {
        self.refuse(
            field,
            UNSUPPORTED_FIELD,
            format!(
                "{field}: not known to Outpost, so it cannot be honoured; remove it, or run the \
                 pod under a kubelet"
            ),
        );
    }

    fn apply(&mut self, rule: Rule, field: &str, value: &Value) {
        match rule {
            Rule::Supported | Rule::Ignored => {}
            Rule::IgnoredWarning(why) => {
                if !is_unset(value) {
                    self.warn(field, format!("{field}: ignored: {why}"));
                }
            }
            Rule::Refused(why) => {
                if !is_unset(value) {
                    self.refuse(field, UNSUPPORTED_FIELD, format!("{field}: not supported: {why}"));
                }
            }
            Rule::ApiObject => {
                if !is_unset(value) {
                    self.api_object(field);
                }
            }
            Rule::Check(_, check) => check(self, field, value),
            Rule::Containers { init } => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    if let Value::Object(object) = item {
                        self.in_init_container = init;
                        self.walk(CONTAINER, "", &format!("{field}[{i}]"), object);
                    }
                }
                self.in_init_container = false;
            }
            Rule::Annotations => {
                for (key, value) in value.as_object().into_iter().flatten() {
                    let rule =
                        ANNOTATIONS.iter().find(|(pattern, _)| match pattern.strip_suffix('*') {
                            Some(prefix) => key.starts_with(prefix),
                            None => key == pattern,
                        });
                    if let Some((_, rule)) = rule {
                        self.apply(*rule, &format!("{field}[{key}]"), value);
                    }
                }
            }
        }
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() { key.to_owned() } else { format!("{prefix}.{key}") }
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
