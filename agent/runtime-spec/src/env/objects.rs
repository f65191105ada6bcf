//! Variables from ConfigMaps and Secrets, as kubelet's `makeEnvironmentVariables` makes
//! them: `envFrom` (every key, with the `prefix`; keys that are not valid variable names
//! are left out, with a warning), `configMapKeyRef` and `secretKeyRef`. A missing object
//! or key fails the container (`CreateContainerConfigError`) unless `optional`; then
//! the variables are not set.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapKeySelector, Container, EnvFromSource, Pod, SecretKeySelector,
};

use crate::error::{Error, Result};
use crate::projection::{self, Resolved};
use crate::subject::Subject;

/// The variables of the container's `envFrom`, and kubelet's warnings for the keys left
/// out.
#[derive(Debug, Default)]
pub(super) struct EnvFrom {
    /// By name; a later source's value wins.
    pub(super) vars: BTreeMap<String, String>,
    pub(super) invalid_names: Vec<String>,
}

pub(super) fn env_from(
    pod: &Pod,
    container: &Container,
    resolved: &Resolved,
    at: &Subject,
) -> Result<EnvFrom> {
    let namespace = namespace(pod);
    let mut env = EnvFrom::default();
    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.as_deref().unwrap_or_default();
        let Some((kind, name, data)) = source_data(namespace, source, resolved, at)? else {
            continue;
        };
        let mut invalid = Vec::new();
        for (key, value) in data {
            let var = format!("{prefix}{key}");
            if is_env_var_name(&var) {
                env.vars.insert(var, value);
            } else {
                invalid.push(var);
            }
        }
        if !invalid.is_empty() {
            env.invalid_names.push(format!(
                "Keys [{}] from the EnvFrom {kind} {namespace}/{name} were skipped since they are \
                 considered invalid environment variable names.",
                invalid.join(", ")
            ));
        }
    }
    Ok(env)
}

/// An `envFrom` source's kind (as kubelet's warning names it), name and data.
type Source<'s> = (&'static str, &'s str, BTreeMap<&'s str, String>);

/// The [`Source`] of `source`; `None` for an optional object that is missing (or a
/// source of neither kind).
fn source_data<'s>(
    namespace: &str,
    source: &'s EnvFromSource,
    resolved: &'s Resolved,
    at: &Subject,
) -> Result<Option<Source<'s>>> {
    if let Some(config_map) = &source.config_map_ref {
        let name = config_map.name.as_str();
        let data = match resolved.config_map(namespace, name).map_err(object(at))? {
            Some(found) => found.data.iter().flatten().map(|(k, v)| (k.as_str(), v.clone())),
            None if config_map.optional == Some(true) => return Ok(None),
            None => return Err(not_found(at, "configmap", name)),
        };
        Ok(Some(("configMap", name, data.collect())))
    } else if let Some(secret) = &source.secret_ref {
        let name = secret.name.as_str();
        let data = match resolved.secret(namespace, name).map_err(object(at))? {
            Some(found) => found.data.iter().flatten().map(|(k, v)| (k.as_str(), text(&v.0))),
            None if secret.optional == Some(true) => return Ok(None),
            None => return Err(not_found(at, "secret", name)),
        };
        Ok(Some(("secret", name, data.collect())))
    } else {
        Ok(None)
    }
}

/// The warnings of [`env_from`], none when it fails.
pub(crate) fn invalid_names(pod: &Pod, container: &Container, resolved: &Resolved) -> Vec<String> {
    let at = Subject::container(pod, &container.name);
    env_from(pod, container, resolved, &at).map(|env| env.invalid_names).unwrap_or_default()
}

pub(super) fn config_map_key(
    pod: &Pod,
    resolved: &Resolved,
    selector: &ConfigMapKeySelector,
    at: &Subject,
) -> Result<Option<String>> {
    let optional = selector.optional == Some(true);
    let found = resolved.config_map(namespace(pod), &selector.name).map_err(object(at))?;
    let Some(config_map) = found else {
        return if optional { Ok(None) } else { Err(not_found(at, "configmap", &selector.name)) };
    };
    match config_map.data.as_ref().and_then(|d| d.get(&selector.key)) {
        Some(value) => Ok(Some(value.clone())),
        None if optional => Ok(None),
        None => Err(missing_key(pod, at, "ConfigMap", &selector.name, &selector.key)),
    }
}

pub(super) fn secret_key(
    pod: &Pod,
    resolved: &Resolved,
    selector: &SecretKeySelector,
    at: &Subject,
) -> Result<Option<String>> {
    let optional = selector.optional == Some(true);
    let found = resolved.secret(namespace(pod), &selector.name).map_err(object(at))?;
    let Some(secret) = found else {
        return if optional { Ok(None) } else { Err(not_found(at, "secret", &selector.name)) };
    };
    match secret.data.as_ref().and_then(|d| d.get(&selector.key)) {
        Some(value) => Ok(Some(text(&value.0))),
        None if optional => Ok(None),
        None => Err(missing_key(pod, at, "Secret", &selector.name, &selector.key)),
    }
}

/// A Secret's value as kubelet puts it in the environment (Go's `string(bytes)`).
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// kubelet's check of an `envFrom` variable's name (`IsEnvVarName`): letters, digits,
/// `_`, `-` and `.`, not starting with a digit.
fn is_env_var_name(name: &str) -> bool {
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    name.chars().next().is_some_and(|first| !first.is_ascii_digit()) && name.chars().all(valid)
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

fn object(at: &Subject) -> impl FnOnce(projection::Error) -> Error {
    let at = at.clone();
    move |source| Error::EnvObject { at, source: Box::new(source) }
}

fn not_found(at: &Subject, kind: &'static str, name: &str) -> Error {
    object(at)(projection::Error::NotFound { kind, name: name.to_owned() })
}

fn missing_key(pod: &Pod, at: &Subject, kind: &'static str, name: &str, key: &str) -> Error {
    let object = format!("{kind} {}/{name}", namespace(pod));
    Error::EnvKey { at: at.clone(), key: key.to_owned(), object }
}
