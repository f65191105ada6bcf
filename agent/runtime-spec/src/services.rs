//! K1: the variables a container gets from Services, as kubelet makes them
//! (`getServiceEnvVarMap`, `envvars.FromServices` and `makeLinkVariables` in
//! pkg/kubelet). Pure: the Services come from the agent's `objects`, which watches the
//! `kubernetes` Service of `default` and the Services of the namespaces whose pods use
//! service links.
//!
//! Which Services count: only those with a cluster IP (not `""`, not `"None"`: headless
//! and ExternalName Services give nothing); the `kubernetes` Service of `default` always;
//! the Services of the pod's namespace unless `enableServiceLinks: false`, where a
//! Service of the pod's namespace named `kubernetes` wins over `default`'s.
//!
//! For each, with NAME its name upper-cased and `-` made `_`: `NAME_SERVICE_HOST` (the
//! cluster IP), `NAME_SERVICE_PORT` (the first port), `NAME_SERVICE_PORT_<PORT NAME>` for
//! each named port, and Docker's link variables: `NAME_PORT` (`<proto>://<host>:<port>`
//! of the first port) and, for every port, `NAME_PORT_<port>_<PROTO>` with its `_PROTO`,
//! `_PORT` and `_ADDR`. An IPv6 host is bracketed (`[fd00::1]:443`) as Go's
//! `net.JoinHostPort` does.
//!
//! How they join the container's own variables is in `env`: `$(VAR)` in a value sees
//! them after the container's own, and they are added after the container's, except
//! those the container defines itself (`env` or `envFrom`), which win.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

/// The Service variables of a pod, by name.
pub type ServiceEnv = BTreeMap<String, String>;

/// No Service variables (a node without an API server, as kubelet without a Service
/// lister).
pub static NO_SERVICES: ServiceEnv = BTreeMap::new();

/// The namespace of the API server's own Services (`metav1.NamespaceDefault`).
pub const MASTER_NAMESPACE: &str = "default";

/// The API server's own Service, whose variables every pod gets (kubelet's
/// `masterServices`).
pub const MASTER_SERVICE: &str = "kubernetes";

/// K1: the variables of a pod of `namespace` from `services` (any namespaces; those
/// that do not count are skipped), as kubelet's `getServiceEnvVarMap`.
pub fn service_env<'a>(
    namespace: &str,
    enable_service_links: bool,
    services: impl IntoIterator<Item = &'a Service>,
) -> ServiceEnv {
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for service in services {
        if !has_cluster_ip(service) {
            continue;
        }
        let Some(name) = service.metadata.name.as_deref() else { continue };
        let service_namespace = service.metadata.namespace.as_deref().unwrap_or_default();
        if service_namespace == MASTER_NAMESPACE && name == MASTER_SERVICE {
            // The pod's own namespace's `kubernetes` wins, whichever comes first.
            chosen.entry(name).or_insert(service);
        } else if service_namespace == namespace && enable_service_links {
            chosen.insert(name, service);
        }
    }
    chosen.into_values().flat_map(variables).collect()
}

/// Whether kubelet makes variables of `service` (`IsServiceIPSet`).
pub fn has_cluster_ip(service: &Service) -> bool {
    let ip = service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()).unwrap_or_default();
    !ip.is_empty() && ip != "None"
}

/// The variables of one Service (`envvars.FromServices` of one), in kubelet's order;
/// none without a cluster IP.
pub fn variables(service: &Service) -> Vec<(String, String)> {
    let Some(spec) = service.spec.as_ref().filter(|_| has_cluster_ip(service)) else {
        return Vec::new();
    };
    let ip = spec.cluster_ip.as_deref().unwrap_or_default();
    let prefix = variable_name(service.metadata.name.as_deref().unwrap_or_default());
    let ports = spec.ports.as_deref().unwrap_or_default();
    let mut vars = vec![(format!("{prefix}_SERVICE_HOST"), ip.to_owned())];
    // The API server refuses a Service with a cluster IP and no port; kubelet would
    // fail on one, here it has its host only.
    if let Some(first) = ports.first() {
        let port_name = format!("{prefix}_SERVICE_PORT");
        vars.push((port_name.clone(), first.port.to_string()));
        for port in ports {
            if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
                vars.push((format!("{port_name}_{}", variable_name(name)), port.port.to_string()));
            }
        }
    }
    for (i, port) in ports.iter().enumerate() {
        let protocol = port.protocol.as_deref().filter(|p| !p.is_empty()).unwrap_or("TCP");
        let proto = protocol.to_lowercase();
        let url = format!("{proto}://{}", join_host_port(ip, port.port));
        if i == 0 {
            vars.push((format!("{prefix}_PORT"), url.clone()));
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", port.port, protocol.to_uppercase());
        vars.push((format!("{port_prefix}_PROTO"), proto));
        vars.push((format!("{port_prefix}_PORT"), port.port.to_string()));
        vars.push((format!("{port_prefix}_ADDR"), ip.to_owned()));
        vars.push((port_prefix, url));
    }
    vars
}

/// A Service or port name as a variable name (`makeEnvVariableName`).
fn variable_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

/// `host:port`, `[host]:port` when the host has a colon (Go's `net.JoinHostPort`).
fn join_host_port(host: &str, port: i32) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

#[cfg(test)]
mod tests;
