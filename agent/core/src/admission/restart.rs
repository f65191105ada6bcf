//! A container's `restartPolicy` and `restartPolicyRules` (I4), checked as kube-apiserver
//! 1.34 validates them with `ContainerRestartRules` on, in its words: a static pod's
//! manifest reaches the agent without that server.

use serde_json::Value;

use super::UNSUPPORTED_FIELD;
use super::review::Review;

/// At most this many rules per container.
const MAX_RULES: usize = 20;
/// At most this many exit codes per rule.
const MAX_EXIT_CODES: usize = 255;

/// `restartPolicy`: Always, OnFailure or Never, on an app container as on an init
/// container (where Always makes a sidecar, I3).
pub(super) fn policy(review: &mut Review<'_>, field: &str, value: &Value) {
    if value.is_null() {
        return;
    }
    let policy = value.as_str().unwrap_or_default();
    if !["Always", "Never", "OnFailure"].contains(&policy) {
        unsupported(review, field, policy, &["Always", "Never", "OnFailure"]);
    }
}

/// `restartPolicyRules`: only beside the container's own `restartPolicy`, not on a
/// sidecar, at most 20, each `action: Restart` with `exitCodes` (`In` or `NotIn`, at most
/// 255 values).
pub(super) fn rules(review: &mut Review<'_>, field: &str, value: &Value) {
    let rules = value.as_array().map(Vec::as_slice).unwrap_or_default();
    if rules.is_empty() {
        return;
    }
    let policy = review.restart_policy.clone();
    match policy.as_deref() {
        None => {
            let container = field.strip_suffix("restartPolicyRules").unwrap_or_default();
            let at = format!("{container}restartPolicy");
            let message = format!(
                "{at}: Required value: must specify restartPolicy when restart rules are used"
            );
            review.refuse(&at, UNSUPPORTED_FIELD, message);
            if review.in_init_container {
                return;
            }
        }
        Some("Always") if review.in_init_container => {
            let message = format!(
                "{field}: Forbidden: restartPolicyRules are not allowed for init containers with \
                 restart policy Always"
            );
            review.refuse(field, UNSUPPORTED_FIELD, message);
            return;
        }
        Some(_) => {}
    }
    if rules.len() > MAX_RULES {
        too_many(review, field, rules.len(), MAX_RULES);
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let action = rule.get("action").and_then(Value::as_str).unwrap_or_default();
        if action != "Restart" {
            unsupported(review, &format!("{at}.action"), action, &["Restart"]);
        }
        match rule.get("exitCodes").filter(|codes| !codes.is_null()) {
            None => {
                let at = format!("{at}.exitCodes");
                let message = format!("{at}: Required value: must be specified");
                review.refuse(&at, UNSUPPORTED_FIELD, message);
            }
            Some(codes) => exit_codes(review, &format!("{at}.exitCodes"), codes),
        }
    }
}

fn exit_codes(review: &mut Review<'_>, field: &str, codes: &Value) {
    let operator = codes.get("operator").and_then(Value::as_str).unwrap_or_default();
    if operator != "In" && operator != "NotIn" {
        unsupported(review, &format!("{field}.operator"), operator, &["In", "NotIn"]);
    }
    let values = codes.get("values").and_then(Value::as_array).map_or(0, Vec::len);
    if values > MAX_EXIT_CODES {
        too_many(review, &format!("{field}.values"), values, MAX_EXIT_CODES);
    }
}

/// kube-apiserver's `field.NotSupported`.
fn unsupported(review: &mut Review<'_>, field: &str, value: &str, supported: &[&str]) {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    let message = format!(
        "{field}: Unsupported value: {value:?}: supported values: {}",
        supported.join(", ")
    );
    review.refuse(field, UNSUPPORTED_FIELD, message);
}

/// kube-apiserver's `field.TooMany`.
fn too_many(review: &mut Review<'_>, field: &str, count: usize, max: usize) {
    let message = format!("{field}: Too many: {count}: must have at most {max} items");
    review.refuse(field, UNSUPPORTED_FIELD, message);
}
