//! Host ports (K4): the scheduler's `nodeports.Fits` as kubelet calls it. A container
//! port with a `hostPort` conflicts with one an active pod's container holds for the
//! same protocol (TCP if unset) and port, on the same host IP or where either side binds
//! every address (`0.0.0.0`, or an unset host IP).

use k8s_openapi::api::core::v1::Pod;

use super::Admitted;

/// (host IP, protocol, port) of each app container port with a host port.
fn host_ports(pod: &Pod) -> impl Iterator<Item = (&str, &str, i32)> {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
    containers.iter().flat_map(|c| c.ports.iter().flatten()).filter_map(|p| {
        let port = p.host_port.filter(|port| *port > 0)?;
        let ip = p.host_ip.as_deref().filter(|ip| !ip.is_empty()).unwrap_or(ALL);
        let protocol = p.protocol.as_deref().filter(|p| !p.is_empty()).unwrap_or("TCP");
        Some((ip, protocol, port))
    })
}

const ALL: &str = "0.0.0.0";

/// Whether the pod's host ports are free of the active pods'.
pub(super) fn fit(pod: &Pod, active: &[Admitted]) -> bool {
    let used: Vec<(&str, &str, i32)> = active.iter().flat_map(|a| host_ports(&a.pod)).collect();
    host_ports(pod).all(|(ip, protocol, port)| {
        !used.iter().any(|(used_ip, used_protocol, used_port)| {
            *used_port == port
                && *used_protocol == protocol
                && (ip == ALL || *used_ip == ALL || *used_ip == ip)
        })
    })
}
