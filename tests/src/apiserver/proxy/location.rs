//! Where a proxied request goes on the node, as kube-apiserver's pod strategy computes
//! it: the container defaulted or checked (`validateContainer`), the stream options
//! turned into kubelet's query (`streamParams`: `input`, `output`, `error`, `tty` as
//! `1`, `command` per argument, the forwarded ports as one `port`), the log options
//! passed on by name, and the node's address. No IO.

use serde_json::Value;

use crate::apiserver::error::{Error, Result};

/// The proxied subresources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proxied {
    /// `/api/v1/namespaces/{namespace}/pods/{name}/{exec|attach|portforward|log}`.
    Pod { namespace: String, name: String, subresource: PodSubresource },
    /// `/api/v1/nodes/{name}/proxy[/{path}]`: `path` with its leading `/`.
    Node { name: String, path: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSubresource {
    Exec,
    Attach,
    PortForward,
    Log,
}

impl PodSubresource {
    /// The subresource's name in the API path.
    pub fn name(self) -> &'static str {
        match self {
            PodSubresource::Exec => "exec",
            PodSubresource::Attach => "attach",
            PodSubresource::PortForward => "portforward",
            PodSubresource::Log => "log",
        }
    }
}

/// The node URL of a proxied request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub host: String,
    pub port: u16,
    pub path_and_query: String,
}

/// The proxied subresource `path` names, if any.
pub fn route(path: &str) -> Option<Proxied> {
    let segments: Vec<&str> = path.strip_prefix("/api/v1/")?.split('/').collect();
    match segments.as_slice() {
        ["namespaces", namespace, "pods", name, sub] => {
            let subresource = match *sub {
                "exec" => PodSubresource::Exec,
                "attach" => PodSubresource::Attach,
                "portforward" => PodSubresource::PortForward,
                "log" => PodSubresource::Log,
                _ => return None,
            };
            let (namespace, name) = ((*namespace).to_owned(), (*name).to_owned());
            Some(Proxied::Pod { namespace, name, subresource })
        }
        ["nodes", name, "proxy", rest @ ..] => {
            let path = format!("/{}", rest.join("/"));
            Some(Proxied::Node { name: (*name).to_owned(), path })
        }
        _ => None,
    }
}

/// The node a pod is bound to, or kube-apiserver's 400.
pub fn node_name(pod: &Value, name: &str) -> Result<String> {
    match pod.pointer("/spec/nodeName").and_then(Value::as_str) {
        Some(node) if !node.is_empty() => Ok(node.to_owned()),
        _ => Err(Error::BadRequest(format!("pod {name} does not have a host assigned"))),
    }
}

/// The node URL for `proxied` given the pod (for pod subresources), its node and the
/// client's query.
pub fn location(
    proxied: &Proxied,
    pod: Option<&Value>,
    node: &Value,
    query: &str,
) -> Result<Location> {
    let (host, port) = node_address(node)?;
    let params: Vec<(String, String)> =
        form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let path_and_query = match (proxied, pod) {
        (Proxied::Node { path, .. }, _) if query.is_empty() => path.clone(),
        (Proxied::Node { path, .. }, _) => format!("{path}?{query}"),
        (Proxied::Pod { namespace, name, subresource }, Some(pod)) => {
            let container = || container(pod, name, first(&params, "container"));
            match subresource {
                PodSubresource::Exec | PodSubresource::Attach => {
                    let path = subresource.name();
                    let container = container()?;
                    let query = stream_params(&params, *subresource == PodSubresource::Exec)?;
                    format!("/{path}/{namespace}/{name}/{container}?{query}")
                }
                PodSubresource::PortForward => {
                    let ports: Vec<&str> = params
                        .iter()
                        .filter(|(k, _)| k == "ports")
                        .flat_map(|(_, v)| v.split(','))
                        .collect();
                    let base = format!("/portForward/{namespace}/{name}");
                    if ports.is_empty() {
                        base
                    } else {
                        let query = encode(&[("port".to_owned(), ports.join(","))]);
                        format!("{base}?{query}")
                    }
                }
                PodSubresource::Log => {
                    let container = container()?;
                    let query = log_params(&params);
                    let base = format!("/containerLogs/{namespace}/{name}/{container}");
                    if query.is_empty() { base } else { format!("{base}?{query}") }
                }
            }
        }
        (Proxied::Pod { .. }, None) => return Err(Error::Internal("no pod to proxy to".into())),
    };
    Ok(Location { host, port, path_and_query })
}

