//! What a CNI client reads and writes, as libcni and containerd's CRI do (spec 1.0.0;
//! 0.3.x and 0.4.0 configs work too): network configuration files ([`conf`]) and one
//! plugin call's environment, stdin, result and error ([`protocol`]).

use std::net::IpAddr;

pub mod conf;
pub mod protocol;

/// A `hostPort`, passed to plugins with the `portMappings` capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMapping {
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: Protocol,
    pub host_ip: Option<IpAddr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}
