//! kubelet's device manager checkpoint, `kubelet_internal_checkpoint` in the
//! device-plugin directory, byte for byte: the same JSON, and the same checksum, so that
//! kubelet reads what Outpost wrote and Outpost reads what kubelet wrote.
//!
//! The checksum is kubelet's `checksum.New(data)`: FNV-1a (32 bits) of the data printed
//! by go-spew's `%#v` (types shown, map keys sorted, no methods). The printing is done
//! here for the one shape the data has ([`spew`]); the tests hold it to checkpoints real
//! kubelets wrote.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The file's name in the device-plugin directory.
pub const FILE_NAME: &str = "kubelet_internal_checkpoint";

/// The file: the data, its checksum, and the boot it was written in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    #[serde(rename = "Data")]
    pub data: Data,
    #[serde(rename = "Checksum")]
    pub checksum: u64,
    /// The kernel's boot id when written (kubelet writes it outside the checksummed data;
    /// older kubelets omit it).
    #[serde(rename = "BootID", default, skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
}

/// The checksummed part. `None` is Go's `nil` (JSON `null`), which prints differently
/// from an empty list in the checksum.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Data {
    #[serde(rename = "PodDeviceEntries")]
    pub entries: Option<Vec<Entry>>,
    #[serde(rename = "RegisteredDevices")]
    pub registered: Option<BTreeMap<String, Option<Vec<String>>>>,
}

/// One container's devices of one resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    #[serde(rename = "PodUID", default)]
    pub pod_uid: String,
    #[serde(rename = "ContainerName", default)]
    pub container: String,
    #[serde(rename = "ResourceName", default)]
    pub resource: String,
    /// The device ids by NUMA node (`-1`: none).
    #[serde(rename = "DeviceIDs", default, with = "numa_keys")]
    pub devices: Option<BTreeMap<i64, Option<Vec<String>>>>,
    /// The plugin's `ContainerAllocateResponse`, protobuf-encoded (base64 in the JSON).
    #[serde(rename = "AllocResp", default, with = "bytes")]
    pub response: Option<Vec<u8>>,
}

/// What reading a checkpoint can find wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the device manager's checkpoint is not kubelet's format: {0}")]
    Format(#[from] serde_json::Error),
    #[error(
        "the device manager's checkpoint is corrupt: its checksum is {stored}, its data's is \
         {computed}"
    )]
    Checksum { stored: u64, computed: u64 },
}

impl Checkpoint {
    /// The checkpoint of `data`, its checksum computed.
    pub fn new(data: Data, boot_id: String) -> Checkpoint {
        let checksum = checksum(&data);
        Checkpoint { data, checksum, boot_id }
    }

    /// Reads a checkpoint and verifies its checksum (kubelet's `VerifyChecksum`).
    pub fn parse(bytes: &[u8]) -> Result<Checkpoint, Error> {
        let checkpoint: Checkpoint = serde_json::from_slice(bytes)?;
        let computed = checksum(&checkpoint.data);
        if computed != checkpoint.checksum {
            return Err(Error::Checksum { stored: checkpoint.checksum, computed });
        }
        Ok(checkpoint)
    }

    /// The file's bytes (Go's `json.Marshal`: compact, map keys sorted).
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing plain maps, strings and numbers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// kubelet's checksum of the data.
pub fn checksum(data: &Data) -> u64 {
    u64::from(fnv1a32(spew(data).as_bytes()))
}

fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(0x811c_9dc5_u32, |hash, byte| (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193))
}

/// go-spew's `%#v` of kubelet's `checkpointData` (the type names are Go's): a struct's
/// fields show their types, a slice's elements and a map's keys and values do not, maps
/// are sorted by key, and `nil` prints as `<nil>`.
fn spew(data: &Data) -> String {
    let mut out =
        String::from("(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)");
    match &data.entries {
        None => out.push_str("<nil>"),
        Some(entries) => {
            out.push('[');
            for (i, entry) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                spew_entry(&mut out, entry);
            }
            out.push(']');
        }
    }
    out.push_str(" RegisteredDevices:(map[string][]string)");
    match &data.registered {
        None => out.push_str("<nil>"),
        Some(registered) => {
            out.push_str("map[");
            for (i, (resource, devices)) in registered.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(resource);
                out.push(':');
                spew_strings(&mut out, devices.as_deref());
            }
            out.push(']');
        }
    }
    out.push('}');
    out
}

fn spew_entry(out: &mut String, entry: &Entry) {
    out.push_str("{PodUID:(string)");
    out.push_str(&entry.pod_uid);
    out.push_str(" ContainerName:(string)");
    out.push_str(&entry.container);
    out.push_str(" ResourceName:(string)");
    out.push_str(&entry.resource);
    out.push_str(" DeviceIDs:(checkpoint.DevicesPerNUMA)");
    match &entry.devices {
        None => out.push_str("<nil>"),
        Some(by_numa) => {
            out.push_str("map[");
            for (i, (numa, devices)) in by_numa.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(&numa.to_string());
                out.push(':');
                spew_strings(out, devices.as_deref());
            }
            out.push(']');
        }
    }
    out.push_str(" AllocResp:([]uint8)");
    match &entry.response {
        None => out.push_str("<nil>"),
        Some(bytes) => {
            out.push('[');
            for (i, byte) in bytes.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(&byte.to_string());
            }
            out.push(']');
        }
    }
    out.push('}');
}

fn spew_strings(out: &mut String, strings: Option<&[String]>) {
    match strings {
        None => out.push_str("<nil>"),
        Some(strings) => {
            out.push('[');
            out.push_str(&strings.join(" "));
            out.push(']');
        }
    }
}

/// `DeviceIDs`' keys: Go's JSON writes a map's integer keys as strings.
mod numa_keys {
    use std::collections::BTreeMap;

    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    type ByNuma = Option<BTreeMap<i64, Option<Vec<String>>>>;

    pub fn serialize<S: Serializer>(value: &ByNuma, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            None => serializer.serialize_none(),
            Some(map) => serializer.collect_map(map.iter().map(|(k, v)| (k.to_string(), v))),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ByNuma, D::Error> {
        let raw: Option<BTreeMap<String, Option<Vec<String>>>> = Option::deserialize(deserializer)?;
        raw.map(|map| {
            map.into_iter()
                .map(|(k, v)| k.parse::<i64>().map(|k| (k, v)).map_err(D::Error::custom))
                .collect()
        })
        .transpose()
    }
}

/// `AllocResp`: Go's JSON writes a byte slice as base64.
mod bytes {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    pub fn serialize<S: Serializer>(
        value: &Option<Vec<u8>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            None => serializer.serialize_none(),
            Some(bytes) => serializer.serialize_str(&STANDARD.encode(bytes)),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        let raw: Option<String> = Option::deserialize(deserializer)?;
        raw.map(|text| STANDARD.decode(text).map_err(D::Error::custom)).transpose()
    }
}
