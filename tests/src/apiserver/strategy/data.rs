//! ConfigMaps and Secrets: what the real server's conversion, defaulting and validation
//! do to the objects that carry data.
//!
//! A Secret's `stringData` is merged into `data` (base64, `stringData` wins) and
//! dropped, as the v1 conversion does on every write; `type` defaults to `Opaque` and
//! cannot change. Keys must be valid config keys. An object written with
//! `immutable: true` keeps its data (and its `immutable`) forever.
//!
//! Simplified: no size limit, no per-type validation of a Secret's keys
//! (`kubernetes.io/tls` needing `tls.crt`, …).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

use super::super::error::{Cause, Error, Result};
use super::super::resource::{CONFIGMAPS, ResourceType, SECRETS};

/// Whether `resource` carries data (a ConfigMap or a Secret).
pub fn carries_data(resource: &ResourceType) -> bool {
    resource == &CONFIGMAPS || resource == &SECRETS
}

/// Conversion and defaulting of a written object: `stringData` into `data`, the
/// default `type`. A `data` value that is not base64 is a 400, as its decoding is.
pub fn convert(resource: &ResourceType, object: &mut Value) -> Result<()> {
    if resource != &SECRETS {
        return Ok(());
    }
    let Some(map) = object.as_object_mut() else { return Ok(()) };
    if let Some(Value::Object(data)) = map.get("data") {
        for (key, value) in data {
            let text = value.as_str().unwrap_or_default();
            if let Err(e) = BASE64.decode(text) {
                return Err(Error::BadRequest(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data \
                     in data[{key:?}]: {e}"
                )));
            }
        }
    }
    if let Some(Value::Object(strings)) = map.remove("stringData") {
        let data = map.entry("data").or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(data) = data.as_object_mut() {
            for (key, value) in strings {
                data.insert(key, json!(BASE64.encode(value.as_str().unwrap_or_default())));
            }
        }
    }
    if map.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        map.insert("type".into(), json!("Opaque"));
    }
    Ok(())
}

/// The causes a written object fails validation with: keys of `data` and
/// `binaryData` that are not config keys.
pub fn validate(resource: &ResourceType, object: &Value, causes: &mut Vec<Cause>) {
    if !carries_data(resource) {
        return;
    }
    for field in ["data", "binaryData"] {
        let Some(Value::Object(data)) = object.get(field) else { continue };
        for key in data.keys() {
            if let Some(problem) = config_key_problem(key) {
                causes.push(Cause::invalid(
                    &format!("{field}[{key}]"),
                    format!("Invalid value: {key:?}: {problem}"),
                ));
            }
        }
    }
}

/// The causes an update fails with: changes to an immutable object's data, or to a
/// Secret's type.
pub fn check_update(resource: &ResourceType, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    if !carries_data(resource) {
        return;
    }
    if resource == &SECRETS && old.get("type") != new.get("type") {
        let ty = new.get("type").and_then(Value::as_str).unwrap_or_default();
        causes.push(Cause::invalid("type", format!("Invalid value: {ty:?}: field is immutable")));
    }
    if old.get("immutable") != Some(&Value::Bool(true)) {
        return;
    }
    const IMMUTABLE: &str = "Forbidden: field is immutable when `immutable` is set";
    if new.get("immutable") != Some(&Value::Bool(true)) {
        causes.push(Cause::forbidden("immutable", IMMUTABLE));
    }
    let fields: &[&str] = if resource == &SECRETS { &["data"] } else { &["data", "binaryData"] };
    for field in fields {
        let empty = |v: Option<&Value>| v.is_none_or(|d| d.as_object().is_some_and(Map::is_empty));
        let (before, after) = (old.get(*field), new.get(*field));
        if before != after && !(empty(before) && empty(after)) {
            causes.push(Cause::forbidden(field, IMMUTABLE));
        }
    }
}

/// Why `key` is not a valid ConfigMap or Secret key (`IsConfigMapKey`), if it is not.
fn config_key_problem(key: &str) -> Option<&'static str> {
    let valid = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    if key.is_empty() || key.len() > 253 || !key.bytes().all(|b| valid(&b)) {
        return Some(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
             (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is \
             '[-._a-zA-Z0-9]+')",
        );
    }
    match key {
        "." => Some("must not be '.'"),
        ".." => Some("must not be '..'"),
        _ if key.starts_with("..") => Some("must not start with '..'"),
        _ => None,
    }
}
