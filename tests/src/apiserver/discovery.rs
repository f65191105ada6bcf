//! Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}`) and
//! `/version`, enough for clients that discover before they call.

use serde_json::{Value, json};

use super::resource::{RESOURCES, ResourceType, SERVICEACCOUNTS};
use super::{authn, reviews};

/// The Kubernetes version the server claims (the newest k8s-openapi knows).
pub const VERSION: (&str, &str) = ("1", "37");

/// The document for a non-resource GET `path`, if there is one.
pub fn document(path: &str) -> Option<Value> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["version"] => Some(version()),
        ["api"] => Some(json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [],
        })),
        ["apis"] => Some(groups()),
        ["api", "v1"] => Some(resource_list("", "v1")),
        ["apis", "authentication.k8s.io", "v1"] => Some(authn::discovery()),
        ["apis", "authorization.k8s.io", "v1"] => Some(reviews::authorization_discovery()),
        ["apis", group, version]
            if RESOURCES.iter().any(|r| r.group == *group && r.version == *version) =>
        {
            Some(resource_list(group, version))
        }
        ["healthz" | "livez" | "readyz"] => Some(Value::String("ok".into())),
        _ => None,
    }
}

fn version() -> Value {
    let (major, minor) = VERSION;
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": format!("v{major}.{minor}.0"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn groups() -> Value {
    let mut names: Vec<(&str, &str)> =
        RESOURCES.iter().filter(|r| !r.group.is_empty()).map(|r| (r.group, r.version)).collect();
    names.push(("authentication.k8s.io", "v1"));
    names.push(("authorization.k8s.io", "v1"));
    // One entry per group, its versions in the order served (certificates.k8s.io: v1,
    // then v1beta1 for ClusterTrustBundles); the first is preferred.
    let mut versions: Vec<(&str, Vec<&str>)> = Vec::new();
    for (group, version) in names {
        match versions.iter_mut().find(|(g, _)| *g == group) {
            Some((_, list)) if list.contains(&version) => {}
            Some((_, list)) => list.push(version),
            None => versions.push((group, vec![version])),
        }
    }
    let groups: Vec<Value> = versions
        .into_iter()
        .map(|(group, versions)| {
            let gvs: Vec<Value> = versions
                .iter()
                .map(|v| json!({ "groupVersion": format!("{group}/{v}"), "version": v }))
                .collect();
            json!({ "name": group, "versions": gvs.clone(), "preferredVersion": gvs[0] })
        })
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

fn resource_list(group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for resource in RESOURCES.iter().filter(|r| r.group == group && r.version == version) {
        resources.push(entry(
            resource,
            resource.plural,
            &["create", "delete", "get", "list", "patch", "update", "watch"],
        ));
        if resource.status {
            resources.push(entry(
                resource,
                &format!("{}/status", resource.plural),
                &["get", "patch", "update"],
            ));
        }
        if *resource == &SERVICEACCOUNTS {
            resources.push(json!({
                "name": "serviceaccounts/token",
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
    }
    let group_version =
        if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources })
}

fn entry(resource: &ResourceType, name: &str, verbs: &[&str]) -> Value {
    json!({
        "name": name,
        "singularName": if name.contains('/') { String::new() } else { resource.kind.to_lowercase() },
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": verbs,
    })
}
