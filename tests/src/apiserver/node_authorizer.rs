//! The Node authorizer, as kube-apiserver runs it for every node identity
//! (`--authorization-mode=Node,RBAC`, kubeadm's and k3s's default), with the rules it
//! falls back to (RBAC's `system:node` role, `bootstrappolicy.NodeRules()`).
//!
//! Written from `plugin/pkg/auth/authorizer/node/node_authorizer.go` and `graph.go`,
//! `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go` and
//! `pkg/auth/nodeidentifier/default.go`, as of Kubernetes 1.33:
//! - a node is a user named `system:node:<name>` in the group `system:nodes`; any other
//!   user gets no opinion from it (this server lets every other user through);
//! - Secrets and ConfigMaps: `get`, `list` and `watch` of one object a pod bound to the
//!   node refers to (a list or watch names it with `fieldSelector=metadata.name=<name>`,
//!   which the request's attributes take as its name, as `RequestInfoFactory` does);
//! - PersistentVolumeClaims and PersistentVolumes: `get` only ("can only get individual
//!   resources of this type"), of a claim a pod bound to the node uses and the volume
//!   bound to that claim; claims' `status` may be updated;
//! - service accounts: only `create` of the `token` subresource, for service accounts of
//!   pods bound to the node;
//! - Leases: `get`, `create`, `update`, `patch` and `delete` in `kube-node-lease`, of the
//!   node's own name (`create` is left to NodeRestriction);
//! - Nodes and pods (`AuthorizeNodeWithSelectors`, beta and on by default since 1.32;
//!   before it the node role let a node read every node and pod): its own Node only
//!   (`get`, `list`, `watch` by name; writes are left to NodeRestriction); pods listed or
//!   watched only with `fieldSelector=spec.nodeName=<node>`, got only when bound to it;
//!   pod create and delete, `pods/status` and `pods/eviction` are left to NodeRestriction;
//! - RuntimeClasses: `get`, `list` and `watch` of any (the `system:node` rule: a node
//!   reads the classes its pods name, D5);
//! - ClusterTrustBundles: `get`, `list` and `watch` of any, no subresource
//!   (`authorizeClusterTrustBundle`, with the `ClusterTrustBundleProjection` feature on,
//!   and the `system:node` rule it adds; V1);
//! - everything else by the `system:node` rules ([`NODE_RULES`]), and the discovery
//!   and self-review rules bound to `system:authenticated`.
//!
//! A refusal is a 403 with kube-apiserver's message (`responsewriters.Forbidden`):
//! `<resource> "<name>" is forbidden: User "system:node:n" cannot get resource
//! "secrets" in API group "" in the namespace "default": <reason>`.

mod graph;

#[cfg(test)]
mod tests;

pub use graph::{Vertex, references};

use super::authn::User;
use super::error::{Error, GroupResource};
use super::resource::Target;
use super::store::Store;

/// `system:node:` and the group every node is in (`nodeidentifier`).
pub const NODE_USER_PREFIX: &str = "system:node:";
pub const NODES_GROUP: &str = "system:nodes";
/// Where node Leases live (`api.NamespaceNodeLease`).
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// What a request asks, as an authorizer sees it (`authorizer.Attributes`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attributes {
    pub verb: String,
    /// Empty for a request that is not for a resource (`/version`, `/api`).
    pub resource: &'static str,
    pub group: &'static str,
    pub subresource: String,
    pub namespace: String,
    /// The object's name: from the path, or a list's or watch's `metadata.name` field
    /// selector.
    pub name: String,
    /// The field selector's exact requirements (`field=value`, `field==value`).
    pub fields: Vec<(String, String)>,
    /// The path, for a request that is not for a resource.
    pub path: String,
}

