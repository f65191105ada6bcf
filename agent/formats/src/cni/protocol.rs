//! The CNI plugin protocol (spec 1.0.0, also 0.3.x and 0.4.0): the environment and the
//! stdin document of one plugin call, `CNI_ARGS`, and reading results and errors from its
//! stdout. No IO here.

use std::ffi::OsString;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::conf::{NetworkList, Plugin};
use super::{PortMapping, Protocol};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{field} {value:?} cannot be passed in CNI_ARGS (it holds ';' or '='): \
         pod names, namespaces and UIDs are DNS names or UUIDs"
    )]
    ArgValue { field: &'static str, value: String },
    #[error(
        "{value:?} is not a usable CNI container id: it must start with a letter or digit \
         and hold only letters, digits, '_', '.' and '-'"
    )]
    ContainerId { value: String },
    #[error("the result is not a CNI result document")]
    Result(#[source] serde_json::Error),
    #[error("the result has IP address {address:?}, which is not an address with a prefix")]
    Address { address: String },
}

/// A CNI operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
        })
    }
}

/// What a plugin call is about, beyond its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call<'a> {
    pub command: Command,
    pub container_id: &'a str,
    /// Empty when the namespace is gone (DEL only).
    pub netns: &'a Path,
    pub ifname: &'a str,
    pub args: &'a str,
    pub bin_dirs: &'a [PathBuf],
}

impl Call<'_> {
    /// The `CNI_*` variables (the rest of the agent's environment is passed on too:
    /// plugins run `iptables` from `PATH`).
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        let cni_path = std::env::join_paths(self.bin_dirs).unwrap_or_default();
        vec![
            ("CNI_COMMAND", self.command.to_string().into()),
            ("CNI_CONTAINERID", self.container_id.into()),
            ("CNI_NETNS", self.netns.into()),
            ("CNI_IFNAME", self.ifname.into()),
            ("CNI_ARGS", self.args.into()),
            ("CNI_PATH", cni_path),
        ]
    }
}

/// Checks that `id` is a valid CNI container id (it also names the cache file).
pub fn check_container_id(id: &str) -> Result<()> {
    let mut chars = id.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if valid { Ok(()) } else { Err(Error::ContainerId { value: id.to_owned() }) }
}

/// `CNI_ARGS` as the kubelet and containerd pass them.
pub fn cni_args(namespace: &str, name: &str, uid: &str, infra_id: &str) -> Result<String> {
    let fields = [
        ("K8S_POD_NAMESPACE", namespace),
        ("K8S_POD_NAME", name),
        ("K8S_POD_INFRA_CONTAINER_ID", infra_id),
        ("K8S_POD_UID", uid),
    ];
    let mut args = String::from("IgnoreUnknown=1");
    for (field, value) in fields {
        if value.contains([';', '=']) {
            return Err(Error::ArgValue { field, value: value.to_owned() });
        }
        args.push_str(&format!(";{field}={value}"));
    }
    Ok(args)
}

/// The capability arguments Outpost offers: `portMappings`, as containerd sends them.
pub fn capability_args(ports: &[PortMapping]) -> Map<String, Value> {
    let mappings = ports
        .iter()
        .map(|port| {
            let mut mapping = json!({
                "hostPort": port.host_port,
                "containerPort": port.container_port,
                "protocol": match port.protocol {
                    Protocol::Tcp => "tcp",
                    Protocol::Udp => "udp",
                    Protocol::Sctp => "sctp",
                },
            });
            if let Some(host_ip) = port.host_ip {
                mapping["hostIP"] = json!(host_ip.to_string());
            }
            mapping
        })
        .collect();
    Map::from_iter([("portMappings".to_owned(), Value::Array(mappings))])
}

/// The stdin document of one plugin call, as libcni builds it: the plugin's config with
/// the list's `name` and `cniVersion`, `prevResult` if any, and `runtimeConfig` holding
/// the capability arguments the plugin declares.
pub fn stdin(
    list: &NetworkList,
    plugin: &Plugin,
    prev_result: Option<&Value>,
    capability_args: &Map<String, Value>,
) -> Value {
    let mut conf = plugin.conf.clone();
    conf.insert("name".to_owned(), json!(list.name));
    conf.insert("cniVersion".to_owned(), json!(list.cni_version));
    if let Some(prev) = prev_result {
        conf.insert("prevResult".to_owned(), prev.clone());
    }
    let runtime: Map<String, Value> = capability_args
        .iter()
        .filter(|(name, _)| plugin.has_capability(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    if !runtime.is_empty() {
        conf.insert("runtimeConfig".to_owned(), Value::Object(runtime));
    }
    Value::Object(conf)
}

#[derive(Deserialize)]
struct CniResult {
    #[serde(default)]
    interfaces: Vec<Interface>,
    #[serde(default)]
    ips: Vec<IpConfig>,
}

#[derive(Deserialize)]
struct Interface {
    name: String,
    #[serde(default)]
    sandbox: String,
}

#[derive(Deserialize)]
struct IpConfig {
    address: String,
    interface: Option<usize>,
}

/// The pod's IPs in a result: those on `ifname` inside the sandbox (or not tied to an
/// interface), IPv4 first as the kubelet orders them, so `[0]` is the pod IP.
pub fn pod_ips(result: &Value, ifname: &str) -> Result<Vec<IpAddr>> {
    let result = CniResult::deserialize(result).map_err(Error::Result)?;
    let mut ips = Vec::new();
    for ip in &result.ips {
        let on_pod = match ip.interface.and_then(|index| result.interfaces.get(index)) {
            Some(interface) => interface.name == ifname && !interface.sandbox.is_empty(),
            None => ip.interface.is_none(),
        };
        if !on_pod {
            continue;
        }
        let address = ip.address.split_once('/').map(|(address, _)| address).unwrap_or_default();
        let address = address
            .parse::<IpAddr>()
            .map_err(|_| Error::Address { address: ip.address.clone() })?;
        ips.push(address);
    }
    ips.sort_by_key(IpAddr::is_ipv6);
    Ok(ips)
}

/// A CNI error document (`code`, `msg`, `details`) from a failed plugin.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PluginError {
    pub code: u64,
    pub msg: String,
    #[serde(default)]
    pub details: String,
}

impl PluginError {
    /// Reads a plugin's stdout as an error document, if it is one.
    pub fn parse(stdout: &[u8]) -> Option<PluginError> {
        serde_json::from_slice::<PluginError>(stdout).ok().filter(|e| !e.msg.is_empty())
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)?;
        if !self.details.is_empty() && !self.msg.contains(&self.details) {
            write!(f, ": {}", self.details)?;
        }
        write!(f, " (CNI error code {})", self.code)
    }
}

#[cfg(test)]
mod tests;
