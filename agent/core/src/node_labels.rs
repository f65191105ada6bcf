//! `--node-labels` checked as kubelet checks them at start (`ValidateKubeletFlags`,
//! `cmd/kubelet/app/options/options.go`), SEMANTICS.md K5.
//!
//! A label in the `kubernetes.io` or `k8s.io` namespaces (or a subdomain of them) must be
//! one kubelet sets itself ([`KUBELET_LABELS`]) or lie in `kubelet.kubernetes.io` or
//! `node.kubernetes.io` ([`KUBELET_LABEL_NAMESPACES`]): any other is what the
//! NodeRestriction admission plugin refuses on the Node, so the node would never register
//! (`node-role.kubernetes.io/edge`, `node-restriction.kubernetes.io/...`). Every key must
//! be a qualified name and every value a label value.

use std::collections::BTreeMap;

/// The labels kubelet sets on its own Node (`k8s.io/kubelet/pkg/apis`, `KubeletLabels()`),
/// sorted as kubelet lists them.
pub const KUBELET_LABELS: &[&str] = &[
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// The label namespaces a node may use (`KubeletLabelNamespaces()`).
pub const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Why `--node-labels` cannot be used, in kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{}]\n\
         --node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix ({}) \
         or be in the specifically allowed set ({})",
        .0.join(" "),
        KUBELET_LABEL_NAMESPACES.join(", "),
        KUBELET_LABELS.join(", ")
    )]
    Unknown(Vec<String>),
    #[error("invalid node labels: {}", .0.join("; "))]
    Invalid(Vec<String>),
    /// One label value too long (an item of [`Error::Invalid`]).
    #[error("'{0}' - must be no more than 63 characters")]
    ValueLength(String),
    /// One label value that is not a name (an item of [`Error::Invalid`]).
    #[error("'{0}' - a valid label {NAME_CHARS}")]
    ValueName(String),
}

/// Checks `labels` as kubelet checks `--node-labels` (unknown Kubernetes labels first,
/// then the syntax of every key and value).
pub fn validate(labels: &BTreeMap<String, String>) -> Result<(), Error> {
    let unknown: Vec<String> = labels
        .keys()
        .filter(|key| is_kubernetes_label(key) && !is_kubelet_label(key))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Unknown(unknown));
    }
    let mut invalid = Vec::new();
    for (key, value) in labels {
        if let Err(problems) = qualified_name(key) {
            invalid.push(format!("'{key}' - {}", problems.join(", ")));
        }
        if let Err(problem) = label_value(value) {
            invalid.push(problem.to_string());
        }
    }
    if invalid.is_empty() { Ok(()) } else { Err(Error::Invalid(invalid)) }
}

/// The namespace (prefix) of a label key: what stands before its `/`.
fn namespace(key: &str) -> &str {
    key.split_once('/').map(|(prefix, _)| prefix).unwrap_or_default()
}

/// `namespace` is `domain` or a subdomain of it.
fn within(namespace: &str, domain: &str) -> bool {
    namespace == domain || namespace.strip_suffix(domain).is_some_and(|rest| rest.ends_with('.'))
}

/// In the `kubernetes.io` or `k8s.io` namespaces (`isKubernetesLabel`).
pub fn is_kubernetes_label(key: &str) -> bool {
    let namespace = namespace(key);
    within(namespace, "kubernetes.io") || within(namespace, "k8s.io")
}

/// A label a node may set on itself (`IsKubeletLabel`).
pub fn is_kubelet_label(key: &str) -> bool {
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES.iter().any(|domain| within(namespace(key), domain))
}

