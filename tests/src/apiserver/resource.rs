//! The resources the server serves, what the real API server's registry says of each
//! (scope, status subresource, selectable fields, delete and update behaviour), and the
//! parsing of a request path into the object it names.

use serde_json::Value;

use super::error::GroupResource;

/// One served resource (a row of the real server's REST storage registry).
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceType {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Has a `/status` subresource: main-resource writes keep the old `.status`.
    pub status: bool,
    /// Field selector labels besides `metadata.name` and `metadata.namespace`.
    pub fields: &'static [&'static str],
    /// PUT of a missing object creates it (`AllowCreateOnUpdate`).
    pub create_on_update: bool,
    /// DELETE answers with the object instead of a `Status` (`ReturnDeletedObject`).
    pub returns_deleted: bool,
}

pub static PODS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "pods",
    kind: "Pod",
    namespaced: true,
    status: true,
    fields: &[
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ],
    create_on_update: false,
    returns_deleted: true,
};

pub static NODES: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "nodes",
    kind: "Node",
    namespaced: false,
    status: true,
    fields: &["spec.unschedulable"],
    create_on_update: false,
    returns_deleted: false,
};

pub static LEASES: ResourceType = ResourceType {
    group: "coordination.k8s.io",
    version: "v1",
    plural: "leases",
    kind: "Lease",
    namespaced: true,
    status: false,
    fields: &[],
    create_on_update: true,
    returns_deleted: false,
};

pub static EVENTS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "events",
    kind: "Event",
    namespaced: true,
    status: false,
    fields: &[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ],
    create_on_update: true,
    returns_deleted: false,
};

/// `events.k8s.io/v1`. Simplified: stored apart from core/v1 events (the real server
/// keeps one store and converts), so an event written through one API is not seen
/// through the other.
pub static EVENTS_V1: ResourceType = ResourceType {
    group: "events.k8s.io",
    version: "v1",
    plural: "events",
    kind: "Event",
    namespaced: true,
    status: false,
    fields: &[
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "reason",
        "reportingController",
        "type",
    ],
    create_on_update: true,
    returns_deleted: false,
};

pub static CONFIGMAPS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "configmaps",
    kind: "ConfigMap",
    namespaced: true,
    status: false,
    fields: &[],
    create_on_update: false,
    returns_deleted: false,
};

pub static SECRETS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "secrets",
    kind: "Secret",
    namespaced: true,
    status: false,
    fields: &["type"],
    create_on_update: false,
    returns_deleted: false,
};

/// Also serves the `token` subresource (a `TokenRequest`, POST only).
pub static SERVICEACCOUNTS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "serviceaccounts",
    kind: "ServiceAccount",
    namespaced: true,
    status: false,
    fields: &[],
    create_on_update: false,
    returns_deleted: false,
};

/// K1: Services (the registry's defaults and cluster IPs: `services`). The real
/// server selects them by `spec.clusterIP` and `spec.type` too, and a delete answers
/// with the deleted Service.
pub static SERVICES: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "services",
    kind: "Service",
    namespaced: true,
    status: true,
    fields: &["spec.clusterIP", "spec.type"],
    create_on_update: false,
    returns_deleted: true,
};

/// K3. Its create resets `.status` to `phase: Pending`, as the real strategy does.
pub static PERSISTENTVOLUMECLAIMS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "persistentvolumeclaims",
    kind: "PersistentVolumeClaim",
    namespaced: true,
    status: true,
    fields: &[],
    create_on_update: false,
    returns_deleted: false,
};

/// K3: cluster-scoped. Its create resets `.status` to `phase: Pending` (with
/// `lastPhaseTransitionTime`), as the real strategy does.
pub static PERSISTENTVOLUMES: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "persistentvolumes",
    kind: "PersistentVolume",
    namespaced: false,
    status: true,
    fields: &[],
    create_on_update: false,
    returns_deleted: false,
};

/// Also serves the `approval` subresource (module `csr`).
pub static CERTIFICATESIGNINGREQUESTS: ResourceType = ResourceType {
    group: "certificates.k8s.io",
    version: "v1",
    plural: "certificatesigningrequests",
    kind: "CertificateSigningRequest",
    namespaced: false,
    status: true,
    fields: &["spec.signerName"],
    create_on_update: false,
    returns_deleted: false,
};

/// D5: cluster-scoped; a node reads the RuntimeClasses its pods name.
pub static RUNTIMECLASSES: ResourceType = ResourceType {
    group: "node.k8s.io",
    version: "v1",
    plural: "runtimeclasses",
    kind: "RuntimeClass",
    namespaced: false,
    status: false,
    fields: &[],
    create_on_update: false,
    returns_deleted: false,
};

