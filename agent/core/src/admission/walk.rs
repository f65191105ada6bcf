//! The walk of a pod's JSON against the table: each field found is looked up by its
//! path pattern (list indexes as `[]`) and its rule applied.

use serde_json::{Map, Value};

use super::UNSUPPORTED_FIELD;
use super::review::{Review, is_unset};
use super::table::{ANNOTATIONS, CONTAINER, Rule, Table};

impl Review<'_> {
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
                        let policy = object.get("restartPolicy").and_then(Value::as_str);
                        self.restart_policy = policy.map(str::to_owned);
                        self.walk(CONTAINER, "", &format!("{field}[{i}]"), object);
                    }
                }
                self.in_init_container = false;
                self.restart_policy = None;
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
