//! The node's address, as kubelet picks it when none is given.

use std::net::{IpAddr, Ipv4Addr};

/// The IPv4 address of the interface that carries the default route, else the first
/// non-loopback IPv4 address of an interface that is up (kubelet picks the node IP the
/// same way when none is given). `None` on a box with no address but loopback.
pub fn default_address() -> Option<IpAddr> {
    let routes = super::proc::net_route().unwrap_or_default();
    let default_interface = default_route_interface(&routes);
    let addresses: Vec<(String, Ipv4Addr)> = nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|a| a.flags.contains(nix::net::if_::InterfaceFlags::IFF_UP))
        .filter_map(|a| {
            let ip = a.address?.as_sockaddr_in()?.ip();
            (!ip.is_loopback()).then_some((a.interface_name, ip))
        })
        .collect();
    default_interface
        .and_then(|name| addresses.iter().find(|(n, _)| *n == name))
        .or_else(|| addresses.first())
        .map(|(_, ip)| IpAddr::V4(*ip))
}

/// The interface of the default route in `/proc/net/route` (destination and mask 0).
fn default_route_interface(routes: &str) -> Option<String> {
    routes.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [iface, "00000000", _gateway, _flags, _refcnt, _use, _metric, "00000000", ..] => {
                Some((*iface).to_owned())
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_default_route_interface() {
        let routes = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
            outpost0\t00002A0A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
            ens3\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
        assert_eq!(default_route_interface(routes).as_deref(), Some("ens3"));
        assert_eq!(default_route_interface("Iface\tDestination\n"), None);
    }
}