impl Attributes {
    /// The attributes of a request for `target` (with the audit `verb`, `query` and its
    /// `path`); `None` for a path that names no resource (`target` is `None`): a
    /// review (`group`/`resource` given) or a path of its own.
    pub fn of_request(
        target: Option<&Target>,
        review: Option<(&'static str, &'static str)>,
        verb: &str,
        path: &str,
        query: &[(String, String)],
    ) -> Attributes {
        let mut attrs = Attributes { verb: verb.to_owned(), ..Attributes::default() };
        if let Some((group, resource)) = review {
            (attrs.group, attrs.resource) = (group, resource);
            return attrs;
        }
        let Some(target) = target else {
            attrs.path = path.to_owned();
            return attrs;
        };
        attrs.group = target.resource.group;
        attrs.resource = target.resource.plural;
        attrs.subresource = target.subresource.clone().unwrap_or_default();
        attrs.namespace = target.namespace.clone().unwrap_or_default();
        attrs.name = target.name.clone().unwrap_or_default();
        let selector = query.iter().find(|(k, _)| k == "fieldSelector").map(|(_, v)| v.as_str());
        attrs.fields = selector.map(exact_requirements).unwrap_or_default();
        if attrs.name.is_empty() && matches!(verb, "list" | "watch" | "deletecollection") {
            // `RequestInfoFactory`: a list or watch of one name is a request for it.
            attrs.name = attrs.field("metadata.name").unwrap_or_default().to_owned();
        }
        attrs
    }

    fn is_resource_request(&self) -> bool {
        !self.resource.is_empty()
    }