/// V1: cluster-scoped; `certificates.k8s.io/v1beta1`, as kube-apiserver 1.33 serves it
/// with the `ClusterTrustBundle` feature on. Selectable by `spec.signerName`.
pub static CLUSTERTRUSTBUNDLES: ResourceType = ResourceType {
    group: "certificates.k8s.io",
    version: "v1beta1",
    plural: "clustertrustbundles",
    kind: "ClusterTrustBundle",
    namespaced: false,
    status: false,
    fields: &["spec.signerName"],
    create_on_update: false,
    returns_deleted: false,
};

/// Every served resource.
pub static RESOURCES: [&ResourceType; 14] = [
    &PODS,
    &NODES,
    &LEASES,
    &EVENTS,
    &EVENTS_V1,
    &CONFIGMAPS,
    &SECRETS,
    &SERVICEACCOUNTS,
    &SERVICES,
    &PERSISTENTVOLUMECLAIMS,
    &PERSISTENTVOLUMES,
    &CERTIFICATESIGNINGREQUESTS,
    &RUNTIMECLASSES,
    &CLUSTERTRUSTBUNDLES,
];

impl ResourceType {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The name errors use.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource { group: self.group, resource: self.plural }
    }

    /// `plural` or `plural.group`, as `kubectl` and [`lookup`] spell it.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether `label` may be used in a field selector on this resource.
    pub fn selectable(&self, label: &str) -> bool {
        label == "metadata.name"
            || (self.namespaced && label == "metadata.namespace")
            || self.fields.contains(&label)
    }

    /// The value of a selectable field, as the real server renders it: missing strings
    /// are `""`, booleans `"true"`/`"false"`.
    pub fn field_value(&self, object: &Value, label: &str) -> String {
        let path = match label {
            "source" if self == &EVENTS => "source.component",
            other => other,
        };
        let value = path.split('.').try_fold(object, |v, key| v.get(key));
        match value {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ if matches!(label, "spec.hostNetwork" | "spec.unschedulable") => "false".into(),
            _ => String::new(),
        }
    }
}

/// The resource named `plural` or `plural.group` (`pods`, `leases`,
/// `events.events.k8s.io`; a bare `events` is core/v1).
pub fn lookup(name: &str) -> Option<&'static ResourceType> {
    RESOURCES.iter().copied().find(|r| r.plural == name || r.qualified_name() == name)
}

/// The resource whose objects have this `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceType> {
    RESOURCES.iter().copied().find(|r| r.api_version() == api_version && r.kind == kind)
}

fn by_path(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .copied()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// What a resource request path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub resource: &'static ResourceType,
    /// `None` for cluster-scoped resources and all-namespace collections.
    pub namespace: Option<String>,
    /// `None` for the collection.
    pub name: Option<String>,
    /// `status`, or `token` of a service account.
    pub subresource: Option<String>,
}

/// Why a path names no served object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// Not under `/api/v1` or `/apis/{group}/{version}`, or an unknown resource.
    NotFound,
    /// A subresource this server does not serve (`pods/log`, `pods/exec`, …).
    Subresource,
}

/// Parses `/api/v1/...` and `/apis/{group}/{version}/...` into a [`Target`].
///
/// Simplified: path segments are not percent-decoded (Kubernetes names never need it).
pub fn parse_path(path: &str) -> Result<Target, PathError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(PathError::NotFound),
    };
    let (namespace, rest) = match rest {
        ["namespaces", namespace, plural, more @ ..] => {
            (Some(*namespace), [&[*plural], more].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let (plural, name, subresource) = match rest.as_slice() {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return Err(PathError::NotFound),
    };
    let resource = by_path(group, version, plural).ok_or(PathError::NotFound)?;
    if resource.namespaced != namespace.is_some() && (name.is_some() || !resource.namespaced) {
        return Err(PathError::NotFound);
    }
    if name.is_some_and(str::is_empty) || namespace.is_some_and(str::is_empty) {
        return Err(PathError::NotFound);
    }
    match subresource {
        Some("status") if resource.status => {}
        Some("token") if resource == &SERVICEACCOUNTS && name.is_some() => {}
        Some("approval") if resource == &CERTIFICATESIGNINGREQUESTS && name.is_some() => {}
        Some(super::ephemeral::SUBRESOURCE | super::resize::SUBRESOURCE)
            if resource == &PODS && name.is_some() => {}
        Some(_) => return Err(PathError::Subresource),
        None => {}
    }
    Ok(Target {
        resource,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        subresource: subresource.map(str::to_string),
    })
}
