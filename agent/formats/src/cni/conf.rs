//! CNI network configuration files, as libcni and containerd's CRI read them: the first
//! `*.conflist`, `*.conf` or `*.json` file of the conf dir in lexical order; a `.conf` or
//! `.json` file holds one plugin and is wrapped into a list of one. Also Outpost's
//! default network. No IO here: callers read the files.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// The `cniVersion`s Outpost can drive (the result formats it understands).
pub const SUPPORTED_VERSIONS: [&str; 4] = ["0.3.0", "0.3.1", "0.4.0", "1.0.0"];

/// The file name of Outpost's default network config.
pub const DEFAULT_FILE: &str = "10-outpost.conflist";

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("CNI config {} is not valid JSON: fix or remove it", file.display())]
    Json {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("CNI config {} is not a JSON object: fix or remove it", file.display())]
    NotObject { file: PathBuf },
    #[error("CNI config {} has no \"name\": give the network a name", file.display())]
    NoName { file: PathBuf },
    #[error(
        "CNI config {} has cniVersion {version:?}; Outpost supports {}: change \"cniVersion\"",
        file.display(),
        SUPPORTED_VERSIONS.join(", ")
    )]
    Version { file: PathBuf, version: String },
    #[error("CNI config {} has no plugins: a .conflist needs a non-empty \"plugins\" array", file.display())]
    NoPlugins { file: PathBuf },
    #[error(
        "plugin {index} of CNI config {} is not an object with a \"type\" naming its binary",
        file.display()
    )]
    PluginType { file: PathBuf, index: usize },
    #[error(
        "plugin {index} of CNI config {} has type {kind:?}, which is not a plain binary name",
        file.display()
    )]
    PluginName { file: PathBuf, index: usize, kind: String },
}

/// A network configuration list, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkList {
    /// The file it was read from (named in errors).
    pub file: PathBuf,
    pub name: String,
    pub cni_version: String,
    pub plugins: Vec<Plugin>,
}

/// One plugin of a list: its binary name and its configuration object as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Plugin {
    pub kind: String,
    pub conf: Map<String, Value>,
}

impl Plugin {
    /// Whether the plugin declares `"capabilities": {name: true}`.
    pub fn has_capability(&self, name: &str) -> bool {
        self.conf
            .get("capabilities")
            .and_then(|caps| caps.get(name))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

impl NetworkList {
    /// Parses the contents of `file`; its extension says whether it is a list.
    pub fn parse(file: &Path, bytes: &[u8]) -> Result<NetworkList> {
        let file_buf = || file.to_path_buf();
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|source| Error::Json { file: file_buf(), source })?;
        let Value::Object(top) = value else {
            return Err(Error::NotObject { file: file_buf() });
        };
        let raw_plugins = if is_list_file(file) {
            match top.get("plugins") {
                Some(Value::Array(plugins)) if !plugins.is_empty() => plugins.clone(),
                _ => return Err(Error::NoPlugins { file: file_buf() }),
            }
        } else {
            vec![Value::Object(top.clone())]
        };
        let name = match top.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => return Err(Error::NoName { file: file_buf() }),
        };
        let cni_version = top.get("cniVersion").and_then(Value::as_str).unwrap_or_default();
        if !SUPPORTED_VERSIONS.contains(&cni_version) {
            return Err(Error::Version { file: file_buf(), version: cni_version.to_owned() });
        }
        let plugins = raw_plugins
            .into_iter()
            .enumerate()
            .map(|(index, raw)| plugin(file, index, raw))
            .collect::<Result<_>>()?;
        Ok(NetworkList { file: file_buf(), name, cni_version: cni_version.to_owned(), plugins })
    }

    /// The list as a `.conflist` document (what the cache keeps to replay DEL).
    pub fn to_conflist(&self) -> Value {
        let plugins = self.plugins.iter().map(|p| Value::Object(p.conf.clone())).collect();
        json!({ "cniVersion": self.cni_version, "name": self.name, "plugins": Value::Array(plugins) })
    }

    /// Whether DEL gets the cached result as `prevResult` (CNI 0.4.0 and later).
    pub fn del_takes_prev_result(&self) -> bool {
        !self.cni_version.starts_with("0.3.")
    }
}

fn plugin(file: &Path, index: usize, raw: Value) -> Result<Plugin> {
    let Value::Object(conf) = raw else {
        return Err(Error::PluginType { file: file.to_path_buf(), index });
    };
    let Some(kind) = conf.get("type").and_then(Value::as_str) else {
        return Err(Error::PluginType { file: file.to_path_buf(), index });
    };
    if kind.is_empty() || kind.contains('/') || kind == "." || kind == ".." {
        return Err(Error::PluginName { file: file.to_path_buf(), index, kind: kind.to_owned() });
    }
    Ok(Plugin { kind: kind.to_owned(), conf: conf.clone() })
}

fn is_list_file(file: &Path) -> bool {
    file.extension().is_some_and(|ext| ext == "conflist")
}

/// Whether a file of the conf dir is a network config (by its name).
pub fn is_config_name(name: &str) -> bool {
    let path = Path::new(name);
    !name.starts_with('.')
        && path.extension().is_some_and(|ext| ext == "conflist" || ext == "conf" || ext == "json")
}

/// The config libcni would use among the conf dir's file names: the first in lexical
/// (byte) order.
pub fn pick<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names.into_iter().filter(|name| is_config_name(name)).min()
}

/// Outpost's default network: a bridge with host-local IPAM, masquerading, and portmap
/// for `hostPort`s (`lo` is up already: the pod's network namespace is made with it up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultNetwork {
    /// Network name (host-local keeps its allocations in `<data_dir>/<name>`).
    pub name: String,
    /// Host bridge, at most 15 bytes.
    pub bridge: String,
    /// The pod subnet: network address and prefix length.
    pub subnet: (Ipv4Addr, u8),
    /// host-local's data dir.
    pub data_dir: PathBuf,
}

impl DefaultNetwork {
    /// The default: network `outpost`, bridge `outpost0`, 10.42.0.0/16 (clear of the
    /// defaults of Docker 172.17/16, Podman 10.88/16, kubeadm services 10.96/12, Flannel
    /// 10.244/16 and Calico 192.168/16), host-local data under `<cache_dir>/ipam`.
    pub fn new(cache_dir: &Path) -> DefaultNetwork {
        DefaultNetwork {
            name: "outpost".to_owned(),
            bridge: "outpost0".to_owned(),
            subnet: (Ipv4Addr::new(10, 42, 0, 0), 16),
            data_dir: cache_dir.join("ipam"),
        }
    }

    /// The `.conflist` document.
    pub fn conflist(&self) -> Value {
        let (address, prefix) = self.subnet;
        json!({
            "cniVersion": "1.0.0",
            "name": self.name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": true,
                    "ipMasq": true,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{ "subnet": format!("{address}/{prefix}") }]],
                        "routes": [{ "dst": "0.0.0.0/0" }],
                        "dataDir": self.data_dir,
                    },
                },
                { "type": "portmap", "capabilities": { "portMappings": true }, "snat": true },
            ],
        })
    }
}

#[cfg(test)]
mod tests;