    /// `resource` or `resource/subresource`.
    pub fn combined(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.to_owned()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    fn field(&self, field: &str) -> Option<&str> {
        self.fields.iter().find(|(f, _)| f == field).map(|(_, v)| v.as_str())
    }
}

/// The `field=value` and `field==value` requirements of a field selector.
fn exact_requirements(selector: &str) -> Vec<(String, String)> {
    selector
        .split(',')
        .filter(|term| !term.contains("!="))
        .filter_map(|term| {
            let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
            Some((field.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// The node a user is (`NodeIdentity`): `Some(name)` for a node (the name may be empty:
/// an unidentifiable node), `None` for any other user.
pub fn node_identity(user: &User) -> Option<&str> {
    let name = user.name().strip_prefix(NODE_USER_PREFIX)?;
    let groups = user.0.get("groups").and_then(serde_json::Value::as_array);
    let in_group = groups.is_some_and(|g| g.iter().any(|g| g.as_str() == Some(NODES_GROUP)));
    in_group.then_some(name)
}

/// An RBAC policy rule: verbs on resources (`resource` or `resource/subresource`) of
/// API groups.
#[derive(Debug)]
pub struct Rule {
    pub verbs: &'static [&'static str],
    pub groups: &'static [&'static str],
    pub resources: &'static [&'static str],
}

const READ: &[&str] = &["get", "list", "watch"];

/// `bootstrappolicy.NodeRules()` (1.33), less what this server does not serve (CSI
/// drivers and nodes, VolumeAttachments, DRA and pod certificates).
pub const NODE_RULES: &[Rule] = &[
    Rule { verbs: &["create"], groups: &["authentication.k8s.io"], resources: &["tokenreviews"] },
    Rule {
        verbs: &["create"],
        groups: &["authorization.k8s.io"],
        resources: &["subjectaccessreviews", "localsubjectaccessreviews"],
    },
    Rule { verbs: READ, groups: &[""], resources: &["services"] },
    Rule { verbs: &["create", "get", "list", "watch"], groups: &[""], resources: &["nodes"] },
    Rule { verbs: &["update", "patch"], groups: &[""], resources: &["nodes/status"] },
    Rule { verbs: &["update", "patch"], groups: &[""], resources: &["nodes"] },
    Rule { verbs: &["create", "update", "patch"], groups: &[""], resources: &["events"] },
    Rule { verbs: READ, groups: &[""], resources: &["pods"] },
    Rule { verbs: &["create", "delete"], groups: &[""], resources: &["pods"] },
    Rule { verbs: &["update", "patch"], groups: &[""], resources: &["pods/status"] },
    Rule { verbs: &["create"], groups: &[""], resources: &["pods/eviction"] },
    Rule { verbs: READ, groups: &[""], resources: &["secrets", "configmaps"] },
    Rule {
        verbs: &["get"],
        groups: &[""],
        resources: &["persistentvolumeclaims", "persistentvolumes"],
    },
    Rule { verbs: &["get"], groups: &[""], resources: &["endpoints"] },
    Rule {
        verbs: &["create", "get", "list", "watch"],
        groups: &["certificates.k8s.io"],
        resources: &["certificatesigningrequests"],
    },
    Rule {
        verbs: &["get", "create", "update", "patch", "delete"],
        groups: &["coordination.k8s.io"],
        resources: &["leases"],
    },
    Rule { verbs: &["create"], groups: &[""], resources: &["serviceaccounts/token"] },
    Rule {
        verbs: &["get", "update", "patch"],
        groups: &[""],
        resources: &["persistentvolumeclaims/status"],
    },
    // D5: any RuntimeClass (the graph does not cover them).
    Rule { verbs: READ, groups: &["node.k8s.io"], resources: &["runtimeclasses"] },
    // V1: any ClusterTrustBundle (`ClusterTrustBundleProjection`).
    Rule { verbs: READ, groups: &["certificates.k8s.io"], resources: &["clustertrustbundles"] },
];

/// What every authenticated user may do (`system:basic-user`, bound to
/// `system:authenticated`).
const AUTHENTICATED_RULES: &[Rule] = &[
    Rule {
        verbs: &["create"],
        groups: &["authorization.k8s.io"],
        resources: &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
    },
    Rule {
        verbs: &["create"],
        groups: &["authentication.k8s.io"],
        resources: &["selfsubjectreviews"],
    },
];

/// `system:discovery` and `system:public-info-viewer`'s paths (bound to
/// `system:authenticated`): `get` only; `/*` matches below the prefix.
const DISCOVERY_PATHS: &[&str] = &[
    "/livez",
    "/readyz",
    "/healthz",
    "/version",
    "/version/",
    "/openapi",
    "/openapi/*",
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
];

impl Rule {
    fn allows(&self, attrs: &Attributes) -> bool {
        let combined = attrs.combined();
        self.verbs.contains(&attrs.verb.as_str())
            && self.groups.contains(&attrs.group)
            && self.resources.contains(&combined.as_str())
    }
}

/// The Node authorizer's answer for a node's request: `Ok` to allow, else the reason
/// (possibly empty) of its "no opinion", which refuses it (no other authorizer allows a
/// node anything).
pub fn authorize(store: &Store, node: &str, attrs: &Attributes) -> Result<(), String> {
    if node.is_empty() {
        return Err(String::new());
    }
    if !attrs.is_resource_request() {
        return non_resource(attrs);
    }
    let subdivided = match (attrs.group, attrs.resource) {
        ("", "secrets") => Some(read_namespaced_object(store, node, Vertex::Secret, attrs)),
        ("", "configmaps") => Some(read_namespaced_object(store, node, Vertex::ConfigMap, attrs)),
        ("", "persistentvolumeclaims") if attrs.subresource == "status" => {
            Some(status_update(store, node, Vertex::PersistentVolumeClaim, attrs))
        }
        ("", "persistentvolumeclaims") => {
            Some(get(store, node, Vertex::PersistentVolumeClaim, attrs))
        }
        ("", "persistentvolumes") => Some(get(store, node, Vertex::PersistentVolume, attrs)),
        ("", "serviceaccounts") => Some(create_token(store, node, attrs)),
        ("coordination.k8s.io", "leases") => Some(lease(node, attrs)),
        ("", "nodes") => authorize_node(node, attrs),
        ("", "pods") => authorize_pod(store, node, attrs),
        _ => None,
    };
    if let Some(decision) = subdivided {
        return decision;
    }
    if NODE_RULES.iter().chain(AUTHENTICATED_RULES).any(|rule| rule.allows(attrs)) {
        return Ok(());
    }
    Err(String::new())
}

fn non_resource(attrs: &Attributes) -> Result<(), String> {
    let matches = |rule: &&str| match rule.strip_suffix('*') {
        Some(prefix) => attrs.path.starts_with(prefix),
        None => attrs.path == *rule,
    };
    if attrs.verb == "get" && DISCOVERY_PATHS.iter().any(matches) {
        return Ok(());
    }
    Err(String::new())
}

/// `authorizeReadNamespacedObject`.
fn read_namespaced_object(
    store: &Store,
    node: &str,
    start: Vertex,
    attrs: &Attributes,
) -> Result<(), String> {
    if !READ.contains(&attrs.verb.as_str()) {
        return Err("can only read resources of this type".into());
    }
    if !attrs.subresource.is_empty() {
        return Err("cannot read subresource".into());
    }
    if attrs.namespace.is_empty() {
        return Err("can only read namespaced object of this type".into());
    }
    related(store, node, start, attrs)
}

/// `authorizeGet`.
fn get(store: &Store, node: &str, start: Vertex, attrs: &Attributes) -> Result<(), String> {
    if attrs.verb != "get" {
        return Err("can only get individual resources of this type".into());
    }
    if !attrs.subresource.is_empty() {
        return Err("cannot get subresource".into());
    }
    related(store, node, start, attrs)
}

/// `authorizeStatusUpdate`.
fn status_update(
    store: &Store,
    node: &str,
    start: Vertex,
    attrs: &Attributes,
) -> Result<(), String> {
    if !matches!(attrs.verb.as_str(), "update" | "patch") {
        return Err("can only get/update/patch this type".into());
    }
    related(store, node, start, attrs)
}

/// `authorizeCreateToken`.
fn create_token(store: &Store, node: &str, attrs: &Attributes) -> Result<(), String> {
    if attrs.verb != "create" || attrs.name.is_empty() {
        return Err("can only create tokens for individual service accounts".into());
    }
    if attrs.subresource != "token" {
        return Err("can only create token subresource of serviceaccount".into());
    }
    graph::has_path(store, node, Vertex::ServiceAccount, &attrs.namespace, &attrs.name)
        .map_err(|_| no_relationship(node))
}

/// `authorizeLease`.
fn lease(node: &str, attrs: &Attributes) -> Result<(), String> {
    if !matches!(attrs.verb.as_str(), "get" | "create" | "update" | "patch" | "delete") {
        return Err("can only get, create, update, patch, or delete a node lease".into());
    }
    if attrs.namespace != NODE_LEASE_NAMESPACE {
        return Err(format!(
            "can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"
        ));
    }
    if attrs.verb != "create" && attrs.name != node {
        return Err("can only access node lease with the same name as the requesting node".into());
    }
    Ok(())
}

/// `authorizeNode` (`AuthorizeNodeWithSelectors`); `None` falls through to the rules.
fn authorize_node(node: &str, attrs: &Attributes) -> Option<Result<(), String>> {
    let verb = attrs.verb.as_str();
    match (attrs.subresource.as_str(), verb) {
        ("", "create" | "update" | "patch") | ("status", "update" | "patch") => Some(Ok(())),
        ("", "get" | "list" | "watch") => Some(match attrs.name.as_str() {
            name if name == node => Ok(()),
            "" => Err(format!("node '{node}' cannot read all nodes, only its own Node object")),
            other => Err(format!("node '{node}' cannot read '{other}', only its own Node object")),
        }),
        _ => Some(Err(String::new())),
    }
}

/// `authorizePod` (`AuthorizeNodeWithSelectors`).
fn authorize_pod(store: &Store, node: &str, attrs: &Attributes) -> Option<Result<(), String>> {
    let verb = attrs.verb.as_str();
    Some(match (attrs.subresource.as_str(), verb) {
        ("", "get") => get(store, node, Vertex::Pod, attrs),
        ("", "list" | "watch") => {
            if attrs.field("spec.nodeName") == Some(node) {
                Ok(())
            } else if !attrs.name.is_empty() {
                related(store, node, Vertex::Pod, attrs)
            } else {
                Err("can only list/watch pods with spec.nodeName field selector".into())
            }
        }
        ("", "create" | "delete") | ("status", "update" | "patch") | ("eviction", "create") => {
            Ok(())
        }
        _ => Err(String::new()),
    })
}

/// `authorize`: the object is named and reaches the node in the graph.
fn related(store: &Store, node: &str, start: Vertex, attrs: &Attributes) -> Result<(), String> {
    if attrs.name.is_empty() {
        return Err("No Object name found".into());
    }
    graph::has_path(store, node, start, &attrs.namespace, &attrs.name)
        .map_err(|_| no_relationship(node))
}

fn no_relationship(node: &str) -> String {
    format!("no relationship found between node '{node}' and this object")
}

/// The 403 kube-apiserver answers a refused request with.
pub fn forbidden(user: &User, attrs: &Attributes, reason: &str) -> Error {
    let user = user.name();
    let verb = &attrs.verb;
    let message = if !attrs.is_resource_request() {
        format!("User {user:?} cannot {verb} path {:?}", attrs.path)
    } else if attrs.namespace.is_empty() {
        format!(
            "User {user:?} cannot {verb} resource {:?} in API group {:?} at the cluster scope",
            attrs.combined(),
            attrs.group
        )
    } else {
        format!(
            "User {user:?} cannot {verb} resource {:?} in API group {:?} in the namespace {:?}",
            attrs.combined(),
            attrs.group,
            attrs.namespace
        )
    };
    let problem = if reason.is_empty() { message } else { format!("{message}: {reason}") };
    let resource = GroupResource { group: attrs.group, resource: attrs.resource };
    Error::Forbidden { resource, name: attrs.name.clone(), problem }
}
