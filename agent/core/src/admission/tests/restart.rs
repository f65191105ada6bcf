//! I4: a container's `restartPolicy` and `restartPolicyRules`, refused (A1) in
//! kube-apiserver's words where it would refuse them.

use serde_json::{Value, json};

use super::*;

/// The refusals' fields and messages for a pod with `containers` and `init`.
fn messages(containers: Value, init: Value) -> Vec<(String, String)> {
    let mut pod = pod(json!({}), json!({}));
    let spec = pod.spec.as_mut().unwrap();
    spec.containers = serde_json::from_value(containers).unwrap();
    spec.init_containers = serde_json::from_value(init).unwrap();
    review(&pod, &NodeFacts::default(), Source::File)
        .into_iter()
        .map(|f| {
            assert_eq!((f.severity, f.reason), (Severity::Refused, UNSUPPORTED_FIELD));
            (f.field, f.message)
        })
        .collect()
}

fn app(policy: Option<&str>, rules: Value) -> Value {
    let mut c = json!({"name": "app", "image": "busybox", "restartPolicyRules": rules});
    if let Some(policy) = policy {
        c["restartPolicy"] = json!(policy);
    }
    json!([c])
}

fn restart_on(codes: &[i32]) -> Value {
    json!({"action": "Restart", "exitCodes": {"operator": "In", "values": codes}})
}

fn refusal(field: &str, message: &str) -> (String, String) {
    (field.to_owned(), format!("{field}: {message}"))
}

#[test]
fn a1_i4_restart_rules_beside_a_container_policy_are_accepted() {
    for policy in ["Always", "OnFailure", "Never"] {
        let rules = json!([
            restart_on(&[42]),
            {"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0, 1]}},
        ]);
        assert_eq!(messages(app(Some(policy), rules), json!(null)), vec![], "{policy}");
        let init = app(Some(policy), json!([]));
        assert_eq!(messages(app(None, json!([])), init), vec![], "init {policy}");
    }
    let init = app(Some("Never"), json!([restart_on(&[3])]));
    assert_eq!(messages(app(None, json!([])), init), vec![]);
}

#[test]
fn a1_i4_a_container_policy_is_always_onfailure_or_never() {
    let field = "spec.containers[0].restartPolicy";
    assert_eq!(
        messages(app(Some("Sometimes"), json!([])), json!(null)),
        [refusal(
            field,
            r#"Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure""#
        )]
    );
}

#[test]
fn a1_i4_rules_need_the_containers_own_policy() {
    assert_eq!(
        messages(app(None, json!([restart_on(&[42])])), json!(null)),
        [refusal(
            "spec.containers[0].restartPolicy",
            "Required value: must specify restartPolicy when restart rules are used"
        )]
    );
    let init = app(None, json!([restart_on(&[42])]));
    assert_eq!(
        messages(app(None, json!([])), init),
        [refusal(
            "spec.initContainers[0].restartPolicy",
            "Required value: must specify restartPolicy when restart rules are used"
        )]
    );
}

#[test]
fn a1_i4_a_sidecar_may_not_have_rules() {
    let init = app(Some("Always"), json!([restart_on(&[42])]));
    assert_eq!(
        messages(app(None, json!([])), init),
        [refusal(
            "spec.initContainers[0].restartPolicyRules",
            "Forbidden: restartPolicyRules are not allowed for init containers with restart \
             policy Always"
        )]
    );
}

#[test]
fn a1_i4_each_rule_restarts_on_exit_codes_in_or_not_in_a_list() {
    let rules = json!([
        {"action": "Ignore", "exitCodes": {"operator": "In", "values": [1]}},
        {"action": "Restart"},
        {"action": "Restart", "exitCodes": {"operator": "Gt", "values": [1]}},
    ]);
    let at = "spec.containers[0].restartPolicyRules";
    assert_eq!(
        messages(app(Some("Never"), rules), json!(null)),
        [
            refusal(
                &format!("{at}[0].action"),
                r#"Unsupported value: "Ignore": supported values: "Restart""#
            ),
            refusal(&format!("{at}[1].exitCodes"), "Required value: must be specified"),
            refusal(
                &format!("{at}[2].exitCodes.operator"),
                r#"Unsupported value: "Gt": supported values: "In", "NotIn""#
            ),
        ]
    );
}

#[test]
fn a1_i4_at_most_20_rules_of_at_most_255_exit_codes() {
    let codes: Vec<i32> = (0..256).collect();
    let mut rules = vec![restart_on(&codes)];
    rules.extend((0..20).map(|i| restart_on(&[i])));
    let at = "spec.containers[0].restartPolicyRules";
    assert_eq!(
        messages(app(Some("Never"), json!(rules)), json!(null)),
        [
            refusal(at, "Too many: 21: must have at most 20 items"),
            refusal(
                &format!("{at}[0].exitCodes.values"),
                "Too many: 256: must have at most 255 items"
            ),
        ]
    );
    let codes: Vec<i32> = (0..255).collect();
    let rules: Vec<Value> = (0..20).map(|_| restart_on(&codes)).collect();
    assert_eq!(messages(app(Some("Never"), json!(rules)), json!(null)), vec![]);
}

#[test]
fn a1_i4_an_ephemeral_container_may_have_neither() {
    let mut pod = pod(json!({}), json!({}));
    pod.spec.as_mut().unwrap().ephemeral_containers = serde_json::from_value(json!([{
        "name": "debugger",
        "image": "busybox",
        "restartPolicy": "Never",
        "restartPolicyRules": [restart_on(&[1])],
    }]))
    .unwrap();
    let fields: Vec<String> =
        review(&pod, &NodeFacts::default(), Source::File).into_iter().map(|f| f.field).collect();
    assert_eq!(
        fields,
        [
            "spec.ephemeralContainers[0].restartPolicy",
            "spec.ephemeralContainers[0].restartPolicyRules"
        ]
    );
}
