//! A PersistentVolume's `nodeAffinity` against this node, as kubelet's
//! `CheckNodeAffinity` (and the API's node selector matching) evaluates it: the terms of
//! `required.nodeSelectorTerms` are ORed; within a term, `matchExpressions` (on the
//! node's labels) and `matchFields` (on `metadata.name`) are ANDed; a term with neither
//! matches nothing.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, VolumeNodeAffinity};

use super::Node;

/// `Ok` when the affinity holds for `node`; else kubelet's reason.
pub fn matches(affinity: &VolumeNodeAffinity, node: Node<'_>) -> Result<(), String> {
    let Some(required) = &affinity.required else { return Ok(()) };
    for term in &required.node_selector_terms {
        if term_matches(term, node)? {
            return Ok(());
        }
    }
    Err("no matching NodeSelectorTerms".to_owned())
}

fn term_matches(term: &NodeSelectorTerm, node: Node<'_>) -> Result<bool, String> {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return Ok(false);
    }
    for requirement in expressions {
        let value = node.labels.get(&requirement.key).map(String::as_str);
        if !requirement_matches(requirement, value)? {
            return Ok(false);
        }
    }
    for requirement in fields {
        if requirement.key != "metadata.name" {
            return Err(format!("{:?} is not a valid field selector key", requirement.key));
        }
        if !matches!(requirement.operator.as_str(), "In" | "NotIn") {
            return Err(format!(
                "{:?} is not a valid field selector operator",
                requirement.operator
            ));
        }
        if !requirement_matches(requirement, Some(node.name))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One requirement on a value (`None`: the node has no such label).
fn requirement_matches(
    requirement: &NodeSelectorRequirement,
    value: Option<&str>,
) -> Result<bool, String> {
    let values = requirement.values.as_deref().unwrap_or_default();
    let contains = || value.is_some_and(|v| values.iter().any(|w| w == v));
    let number = |op: &str| -> Result<(i64, i64), String> {
        let [wanted] = values else {
            return Err(format!("operator {op} needs exactly one value"));
        };
        let wanted: i64 = wanted.parse().map_err(|_| format!("{wanted:?} is not an integer"))?;
        let have = value.and_then(|v| v.parse().ok()).unwrap_or(i64::MIN);
        Ok((have, wanted))
    };
    match requirement.operator.as_str() {
        "In" => Ok(contains()),
        "NotIn" => Ok(!contains()),
        "Exists" => Ok(value.is_some()),
        "DoesNotExist" => Ok(value.is_none()),
        "Gt" => {
            let (have, wanted) = number("Gt")?;
            Ok(value.is_some_and(|v| v.parse::<i64>().is_ok()) && have > wanted)
        }
        "Lt" => {
            let (have, wanted) = number("Lt")?;
            Ok(value.is_some_and(|v| v.parse::<i64>().is_ok()) && have < wanted)
        }
        other => Err(format!("{other:?} is not a valid node selector operator")),
    }
}