/// The node's kubelet endpoint: the first address of the types kubeadm prefers, and
/// the daemon endpoint's port (kubelet's 10250 if the node does not say).
fn node_address(node: &Value) -> Result<(String, u16)> {
    let name = node.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let addresses = node.pointer("/status/addresses").and_then(Value::as_array);
    let address = ["InternalIP", "ExternalIP", "Hostname"].iter().find_map(|kind| {
        addresses?
            .iter()
            .find(|a| a.get("type").and_then(Value::as_str) == Some(kind))
            .and_then(|a| a.get("address").and_then(Value::as_str))
    });
    let Some(address) = address else {
        return Err(Error::BadRequest(format!(
            "no preferred addresses found; known addresses: [] (node {name})"
        )));
    };
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .unwrap_or(10250);
    Ok((address.to_owned(), port))
}

/// The container a stream or log request is for: the one asked for if the pod has it,
/// else the pod's only container (kube-apiserver's `validateContainer`).
fn container(pod: &Value, name: &str, asked: Option<&str>) -> Result<String> {
    let spec = pod.get("spec");
    let names = |field: &str| -> Vec<String> {
        spec.and_then(|s| s.get(field))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    let containers = names("containers");
    let all: Vec<String> = names("initContainers")
        .into_iter()
        .chain(containers.iter().cloned())
        .chain(names("ephemeralContainers"))
        .collect();
    match asked {
        Some(asked) if !asked.is_empty() => {
            if all.iter().any(|c| c == asked) {
                Ok(asked.to_owned())
            } else {
                Err(Error::BadRequest(format!("container {asked} is not valid for pod {name}")))
            }
        }
        _ => match containers.as_slice() {
            [only] => Ok(only.clone()),
            [] => {
                Err(Error::BadRequest(format!("a container name must be specified for pod {name}")))
            }
            _ => Err(Error::BadRequest(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                all.join(" ")
            ))),
        },
    }
}

/// kubelet's stream parameters from the client's `PodExecOptions`/`PodAttachOptions`.
fn stream_params(params: &[(String, String)], exec: bool) -> Result<String> {
    let mut out = Vec::new();
    for (client, kubelet) in
        [("stderr", "error"), ("stdin", "input"), ("stdout", "output"), ("tty", "tty")]
    {
        if let Some(value) = first(params, client)
            && parse_bool(client, value)?
        {
            out.push((kubelet.to_owned(), "1".to_owned()));
        }
    }
    if exec {
        for (_, argument) in params.iter().filter(|(k, _)| k == "command") {
            out.push(("command".to_owned(), argument.clone()));
        }
    }
    Ok(encode(&out))
}

/// The log options kube-apiserver passes to the node, by their own names.
fn log_params(params: &[(String, String)]) -> String {
    let keep = [
        "follow",
        "previous",
        "timestamps",
        "sinceSeconds",
        "sinceTime",
        "tailLines",
        "limitBytes",
    ];
    let out: Vec<(String, String)> =
        params.iter().filter(|(k, _)| keep.contains(&k.as_str())).cloned().collect();
    encode(&out)
}

/// Go's `url.Values.Encode`: sorted by key, each key's values in order.
fn encode(params: &[(String, String)]) -> String {
    let mut sorted = params.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (k, v) in &sorted {
        serializer.append_pair(k, v);
    }
    serializer.finish()
}

fn first<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Go's `strconv.ParseBool`, as the API server's query decoding uses it.
fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" | "" => Ok(false),
        _ => Err(Error::BadRequest(format!("{key}: invalid boolean value {value:?}"))),
    }
}

#[cfg(test)]
mod tests;
