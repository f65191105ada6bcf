//! A PersistentVolume's `nodeAffinity` against this node, as kubelet's
//! `CheckNodeAffinity` (and the API's node selector matching) evaluates it: the terms of
//! `required.nodeSelectorTerms` are ORed; within a term, `matchExpressions` (on the
//! node's labels) and `matchFields` (on `metadata.name`) are ANDed; a term with neither
//! matches nothing.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, VolumeNodeAffinity};

use super::Node;

/// Why a volume's node affinity does not hold for the node, or cannot be evaluated, in
/// kubelet's words (after `MountVolume.NodeAffinity check failed for volume "pv" : `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No term of `required.nodeSelectorTerms` matches the node.
    #[error("no matching NodeSelectorTerms")]
    NoMatchingTerm,
    /// A `matchFields` key other than `metadata.name`.
    #[error("{0:?} is not a valid field selector key")]
    FieldKey(String),
    /// A `matchFields` operator other than `In` and `NotIn`.
    #[error("{0:?} is not a valid field selector operator")]
    FieldOperator(String),
    /// `Gt` or `Lt` with other than one value.
    #[error("operator {0} needs exactly one value")]
    OneValue(&'static str),
    /// `Gt` or `Lt` with a value that is not an integer.
    #[error("{0:?} is not an integer")]
    Integer(String),
    #[error("{0:?} is not a valid node selector operator")]
    Operator(String),
}

/// `Ok` when the affinity holds for `node`; else kubelet's reason.
pub fn matches(affinity: &VolumeNodeAffinity, node: Node<'_>) -> Result<(), Error> {
    let Some(required) = &affinity.required else { return Ok(()) };
    for term in &required.node_selector_terms {
        if term_matches(term, node)? {
            return Ok(());
        }
    }
    Err(Error::NoMatchingTerm)
}

fn term_matches(term: &NodeSelectorTerm, node: Node<'_>) -> Result<bool, Error> {
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
            return Err(Error::FieldKey(requirement.key.clone()));
        }
        if !matches!(requirement.operator.as_str(), "In" | "NotIn") {
            return Err(Error::FieldOperator(requirement.operator.clone()));
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
) -> Result<bool, Error> {
    let values = requirement.values.as_deref().unwrap_or_default();
    let contains = || value.is_some_and(|v| values.iter().any(|w| w == v));
    let number = |op: &'static str| -> Result<(i64, i64), Error> {
        let [wanted] = values else {
            return Err(Error::OneValue(op));
        };
        let wanted: i64 = wanted.parse().map_err(|_| Error::Integer(wanted.clone()))?;
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
        other => Err(Error::Operator(other.to_owned())),
    }
}
