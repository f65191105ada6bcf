//! `tcpSocket`: a connection made (and closed at once) before the deadline is a success.
//! A host name is looked up first; each of its addresses is tried in turn.

use std::net::{IpAddr, SocketAddr};

use outpost_core::probe::Outcome;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use super::{Error, join_host_port};

pub(super) async fn connect(host: &str, port: u16, deadline: Instant) -> Outcome {
    let address = join_host_port(host, port);
    match timeout_at(deadline, dial(host, port)).await {
        Ok(Ok(())) => Outcome::Success,
        Ok(Err(error)) => Outcome::Failure(error.to_string()),
        Err(_) => Outcome::Failure(format!("dial tcp {address}: i/o timeout")),
    }
}

/// Go's `net.Dial("tcp", …)` and its messages.
async fn dial(host: &str, port: u16) -> Result<(), Error> {
    let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|source| Error::Lookup { host: host.to_owned(), source })?
            .collect(),
    };
    let mut last = Error::NoHost { host: host.to_owned() };
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(_stream) => return Ok(()),
            Err(source) => last = Error::Connect { address, source },
        }
    }
    Err(last)
}
