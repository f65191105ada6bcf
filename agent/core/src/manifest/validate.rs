//! A useful subset of kubelet's static pod validation (Kubernetes `ValidatePodCreate`),
//! run on the defaulted pod. Every problem of a pod is reported, not just the first.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::Error;

/// The pod's problems, with field paths under `prefix` (`items[2].` in a list) and no
/// position yet.
pub(super) fn validate(pod: &Pod, prefix: &str) -> Vec<Error> {
    let mut check = Check { prefix, errors: Vec::new() };
    check.metadata(pod);
    // Defaulting (S4) always leaves a spec.
    let no_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&no_spec);
    check.restart_policy(spec.restart_policy.as_deref());
    check.hostname_override(spec);
    let volumes = check.volumes(spec.volumes.iter().flatten().map(|v| v.name.as_str()));
    if spec.containers.is_empty() {
        check.invalid("spec.containers", "required: a pod needs at least one container".to_owned());
    }
    let containers = [
        ("spec.containers", spec.containers.as_slice()),
        ("spec.initContainers", spec.init_containers.as_deref().unwrap_or_default()),
    ];
    check.containers(&containers, &volumes);
    check.errors
}

struct Check<'a> {
    prefix: &'a str,
    errors: Vec<Error>,
}

impl Check<'_> {
    fn invalid(&mut self, field: &str, message: String) {
        self.errors.push(Error::Invalid {
            field: format!("{}{field}", self.prefix),
            message,
            position: None,
        });
    }

    fn metadata(&mut self, pod: &Pod) {
        match pod.metadata.name.as_deref() {
            // S1
            None | Some("") => self
                .errors
                .push(Error::MissingName { field: self.prefix.to_owned(), position: None }),
            Some(name) => {
                if let Err(why) = dns1123_subdomain(name) {
                    self.invalid(
                        "metadata.name",
                        format!("{name:?} (the manifest's name, \"-\" and the node name) {why}"),
                    );
                }
            }
        }
        if let Some(namespace) = pod.metadata.namespace.as_deref()
            && let Err(why) = dns1123_label(namespace)
        {
            self.invalid(
                "metadata.namespace",
                format!("{namespace:?} {why}; use a namespace name such as \"kube-system\""),
            );
        }
    }

    fn restart_policy(&mut self, policy: Option<&str>) {
        match policy {
            None | Some("" | "Always" | "OnFailure" | "Never") => {}
            Some(other) => self.invalid(
                "spec.restartPolicy",
                format!("{other:?} is not supported; use Always, OnFailure or Never"),
            ),
        }
    }

    /// The API server's rules for `hostnameOverride` (KEP-4762): an RFC 1123 subdomain of
    /// at most 64 characters (the kernel's nodename), neither with `setHostnameAsFQDN`
    /// (which names the pod by its subdomain) nor with `hostNetwork` (the node's hostname).
    fn hostname_override(&mut self, spec: &PodSpec) {
        let Some(hostname) = spec.hostname_override.as_deref() else { return };
        let field = "spec.hostnameOverride";
        if hostname.len() > MAX_HOSTNAME_OVERRIDE {
            let length = hostname.len();
            self.invalid(
                field,
                format!(
                    "{hostname:?} is {length} characters long: use at most \
                     {MAX_HOSTNAME_OVERRIDE}, what the kernel's hostname holds"
                ),
            );
        } else if hostname.is_empty() {
            self.invalid(field, "is empty: name the hostname, or remove the field".to_owned());
        } else if let Err(why) = dns1123_subdomain(hostname) {
            self.invalid(field, format!("{hostname:?} {why}"));
        }
        if spec.set_hostname_as_fqdn == Some(true) {
            self.invalid(
                "spec.setHostnameAsFQDN",
                "cannot be set with spec.hostnameOverride, which is the pod's whole hostname; \
                 remove one of them"
                    .to_owned(),
            );
        }
        if spec.host_network == Some(true) {
            self.invalid(
                field,
                "cannot be set with spec.hostNetwork: true, where the pod has the node's \
                 hostname; remove one of them"
                    .to_owned(),
            );
        }
    }

    /// Checks volume names; returns the declared ones (valid or not, so that a mount of
    /// a misnamed volume is reported once, at the volume).
    fn volumes<'p>(&mut self, names: impl Iterator<Item = &'p str>) -> HashMap<&'p str, usize> {
        let mut declared = HashMap::new();
        for (i, name) in names.enumerate() {
            let field = format!("spec.volumes[{i}].name");
            match declared.entry(name) {
                Entry::Occupied(first) => self.invalid(
                    &field,
                    format!(
                        "duplicate name {name:?} (also spec.volumes[{}]); give each volume a unique name",
                        first.get()
                    ),
                ),
                Entry::Vacant(slot) => {
                    slot.insert(i);
                    if let Err(why) = dns1123_label(name) {
                        self.invalid(&field, format!("{name:?} {why}"));
                    }
                }
            }
        }
        declared
    }

    fn containers(&mut self, lists: &[(&str, &[Container])], volumes: &HashMap<&str, usize>) {
        let mut names: HashMap<&str, String> = HashMap::new();
        for &(list, containers) in lists {
            for (i, container) in containers.iter().enumerate() {
                let at = format!("{list}[{i}]");
                let name = container.name.as_str();
                if let Err(why) = dns1123_label(name) {
                    self.invalid(&format!("{at}.name"), format!("{name:?} {why}"));
                } else if let Some(first) = names.get(name) {
                    self.invalid(
                        &format!("{at}.name"),
                        format!(
                            "duplicate name {name:?} (also {first}); give each container and init container a unique name"
                        ),
                    );
                } else {
                    names.insert(name, at.clone());
                }
                self.container(&at, container, volumes);
            }
        }
    }

    fn container(&mut self, at: &str, container: &Container, volumes: &HashMap<&str, usize>) {
        if container.image.as_deref().is_none_or(|image| image.trim().is_empty()) {
            self.invalid(
                &format!("{at}.image"),
                "required: name the container image, e.g. \"registry.k8s.io/pause:3.10\""
                    .to_owned(),
            );
        }
        for (i, port) in container.ports.iter().flatten().enumerate() {
            if !(1..=65535).contains(&port.container_port) {
                self.invalid(
                    &format!("{at}.ports[{i}].containerPort"),
                    format!("{} is out of range; use a port from 1 to 65535", port.container_port),
                );
            }
            if let Some(host_port) = port.host_port
                && !(0..=65535).contains(&host_port)
            {
                self.invalid(
                    &format!("{at}.ports[{i}].hostPort"),
                    format!(
                        "{host_port} is out of range; use a port from 1 to 65535, or 0 for none"
                    ),
                );
            }
        }
        for (i, mount) in container.volume_mounts.iter().flatten().enumerate() {
            if !volumes.contains_key(mount.name.as_str()) {
                self.invalid(
                    &format!("{at}.volumeMounts[{i}].name"),
                    format!(
                        "volume {:?} is not declared; add it to spec.volumes or fix the name",
                        mount.name
                    ),
                );
            }
            if mount.mount_path.is_empty() {
                self.invalid(
                    &format!("{at}.volumeMounts[{i}].mountPath"),
                    "required: the path in the container to mount the volume at".to_owned(),
                );
            }
            let sub_path = mount.sub_path.as_deref().unwrap_or_default();
            let expr = mount.sub_path_expr.as_deref().unwrap_or_default();
            if !sub_path.is_empty() && !expr.is_empty() {
                self.invalid(
                    &format!("{at}.volumeMounts[{i}].subPathExpr"),
                    "subPathExpr and subPath are mutually exclusive; keep one".to_owned(),
                );
            }
            for (field, value) in [("subPath", sub_path), ("subPathExpr", expr)] {
                if let Some(problem) = local_descending_path(value) {
                    self.invalid(&format!("{at}.volumeMounts[{i}].{field}"), problem.to_owned());
                }
            }
        }
        for (i, var) in container.env.iter().flatten().enumerate() {
            let Some(selector) = var.value_from.as_ref().and_then(|v| v.file_key_ref.as_ref())
            else {
                continue;
            };
            let field = format!("{at}.env[{i}].valueFrom.fileKeyRef");
            if !volumes.contains_key(selector.volume_name.as_str()) {
                let volume = &selector.volume_name;
                let message = format!(
                    "volumeName: volume {volume:?} is not declared; name one of spec.volumes, \
                     usually the emptyDir an init container writes the env file into"
                );
                self.invalid(&field, message);
            }
            if selector.path.is_empty() {
                self.invalid(
                    &format!("{field}.path"),
                    "required: the env file's path in the volume".to_owned(),
                );
            } else if let Some(problem) = local_descending_path(&selector.path) {
                self.invalid(&format!("{field}.path"), problem.to_owned());
            }
            if let Some(problem) = env_file_key(&selector.key) {
                self.invalid(&format!("{field}.key"), problem.to_owned());
            }
        }
        // Probes and hooks Outpost cannot run are refused, not ignored (A1).
        for (field, message) in crate::probe::check(at, container) {
            self.invalid(&field, message);
        }
    }
}

