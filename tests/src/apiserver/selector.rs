//! `fieldSelector` and `labelSelector`, parsed and matched as the real API server does.
//!
//! Label selectors take equality (`k=v`, `k==v`, `k!=v`), sets (`k in (a,b)`,
//! `k notin (a,b)`), existence (`k`, `!k`) and `k>N`/`k<N`. Field selectors take `=`,
//! `==` and `!=` on the resource's selectable fields; an unknown field is a 400 as on
//! the real server. Simplified: backslash escapes in field selector values are not
//! decoded.

use serde_json::Value;

use super::error::{Error, Result};
use super::resource::ResourceType;
use super::store::TRIGGER_FIELDS;

/// The selectors of one list or watch request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    fields: Vec<FieldRequirement>,
    labels: Vec<LabelRequirement>,
}

#[derive(Debug, Clone, PartialEq)]
struct FieldRequirement {
    label: String,
    value: String,
    equal: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

impl Filter {
    /// Parses both selectors (either may be absent) for `resource`.
    pub fn parse(
        resource: &ResourceType,
        field_selector: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Filter> {
        let fields = match field_selector {
            Some(s) => parse_fields(resource, s)?,
            None => Vec::new(),
        };
        let labels = match label_selector {
            Some(s) => parse_labels(s)?,
            None => Vec::new(),
        };
        Ok(Filter { fields, labels })
    }

    /// The indexed field and value this filter asks for, if its field selector asks
    /// one of [`TRIGGER_FIELDS`] to equal a value: the watch need only see writes of
    /// objects that had or have it.
    pub fn trigger(&self) -> Option<(&'static str, String)> {
        self.fields.iter().filter(|f| f.equal).find_map(|f| {
            let field = TRIGGER_FIELDS.iter().find(|t| **t == f.label)?;
            Some((*field, f.value.clone()))
        })
    }

    /// Whether `object` (of `resource`) passes both selectors.
    pub fn matches(&self, resource: &ResourceType, object: &Value) -> bool {
        let fields_match = self
            .fields
            .iter()
            .all(|f| (resource.field_value(object, &f.label) == f.value) == f.equal);
        fields_match && self.labels.iter().all(|l| l.matches(object))
    }
}

fn parse_fields(resource: &ResourceType, selector: &str) -> Result<Vec<FieldRequirement>> {
    let mut requirements = Vec::new();
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (label, value, equal) = if let Some((l, v)) = term.split_once("!=") {
            (l, v, false)
        } else if let Some((l, v)) = term.split_once("==") {
            (l, v, true)
        } else if let Some((l, v)) = term.split_once('=') {
            (l, v, true)
        } else {
            return Err(Error::BadRequest(format!(
                "invalid field selector: '{term}': does not contain an operator"
            )));
        };
        let label = label.trim();
        if !resource.selectable(label) {
            return Err(Error::BadRequest(format!("field label not supported: {label}")));
        }
        requirements.push(FieldRequirement {
            label: label.to_string(),
            value: value.trim().to_string(),
            equal,
        });
    }
    Ok(requirements)
}

/// Splits at commas that are not inside a `( … )` value set.
fn split_terms(selector: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms.into_iter().map(str::trim).filter(|t| !t.is_empty()).collect()
}

fn parse_labels(selector: &str) -> Result<Vec<LabelRequirement>> {
    split_terms(selector).into_iter().map(parse_label_term).collect()
}

fn parse_label_term(term: &str) -> Result<LabelRequirement> {
    let bad = |why: &str| Error::BadRequest(format!("unable to parse requirement: {term}: {why}"));
    if let Some(key) = term.strip_prefix('!') {
        return Ok(LabelRequirement::DoesNotExist(key.trim().to_string()));
    }
    for (word, negated) in [(" notin ", true), (" in ", false)] {
        if let Some((key, set)) = term.split_once(word) {
            let set = set.trim();
            let values = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| bad("a set must be in parentheses"))?;
            let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
            let key = key.trim().to_string();
            return Ok(if negated {
                LabelRequirement::NotIn(key, values)
            } else {
                LabelRequirement::In(key, values)
            });
        }
    }
    let number = |v: &str| v.trim().parse::<i64>().map_err(|_| bad("not an integer"));
    Ok(if let Some((k, v)) = term.split_once("!=") {
        LabelRequirement::NotEquals(k.trim().into(), v.trim().into())
    } else if let Some((k, v)) = term.split_once("==") {
        LabelRequirement::Equals(k.trim().into(), v.trim().into())
    } else if let Some((k, v)) = term.split_once('=') {
        LabelRequirement::Equals(k.trim().into(), v.trim().into())
    } else if let Some((k, v)) = term.split_once('>') {
        LabelRequirement::GreaterThan(k.trim().into(), number(v)?)
    } else if let Some((k, v)) = term.split_once('<') {
        LabelRequirement::LessThan(k.trim().into(), number(v)?)
    } else if term.contains(char::is_whitespace) {
        return Err(bad("unknown operator"));
    } else {
        LabelRequirement::Exists(term.to_string())
    })
}

impl LabelRequirement {
    fn matches(&self, object: &Value) -> bool {
        let label = |key: &str| {
            object.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
        };
        let number = |key: &str| label(key).and_then(|v| v.parse::<i64>().ok());
        match self {
            LabelRequirement::Equals(k, v) => label(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::DoesNotExist(k) => label(k).is_none(),
            LabelRequirement::GreaterThan(k, n) => number(k).is_some_and(|l| l > *n),
            LabelRequirement::LessThan(k, n) => number(k).is_some_and(|l| l < *n),
        }
    }
}
