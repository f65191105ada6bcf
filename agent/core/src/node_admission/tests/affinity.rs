//! K4: node affinity and `nodeSelector` (component-helpers' semantics).

use serde_json::json;

use super::*;

#[test]
fn k4_node_selector_must_match_every_label() {
    let p = pod("p", json!({"nodeSelector": {"zone": "north", "gen": "5"}}));
    assert_eq!(admit(&node(), &[], &p, Source::Api), Verdict::Admit);
    let p = pod("p", json!({"nodeSelector": {"zone": "north", "disk": "ssd"}}));
    let (reason, message) = rejected(admit(&node(), &[], &p, Source::Api));
    assert_eq!(reason, "NodeAffinity");
    assert_eq!(
        message,
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
    );
    // Static pods too, as kubelet admits them.
    let (reason, _) = rejected(admit(&node(), &[], &p, Source::File));
    assert_eq!(reason, "NodeAffinity");
}

#[test]
fn k4_node_selector_terms_operators() {
    let expr = |key: &str, op: &str, values: Value| json!([{"matchExpressions": [{"key": key, "operator": op, "values": values}]}]);
    assert!(matches(expr("zone", "In", json!(["south", "north"]))));
    assert!(!matches(expr("zone", "In", json!(["south"]))));
    assert!(!matches(expr("absent", "In", json!(["x"]))));
    assert!(!matches(expr("zone", "In", json!([]))), "In without values is invalid");
    assert!(matches(expr("zone", "NotIn", json!(["south"]))));
    assert!(matches(expr("absent", "NotIn", json!(["south"]))));
    assert!(!matches(expr("zone", "NotIn", json!(["north"]))));
    assert!(matches(json!([{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}])));
    assert!(!matches(json!([{"matchExpressions": [{"key": "absent", "operator": "Exists"}]}])));
    assert!(!matches(expr("zone", "Exists", json!(["north"]))), "Exists with values is invalid");
    assert!(matches(
        json!([{"matchExpressions": [{"key": "absent", "operator": "DoesNotExist"}]}])
    ));
    assert!(!matches(json!([{"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}])));
    assert!(matches(expr("gen", "Gt", json!(["4"]))));
    assert!(!matches(expr("gen", "Gt", json!(["5"]))));
    assert!(matches(expr("gen", "Lt", json!(["6"]))));
    assert!(!matches(expr("gen", "Lt", json!(["5"]))));
    assert!(!matches(expr("zone", "Gt", json!(["1"]))), "a label that is not a number");
    assert!(!matches(expr("absent", "Lt", json!(["9"]))));
    assert!(!matches(expr("gen", "Gt", json!(["1", "2"]))), "Gt takes one value");
    assert!(!matches(expr("gen", "Gt", json!(["x"]))));
    assert!(!matches(expr("zone", "Like", json!(["north"]))), "an unknown operator");
}

#[test]
fn k4_terms_are_ored_and_requirements_anded() {
    let north = json!({"key": "zone", "operator": "In", "values": ["north"]});
    let south = json!({"key": "zone", "operator": "In", "values": ["south"]});
    assert!(matches(json!([{"matchExpressions": [south]}, {"matchExpressions": [north]}])));
    assert!(!matches(json!([{"matchExpressions": [north, south]}])));
    assert!(!matches(json!([{}])), "an empty term matches nothing");
    assert!(!matches(json!([])), "no term matches nothing");
    // An invalid requirement spoils its term only.
    let invalid = json!({"key": "zone", "operator": "In", "values": []});
    assert!(matches(json!([{"matchExpressions": [invalid]}, {"matchExpressions": [north]}])));
}

#[test]
fn k4_match_fields_metadata_name() {
    let field = |op: &str, values: Value| json!([{"matchFields": [{"key": "metadata.name", "operator": op, "values": values}]}]);
    assert!(matches(field("In", json!(["edge-1"]))));
    assert!(!matches(field("In", json!(["edge-2"]))));
    assert!(matches(field("NotIn", json!(["edge-2"]))));
    assert!(!matches(field("NotIn", json!(["edge-1"]))));
    assert!(!matches(field("In", json!(["edge-1", "edge-2"]))), "one value only");
    assert!(!matches(field("Exists", json!(["edge-1"]))));
    // Labels and fields of one term must all hold.
    let both = json!([{
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["north"]}],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["edge-2"]}],
    }]);
    assert!(!matches(both));
}

#[test]
fn k4_selector_and_affinity_both_apply() {
    let p = pod(
        "p",
        json!({
            "nodeSelector": {"zone": "south"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}},
        }),
    );
    let n = node();
    assert!(!required_matches(&p, &n.name, &n.labels));
    // Preferred affinity is not a requirement.
    let p = pod(
        "p",
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["south"]}]}}]}}}),
    );
    assert_eq!(admit(&n, &[], &p, Source::Api), Verdict::Admit);
}
