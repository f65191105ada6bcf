//! `tcpSocket`: a connection made (and closed at once) before the deadline is a success.
//! A host name is looked up first; each of its addresses is tried in turn.

use std::net::{IpAddr, SocketAddr};

use outpost_core::probe::Outcome;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use super::{join_host_port, os_error};

pub(super) async fn connect(host: &str, port: u16, deadline: Instant) -> Outcome {
    let address = join_host_port(host, port);
    match timeout_at(deadline, dial(host, port)).await {
        Ok(Ok(())) => Outcome::Success,
        Ok(Err(message)) => Outcome::Failure(message),
        Err(_) => Outcome::Failure(format!("dial tcp {address}: i/o timeout")),
    }
}

/// Go's `net.Dial("tcp", …)` and its messages.
async fn dial(host: &str, port: u16) -> Result<(), String> {
    let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("dial tcp: lookup {host}: {e}"))?
            .collect(),
    };
    let mut last = format!("dial tcp: lookup {host}: no such host");
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(_stream) => return Ok(()),
            Err(e) => last = format!("dial tcp {address}: connect: {}", os_error(&e)),
        }
    }
    Err(last)
}
