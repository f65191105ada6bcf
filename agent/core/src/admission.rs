//! Admission (SEMANTICS.md A1): every field of a pod Outpost would not honour is found
//! before the pod runs, so that nothing is silently ignored.
//!
//! [`review`] walks the pod as JSON, field by field, against one table of the pod spec
//! (`fields`): each field is supported, refused (with why, or the issue that will add it),
//! ignored as kubelet ignores it (some with a warning), or decided by its value and the
//! node (`checks`: seccomp and AppArmor profiles, sysctls, `hostUsers`, ...). A field the
//! table does not know is refused: a newer pod spec cannot slip through. [`fields`] lists
//! the table for the book's field table (`docs/src/reference/pod-spec-fields.md`), which a
//! test keeps in step with it.
//!
//! [`policy`] then decides what the pod's source may do to the host (privileged
//! containers, host namespaces, hostPath volumes), per source, as the node's config says.
//!
//! [`priority`] is the pod's priority as the eviction issue ranks pods by it.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::pod::Source;

mod checks;
mod ephemeral;
pub mod policy;
mod restart;
mod review;
pub mod sysctl;
mod table;
mod walk;

pub use self::policy::{Policy, SourcePolicy};
pub use self::sysctl::check_allowed_pattern as check_allowed_unsafe_sysctl;

/// What the node can do, as admission needs to know it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    pub apparmor_enabled: bool,
    /// The host has SELinux enabled (`outpost_host::selinux_enabled`): `seLinuxOptions`
    /// would have to label processes and mounts, which Outpost does not do.
    pub selinux_enabled: bool,
    /// kubelet's --allowed-unsafe-sysctls: names or prefixes ending in `*` ("net.core.*").
    pub allowed_unsafe_sysctls: Vec<String>,
    /// What each source's pods may do to the host.
    pub policy: Policy,
    /// K2: the node has cluster DNS (`clusterDNS`), which `ClusterFirst` pods get.
    pub cluster_dns: bool,
}

impl NodeFacts {
    /// A node that allows all a node can: AppArmor enabled, every namespaced sysctl
    /// allowed, every source allowed everything. What a manifest alone is checked against,
    /// before the node is known (`outpost_core::manifest`): the host-dependent refusals
    /// and the node's policy are left to the node.
    pub fn permissive() -> Self {
        NodeFacts {
            apparmor_enabled: true,
            selinux_enabled: false,
            allowed_unsafe_sysctls: sysctl::ALL_NAMESPACED.iter().map(|&p| p.to_owned()).collect(),
            policy: Policy::unrestricted(),
            cluster_dns: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Refused,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The field's path, e.g. `spec.containers[1].resizePolicy`.
    pub field: String,
    pub severity: Severity,
    /// The pod status reason when refused, kubelet's where kubelet has one
    /// ("SysctlForbidden", "AppArmor"), else "UnsupportedField".
    pub reason: &'static str,
    /// What is wrong and what to do, naming the field.
    pub message: String,
}

/// The reason of a refused field kubelet has no reason of its own for.
pub const UNSUPPORTED_FIELD: &str = "UnsupportedField";

/// The annotation the API source puts on an API pod whose JSON has fields in a
/// `securityContext` that this Outpost's Pod type does not know (S12): their paths,
/// comma-separated. Parsing has dropped them from the pod, so admission refuses it here.
pub const UNKNOWN_SECURITY_FIELDS: &str = "outpost.dev/unknown-security-fields";

/// How the book's field table classes a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Honoured as kubelet honours it (some values may still be refused).
    Supported,
    /// Refused when set (some values may be accepted, e.g. `hostUsers: true`).
    Refused,
    /// Ignored, as kubelet ignores it (some with a warning).
    Ignored,
}

impl Class {
    /// As the book's table writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Supported => "supported",
            Class::Refused => "refused",
            Class::Ignored => "ignored",
        }
    }
}

/// Every field of the pod Outpost would not honour (Refused) or honours differently from
/// what a user may expect where kubelet would also run the pod (Warning). A static pod
/// (`source`) that refers to an API object is refused (V2); so is what the node's policy
/// does not allow `source` ([`policy::review`]).
pub fn review(pod: &Pod, facts: &NodeFacts, source: Source) -> Vec<Finding> {
    let mut review = review::Review::new(pod, facts, source);
    // A k8s-openapi value always serializes (string keys, no non-finite floats).
    if let Ok(Value::Object(fields)) = serde_json::to_value(pod) {
        review.walk(table::POD, "", "", &fields);
    }
    let mut findings = review.findings;
    findings.extend(unknown_security_fields(pod));
    findings.extend(policy::review(pod, source, &facts.policy));
    findings
}

/// A refusal for each field [`UNKNOWN_SECURITY_FIELDS`] lists (S12).
fn unknown_security_fields(pod: &Pod) -> Vec<Finding> {
    let listed = pod.metadata.annotations.as_ref().and_then(|a| a.get(UNKNOWN_SECURITY_FIELDS));
    let fields = listed.map(|list| list.split(',').filter(|f| !f.is_empty())).into_iter().flatten();
    fields
        .map(|field| Finding {
            field: field.to_owned(),
            severity: Severity::Refused,
            reason: UNSUPPORTED_FIELD,
            message: format!(
                "{field}: unknown field in a securityContext: the API server sent a security setting this Outpost cannot read, and running without it could weaken isolation; upgrade Outpost or remove the field"
            ),
        })
        .collect()
}

/// Whether any finding refuses the pod.
pub fn refuses(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Refused)
}

/// kubelet's built-in priority classes, known without an API server.
pub const SYSTEM_NODE_CRITICAL: (&str, i32) = ("system-node-critical", 2_000_001_000);
pub const SYSTEM_CLUSTER_CRITICAL: (&str, i32) = ("system-cluster-critical", 2_000_000_000);

/// The pod's priority: spec.priority, else by priorityClassName for the built-in
/// system-node-critical (2000001000) and system-cluster-critical (2000000000), else 0.
pub fn priority(pod: &Pod) -> i32 {
    let spec = pod.spec.as_ref();
    if let Some(priority) = spec.and_then(|s| s.priority) {
        return priority;
    }
    builtin_priority(spec.and_then(|s| s.priority_class_name.as_deref()).unwrap_or_default())
        .unwrap_or(0)
}

/// The priority of a built-in priority class.
fn builtin_priority(class: &str) -> Option<i32> {
    [SYSTEM_NODE_CRITICAL, SYSTEM_CLUSTER_CRITICAL]
        .into_iter()
        .find_map(|(name, value)| (name == class).then_some(value))
}

/// The table, as the book lists it: each field's path (a container's fields under
/// `spec.containers[]`, standing for init containers' too; annotations as
/// `metadata.annotations[KEY]`) and its class.
pub fn fields() -> impl Iterator<Item = (String, Class)> {
    let pod = table::POD.iter().map(|(path, rule)| ((*path).to_owned(), rule.class()));
    let container = table::CONTAINER
        .iter()
        .map(|(path, rule)| (format!("spec.containers[].{path}"), rule.class()));
    let annotations = table::ANNOTATIONS
        .iter()
        .map(|(key, rule)| (format!("metadata.annotations[{key}]"), rule.class()));
    pod.chain(container).chain(annotations)
}

#[cfg(test)]
mod tests;