/// kube-apiserver's `validateLocalDescendingPath`: a path inside a volume is relative and
/// never steps out of it.
fn local_descending_path(path: &str) -> Option<&'static str> {
    if path.starts_with('/') {
        Some("must be a relative path inside the volume")
    } else if path.split('/').any(|part| part == "..") {
        Some("must not contain '..'")
    } else {
        None
    }
}

/// The longest key of an env file the API server takes (`EnvFiles`, alpha).
const MAX_ENV_FILE_KEY: usize = 128;

/// A key of an env file, as the API server checks `fileKeyRef.key`: required, at most
/// [`MAX_ENV_FILE_KEY`] printable ASCII characters, without `=`.
fn env_file_key(key: &str) -> Option<&'static str> {
    if key.is_empty() {
        Some("required: the variable's key in the env file")
    } else if key.len() > MAX_ENV_FILE_KEY {
        Some("must be no more than 128 characters")
    } else if !key.bytes().all(|b| b.is_ascii_graphic() && b != b'=') {
        Some("must consist of printable ASCII characters other than '='")
    } else {
        None
    }
}

const LABEL: &str = "is not a valid name: use at most 63 lowercase letters, digits and '-', \
starting and ending with a letter or digit";

const SUBDOMAIN: &str = "is not a valid name: use at most 253 lowercase letters, digits, '-' \
and '.', each part between dots starting and ending with a letter or digit";

/// The longest `hostnameOverride` the API server takes (the kernel's nodename).
const MAX_HOSTNAME_OVERRIDE: usize = 64;

/// An RFC 1123 label, as Kubernetes checks names of containers, volumes and namespaces.
fn dns1123_label(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        Err("is empty: a name is required")
    } else if value.len() <= 63 && is_label(value) {
        Ok(())
    } else {
        Err(LABEL)
    }
}

/// An RFC 1123 subdomain, as Kubernetes checks object names: labels joined by dots.
pub(crate) fn dns1123_subdomain(value: &str) -> Result<(), &'static str> {
    if value.len() <= 253 && value.split('.').all(is_label) { Ok(()) } else { Err(SUBDOMAIN) }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, without a length limit.
fn is_label(value: &str) -> bool {
    let alphanumeric = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = value.as_bytes();
    bytes.first().is_some_and(alphanumeric)
        && bytes.last().is_some_and(alphanumeric)
        && bytes.iter().all(|b| alphanumeric(b) || *b == b'-')
}
