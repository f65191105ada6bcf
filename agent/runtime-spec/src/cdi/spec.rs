//! A CDI spec file: its format (JSON or YAML: `cdiVersion`, `kind`, `annotations`,
//! `devices` with `name` and `containerEdits`, the spec's own `containerEdits`), read as
//! the CDI library reads it (unknown fields refused, YAML 1.1's `0644` octal), and
//! checked as it checks a spec before any of its devices can be used.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::edits::{self, ContainerEdits, nullable};
use super::name;
use super::version;

/// Why a spec file is refused; the library's words.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to unmarshal CDI Spec: {0}")]
    Json(#[source] serde_json::Error),
    #[error("failed to unmarshal CDI Spec: {0}")]
    Yaml(#[source] Box<serde_saphyr::Error>),
    #[error("no Spec data")]
    Empty,
    #[error("invalid CDI Spec: {0}")]
    Version(#[source] version::Error),
    /// The vendor or class of `kind`.
    #[error("invalid CDI Spec: {0}")]
    Kind(#[source] name::Error),
    /// The spec's own edits.
    #[error("invalid CDI Spec: {0}")]
    Edits(#[source] edits::Error),
    #[error("invalid CDI Spec: failed add device {name:?}: {source}")]
    DeviceName {
        name: String,
        #[source]
        source: name::Error,
    },
    #[error("invalid CDI Spec: failed add device {name:?}: invalid device, empty device edits")]
    EmptyDevice { name: String },
    #[error("invalid CDI Spec: failed add device {name:?}: invalid device {name:?}: {source}")]
    DeviceEdits {
        name: String,
        #[source]
        source: edits::Error,
    },
    #[error("invalid CDI Spec: invalid spec, multiple device {name:?}")]
    DuplicateDevice { name: String },
    #[error("invalid CDI Spec: invalid spec, no devices")]
    NoDevices,
}

/// A CDI spec as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// One of [`version::VERSIONS`], `v` allowed before it.
    #[serde(default, deserialize_with = "nullable")]
    pub cdi_version: String,
    /// `vendor/class`: its devices' names are `vendor/class=name`.
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
    /// Information for tools (CDI 0.6.0); not applied.
    #[serde(default, deserialize_with = "nullable")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub devices: Vec<Device>,
    /// Applied once to a container that gets any of the spec's devices, before the
    /// first one's.
    #[serde(default, deserialize_with = "nullable")]
    pub container_edits: ContainerEdits,
}

/// A device of a spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    /// The name after `vendor/class=`.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Information for tools (CDI 0.6.0); not applied.
    #[serde(default, deserialize_with = "nullable")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub container_edits: ContainerEdits,
}

impl Spec {
    /// A spec from a file's bytes: JSON when it starts with `{`, YAML otherwise. Not
    /// checked ([`Spec::validate`]). Either is read into a JSON value first and the spec
    /// from that, as the library reads YAML (sigs.k8s.io/yaml: YAML to JSON, then JSON
    /// into the spec): a YAML scalar is typed by YAML before the spec's field sees it.
    /// The spec's decoding code is then in the binary once, not once per format.
    pub fn parse(data: &[u8]) -> Result<Spec, Error> {
        let json = data.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        let value: serde_json::Value = if json {
            serde_json::from_slice::<Strict>(data).map_err(Error::Json)?.0
        } else {
            let options = serde_saphyr::options! {
                duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
                legacy_octal_numbers: true,
                with_snippet: false,
            };
            serde_saphyr::from_slice_with_options(data, options)
                .map_err(|e| Error::Yaml(Box::new(e)))?
        };
        let spec: Option<Spec> = serde_json::from_value(value).map_err(Error::Json)?;
        spec.ok_or(Error::Empty)
    }

    /// Checks the spec as the library does before it offers any of its devices: the
    /// version, the kind's vendor and class, the spec's edits, then each device's name
    /// and edits (a device must edit something), no name twice, at least one device.
    pub fn validate(&self) -> Result<(), Error> {
        version::validate(self).map_err(Error::Version)?;
        let (vendor, class) = self.vendor_class();
        name::validate_vendor_name(vendor).map_err(Error::Kind)?;
        name::validate_class_name(class).map_err(Error::Kind)?;
        self.container_edits.validate().map_err(Error::Edits)?;
        let mut names = std::collections::HashSet::new();
        for device in &self.devices {
            name::validate_device_name(&device.name)
                .map_err(|source| Error::DeviceName { name: device.name.clone(), source })?;
            if device.container_edits.is_empty() {
                return Err(Error::EmptyDevice { name: device.name.clone() });
            }
            device
                .container_edits
                .validate()
                .map_err(|source| Error::DeviceEdits { name: device.name.clone(), source })?;
            if !names.insert(device.name.as_str()) {
                return Err(Error::DuplicateDevice { name: device.name.clone() });
            }
        }
        if names.is_empty() {
            return Err(Error::NoDevices);
        }
        Ok(())
    }

    /// The vendor and class of `kind` (an empty vendor and the whole kind as the class
    /// when it does not split).
    pub fn vendor_class(&self) -> (&str, &str) {
        name::parse_qualifier(&self.kind).unwrap_or(("", &self.kind))
    }
}

/// A JSON value that refuses a key given twice in one object, as the library's strict
/// reading does (JSON is read as YAML there, duplicates refused); serde_json's own
/// `Value` keeps the last.
struct Strict(serde_json::Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Strict, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<serde_json::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E>(self, v: i64) -> Result<serde_json::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<serde_json::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<serde_json::Value, E> {
        Ok(v.into())
    }

    fn visit_str<E>(self, v: &str) -> Result<serde_json::Value, E> {
        Ok(v.into())
    }

    fn visit_string<E>(self, v: String) -> Result<serde_json::Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E>(self) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> Result<serde_json::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(items.into())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<serde_json::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(value) = map.next_value()?;
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!("duplicate field `{key}`")));
            }
            object.insert(key, value);
        }
        Ok(object.into())
    }
}

#[cfg(test)]
mod tests;
