//! Node affinity (K4): the pod's `nodeSelector` and its required node affinity against
//! the node's labels and name, as component-helpers' `GetRequiredNodeAffinity().Match`
//! decides: every `nodeSelector` label equal, and (if set) one of the
//! `nodeSelectorTerms` matching. A term matches when it has requirements and all hold;
//! a term with an invalid requirement never matches.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod};

/// Whether the pod's required node affinity and selector match the node.
pub fn required_matches(pod: &Pod, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return true };
    let selector = spec.node_selector.iter().flatten();
    if !selector.into_iter().all(|(key, value)| labels.get(key) == Some(value)) {
        return false;
    }
    let node_affinity = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
    let Some(required) =
        node_affinity.and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
    else {
        return true;
    };
    required.node_selector_terms.iter().any(|term| term_matches(term, node_name, labels))
}

fn term_matches(
    term: &NodeSelectorTerm,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions.iter().all(|r| label_requirement(r, labels) == Some(true))
        && fields.iter().all(|r| field_requirement(r, node_name) == Some(true))
}

/// A label requirement (`None`: invalid, as the API's selector parsing refuses it).
fn label_requirement(
    r: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or_default();
    let label = labels.get(&r.key);
    match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => None,
        "In" => Some(label.is_some_and(|l| values.contains(l))),
        "NotIn" => Some(!label.is_some_and(|l| values.contains(l))),
        "Exists" | "DoesNotExist" if !values.is_empty() => None,
        "Exists" => Some(label.is_some()),
        "DoesNotExist" => Some(label.is_none()),
        "Gt" | "Lt" => {
            let [bound] = values else { return None };
            let bound: i64 = bound.parse().ok()?;
            let Some(value) = label.and_then(|l| l.parse::<i64>().ok()) else { return Some(false) };
            Some(if r.operator == "Gt" { value > bound } else { value < bound })
        }
        _ => None,
    }
}

/// A field requirement: the node's fields are `metadata.name` only; `In` or `NotIn`
/// with exactly one value.
fn field_requirement(r: &NodeSelectorRequirement, node_name: &str) -> Option<bool> {
    let [value] = r.values.as_deref().unwrap_or_default() else { return None };
    let field = if r.key == "metadata.name" { node_name } else { "" };
    match r.operator.as_str() {
        "In" => Some(field == value),
        "NotIn" => Some(field != value),
        _ => None,
    }
}
