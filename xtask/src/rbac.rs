//! `deploy/rbac.yaml` against what the agents asked in a test run (K5): every verb on
//! every resource the file grants must have been asked by some agent, so that the file
//! grants nothing a node does not need. (That every request is granted, each test's API
//! server checks itself.)
//!
//! The test API server appends each node request it allowed, one `verb group resource`
//! line (the core group written `""`), to the file [`REQUESTS_ENV`] names; `cargo xtask
//! ci` sets it for the test steps and runs [`check`] after them.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::Value;

/// The variable the test API server reads (`outpost_tests::apiserver::NODE_REQUESTS_ENV`).
pub const REQUESTS_ENV: &str = "OUTPOST_TEST_NODE_REQUESTS";

/// Fails, naming them, if `rbac` grants a verb on a resource that no line of `requests`
/// asked.
pub fn check(rbac: &Path, requests: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(rbac).with_context(|| format!("cannot read {}", rbac.display()))?;
    let asked = std::fs::read_to_string(requests)
        .with_context(|| format!("cannot read the agents' requests {}", requests.display()))?;
    let asked: BTreeSet<(String, String, String)> = asked
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let (verb, group, resource) = (words.next()?, words.next()?, words.next()?);
            let group = if group == "\"\"" { "" } else { group };
            Some((verb.to_owned(), group.to_owned(), resource.to_owned()))
        })
        .collect();
    if asked.is_empty() {
        bail!(
            "{} lists no request: did the tests run with {REQUESTS_ENV} set?",
            requests.display()
        );
    }
    let unused: Vec<String> = granted(&text)?
        .into_iter()
        .filter(|grant| !asked.contains(grant))
        .map(|(verb, group, resource)| format!("{verb} {resource} (group {group:?})"))
        .collect();
    if !unused.is_empty() {
        bail!(
            "{} grants what no agent asked in the tests; remove it, or test what needs it:\n  {}",
            rbac.display(),
            unused.join("\n  ")
        );
    }
    println!(
        "rbac: every verb {} grants was asked by an agent ({} kinds of request)",
        rbac.display(),
        asked.len()
    );
    Ok(())
}

/// Every (verb, group, resource) the Roles and ClusterRoles of `text` grant.
fn granted(text: &str) -> anyhow::Result<BTreeSet<(String, String, String)>> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).context("not YAML")?;
    let strings = |value: &Value| -> Vec<String> {
        let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
        items.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()
    };
    let mut grants = BTreeSet::new();
    let roles = documents
        .iter()
        .filter(|d| matches!(d.get("kind").and_then(Value::as_str), Some("Role" | "ClusterRole")));
    for rule in roles.flat_map(|d| d.get("rules").and_then(Value::as_array).into_iter().flatten()) {
        for verb in strings(&rule["verbs"]) {
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    grants.insert((verb.clone(), group.clone(), resource));
                }
            }
        }
    }
    Ok(grants)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_no_request_used_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let rbac = dir.path().join("rbac.yaml");
        std::fs::write(
            &rbac,
            "kind: ClusterRole\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [get, delete]\n---\nkind: ClusterRoleBinding\n",
        )
        .unwrap();
        let requests = dir.path().join("requests");
        std::fs::write(&requests, "get \"\" pods\nget \"\" pods\n").unwrap();
        let error = check(&rbac, &requests).unwrap_err().to_string();
        assert!(error.contains("delete pods (group \"\")"), "{error}");
        std::fs::write(&requests, "get \"\" pods\ndelete \"\" pods\n").unwrap();
        check(&rbac, &requests).unwrap();
        std::fs::write(&requests, "").unwrap();
        assert!(check(&rbac, &requests).is_err(), "no request at all is a mistake");
    }
}