const NAME_CHARS: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must \
start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', \
regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `validation.IsQualifiedName`: `[prefix/]name`, the prefix a DNS subdomain.
fn qualified_name(key: &str) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    let (prefix, name) = match key.split('/').collect::<Vec<_>>()[..] {
        [name] => (None, name),
        [prefix, name] => (Some(prefix), name),
        _ => {
            return Err(vec![format!(
                "a qualified name {NAME_CHARS} with an optional DNS subdomain prefix and '/'"
            )]);
        }
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            problems.push("prefix part must be non-empty".to_owned());
        } else if crate::manifest::validate::dns1123_subdomain(prefix).is_err() {
            problems.push(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case \
                 alphanumeric characters, '-' or '.', and must start and end with an \
                 alphanumeric character"
                    .to_owned(),
            );
        }
    }
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else {
        if name.len() > 63 {
            problems.push("name part must be no more than 63 characters".to_owned());
        }
        if !is_name(name) {
            problems.push(format!("name part {NAME_CHARS}"));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// `validation.IsValidLabelValue`: empty, or a name of at most 63 characters.
fn label_value(value: &str) -> Result<(), Error> {
    if value.len() > 63 {
        return Err(Error::ValueLength(value.to_owned()));
    }
    if !value.is_empty() && !is_name(value) {
        return Err(Error::ValueName(value.to_owned()));
    }
    Ok(())
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_name(value: &str) -> bool {
    let bytes = value.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn k5_a_node_role_label_is_refused_with_kubelet_s_message() {
        let error = validate(&labels(&[("node-role.kubernetes.io/edge", ""), ("site", "a")]))
            .expect_err("refused");
        assert_eq!(
            error.to_string(),
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: \
             [node-role.kubernetes.io/edge]\n--node-labels in the 'kubernetes.io' namespace \
             must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io) or \
             be in the specifically allowed set (beta.kubernetes.io/arch, \
             beta.kubernetes.io/instance-type, beta.kubernetes.io/os, \
             failure-domain.beta.kubernetes.io/region, failure-domain.beta.kubernetes.io/zone, \
             kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os, \
             node.kubernetes.io/instance-type, topology.kubernetes.io/region, \
             topology.kubernetes.io/zone)"
        );
    }

    #[test]
    fn k5_node_restriction_and_other_kubernetes_namespaces_are_refused() {
        for key in [
            "node-restriction.kubernetes.io/site",
            "kubernetes.io/role",
            "app.kubernetes.io/name",
            "k8s.io/x",
            "example.k8s.io/x",
        ] {
            let refused = validate(&labels(&[(key, "v")]));
            assert_eq!(refused, Err(Error::Unknown(vec![key.to_owned()])), "{key}");
        }
    }

    #[test]
    fn k5_kubelet_labels_and_namespaces_and_other_domains_pass() {
        for key in [
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone",
            "node.kubernetes.io/instance-type",
            "node.kubernetes.io/gateway",
            "kubelet.kubernetes.io/x",
            "site.node.kubernetes.io/x",
            "example.com/site",
            "notkubernetes.io/x",
            "site",
        ] {
            assert_eq!(validate(&labels(&[(key, "v")])), Ok(()), "{key}");
        }
    }

    #[test]
    fn keys_and_values_are_checked_as_labels() {
        let error = validate(&labels(&[("-bad", "ok"), ("good", "bad value")])).unwrap_err();
        let Error::Invalid(problems) = error else { panic!("not invalid") };
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("'-bad' - name part must consist"), "{problems:?}");
        assert!(problems[1].starts_with("'bad value' - a valid label"), "{problems:?}");
        assert!(validate(&labels(&[("Example.com/x", "")])).is_err(), "an uppercase prefix");
        assert!(validate(&labels(&[("a/b/c", "")])).is_err());
        assert!(validate(&labels(&[(&"x".repeat(64), "")])).is_err());
        assert!(validate(&labels(&[("x", &"v".repeat(64))])).is_err());
    }

    proptest! {
        /// Outside the Kubernetes namespaces, any well-formed label passes.
        #[test]
        fn well_formed_labels_outside_kubernetes_namespaces_pass(
            prefix in "[a-z]{1,8}(\\.[a-z]{1,8}){0,2}",
            name in "[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?",
            value in "([A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?)?",
        ) {
            prop_assume!(!within(&prefix, "kubernetes.io") && !within(&prefix, "k8s.io"));
            let key = format!("{prefix}/{name}");
            prop_assert_eq!(validate(&labels(&[(&key, &value)])), Ok(()));
        }

        /// Inside them, a label passes exactly when a node may set it.
        #[test]
        fn kubernetes_labels_pass_exactly_when_kubelet_sets_them(
            sub in "(node|kubelet|node-role|topology|app)?",
            name in "[a-z]{1,8}",
        ) {
            let prefix = if sub.is_empty() { "kubernetes.io".to_owned() } else { format!("{sub}.kubernetes.io") };
            let key = format!("{prefix}/{name}");
            prop_assert_eq!(validate(&labels(&[(&key, "")])).is_ok(), is_kubelet_label(&key));
        }
    }
}
