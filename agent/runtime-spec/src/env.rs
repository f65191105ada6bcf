//! The container's environment: the image's (with containerd's default `PATH` when it
//! has none), then the container's `envFrom` (ConfigMaps and Secrets, see `objects`),
//! then its `env` (later wins, in place), with kubelet's `$(VAR)` expansion, the
//! downward API (`fieldRef`, `resourceFieldRef`) and the keys of ConfigMaps and Secrets
//! (`configMapKeyRef`, `secretKeyRef`); then the Service variables (K1, `services`) the
//! container does not define itself, which `$(VAR)` also sees, after its own.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, ObjectFieldSelector};
use oci_spec::image::Config;

use super::context::PodContext;
use super::error::{Error, Result};
use super::expansion;
use super::selector::{resource_field_ref, subscript};
use super::subject::Subject;

/// containerd's `PATH` for an image that sets none.
const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

mod files;
mod objects;

pub use self::files::file_key_refs;
pub(super) use self::objects::invalid_names;
use super::context::EnvFiles;

/// The container's environment as `NAME=value` strings, and the values of the
/// container's own variables (what `$(VAR)` in command and args refers to).
#[derive(Debug, Default)]
pub(super) struct Environment {
    pub(super) entries: Vec<String>,
    pub(super) container_vars: HashMap<String, String>,
}

impl Environment {
    /// The value of one of the container's variables.
    pub(super) fn var(&self, name: &str) -> Option<&str> {
        self.container_vars.get(name).map(String::as_str)
    }
}

pub(super) fn environment(
    ctx: &PodContext<'_>,
    container: &Container,
    image: Option<&Config>,
    devices: &[(String, String)],
    env_files: &EnvFiles,
    at: &Subject,
) -> Result<Environment> {
    let mut entries: Vec<String> = image.and_then(|c| c.env().clone()).unwrap_or_default();
    if !entries.iter().any(|e| e.starts_with("PATH=")) {
        entries.insert(0, DEFAULT_PATH.to_owned());
    }
    // D2: the device plugins' variables (kubelet puts them before the container's own).
    for (name, value) in devices {
        set(&mut entries, name, value);
    }
    let mut container_vars: HashMap<String, String> = HashMap::new();
    // kubelet: envFrom first (a later source wins), then env, which wins over envFrom;
    // `$(VAR)` in env sees both.
    for (name, value) in objects::env_from(ctx.pod, container, ctx.resolved, at)?.vars {
        set(&mut entries, &name, &value);
        container_vars.insert(name, value);
    }
    for var in container.env.iter().flatten() {
        let value = match var.value.as_deref() {
            Some(value) if !value.is_empty() => expansion::expand(value, |name| {
                container_vars.get(name).or_else(|| ctx.services.get(name)).map(String::as_str)
            }),
            _ => match &var.value_from {
                Some(source) => match value_from(ctx, container, var, source, env_files, at)? {
                    Some(value) => value,
                    // An optional key or object that is missing: no variable.
                    None => continue,
                },
                None => String::new(),
            },
        };
        set(&mut entries, &var.name, &value);
        container_vars.insert(var.name.clone(), value);
    }
    // K1: kubelet appends the Service variables the container does not define; they
    // are part of the environment `$(VAR)` in command and args sees.
    for (name, value) in ctx.services {
        if !container_vars.contains_key(name) {
            set(&mut entries, name, value);
            container_vars.insert(name.clone(), value.clone());
        }
    }
    Ok(Environment { entries, container_vars })
}

/// Replaces `name`'s entry in place, or appends one.
fn set(entries: &mut Vec<String>, name: &str, value: &str) {
    let entry = format!("{name}={value}");
    let same = |e: &String| e.split_once('=').map_or(e.as_str(), |(n, _)| n) == name;
    match entries.iter_mut().find(|e| same(e)) {
        Some(existing) => *existing = entry,
        None => entries.push(entry),
    }
}

/// The value of a `valueFrom`; `None` for an optional key (or object) that is missing.
fn value_from(
    ctx: &PodContext<'_>,
    container: &Container,
    var: &EnvVar,
    source: &EnvVarSource,
    env_files: &EnvFiles,
    at: &Subject,
) -> Result<Option<String>> {
    if let Some(field) = &source.field_ref {
        let value = field_ref(ctx, field).ok_or_else(|| Error::FieldPath {
            at: at.clone(),
            name: var.name.clone(),
            path: field.field_path.clone(),
        })?;
        Ok(Some(value))
    } else if let Some(resource) = &source.resource_field_ref {
        let field = format!("env {}", var.name);
        Ok(Some(resource_field_ref(ctx.pod, Some(container), &field, resource, at)?))
    } else if let Some(key) = &source.config_map_key_ref {
        objects::config_map_key(ctx.pod, ctx.resolved, key, at)
    } else if let Some(key) = &source.secret_key_ref {
        objects::secret_key(ctx.pod, ctx.resolved, key, at)
    } else if let Some(selector) = &source.file_key_ref {
        files::file_key(env_files, &var.name, selector, at)
    } else {
        Err(Error::EmptyEnvSource { at: at.clone(), name: var.name.clone() })
    }
}

/// The downward API's fields, as kubelet's `podFieldSelectorRuntimeValue`; `None` for a
/// path it does not support.
fn field_ref(ctx: &PodContext<'_>, field: &ObjectFieldSelector) -> Option<String> {
    let pod = ctx.pod;
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let ips = || ctx.pod_ips.iter().map(ToString::to_string).collect::<Vec<_>>();
    let owned = |value: Option<&String>| value.cloned().unwrap_or_default();
    let path = field.field_path.as_str();
    if let Some(key) = subscript(path, "metadata.labels") {
        return Some(owned(meta.labels.as_ref().and_then(|m| m.get(key))));
    }
    if let Some(key) = subscript(path, "metadata.annotations") {
        return Some(owned(meta.annotations.as_ref().and_then(|m| m.get(key))));
    }
    Some(match path {
        "metadata.name" => owned(meta.name.as_ref()),
        "metadata.namespace" => owned(meta.namespace.as_ref()),
        "metadata.uid" => owned(meta.uid.as_ref()),
        "spec.nodeName" => ctx.node_name.to_owned(),
        "spec.serviceAccountName" => owned(spec.and_then(|s| s.service_account_name.as_ref())),
        "status.podIP" => ips().into_iter().next().unwrap_or_default(),
        "status.podIPs" => ips().join(","),
        "status.hostIP" | "status.hostIPs" => {
            ctx.host_ip.map(|ip| ip.to_string()).unwrap_or_default()
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
