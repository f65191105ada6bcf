//! `/portForward` over a WebSocket, as kubelet serves it (its `portforward` package's
//! WebSocket handler): the ports come from the query (`port`, repeated or
//! comma-separated), the subprotocol is `v4.channel.k8s.io` (or none, which kubelet takes
//! as the same binary framing), and each port `i` gets two channels: `2i` carries its
//! data both ways, `2i+1` (the agent's only) a message when forwarding fails. The first
//! message on each channel is the port, two bytes little-endian, so that a client can
//! tell which is which. Every port is one forwarded connection
//! ([`port_forward::forward`]), connected at once; the session ends when every
//! connection has (the pod closed it, or it failed) or when the client goes away, which
//! closes them all.
//!
//! The connections go to the pod's loopback from inside its network namespace
//! ([`PodNetwork`], through [`crate::runtime::netns::dial`]), `127.0.0.1` and then `::1`
//! as containerd's CRI tries `localhost`; a `hostNetwork` pod's are the host's.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::task::JoinSet;
use tracing::{Instrument, Span, info};

use super::locate::FoundPod;
use super::upgrade;
use super::websocket::{self, Route};
use crate::api::runtime::Runtime;
use crate::api::streams::port_forward::{self, Forward};
use crate::api::streams::{Endpoint, Limits, PortDialer};
use crate::error_chain::describe;
use crate::runtime::netns;

/// The WebSocket subprotocols served (kubelet's base64 variant is not).
pub const PROTOCOLS: [&str; 1] = ["v4.channel.k8s.io"];

/// The query parameter naming the ports (core/v1's `PortHeader`).
const PORT_PARAMETER: &str = "port";

/// A WebSocket port-forward's query without the ports to forward.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("query parameter {:?} cannot be empty", PORT_PARAMETER)]
    Empty,
    #[error("port {0:?} must be > 0")]
    Zero(String),
    #[error("{0:?} is not a port (1-65535)")]
    NotAPort(String),
    #[error(
        "query parameter {:?} is required: the ports to forward, e.g. ?port=80&port=8080",
        PORT_PARAMETER
    )]
    Required,
}

/// The ports of a WebSocket port-forward's query: every `port` parameter, each a port
/// or a comma-separated list of them, in order, at least one.
pub fn ports(query: Option<&str>) -> Result<Vec<u16>, Error> {
    let mut ports = Vec::new();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if key != PORT_PARAMETER {
            continue;
        }
        if value.is_empty() {
            return Err(Error::Empty);
        }
        for part in value.split(',') {
            match part.parse::<u16>() {
                Ok(0) => return Err(Error::Zero(part.to_owned())),
                Ok(port) => ports.push(port),
                Err(_) => return Err(Error::NotAPort(part.to_owned())),
            }
        }
    }
    if ports.is_empty() {
        return Err(Error::Required);
    }
    Ok(ports)
}

/// The data channel of the `index`th port.
pub fn data_channel(index: usize) -> u8 {
    // At most 128 ports fit the channel byte: `ports` past that are refused at upgrade.
    u8::try_from(index * 2).unwrap_or(u8::MAX - 1)
}

/// The error channel of the `index`th port.
pub fn error_channel(index: usize) -> u8 {
    data_channel(index) + 1
}

/// The most ports one WebSocket session forwards (two channels each in one byte).
pub const MAX_PORTS: usize = 128;

/// The port a client's message on `channel` is for: its index when it is a data channel
/// of one of `ports` ports (clients write nothing else).
pub fn port_index(channel: u8, ports: usize) -> Option<usize> {
    let index = usize::from(channel / 2);
    (channel.is_multiple_of(2) && index < ports).then_some(index)
}

/// Connections to a pod's loopback.
#[derive(Debug)]
pub struct PodNetwork {
    /// The pod's network namespace (`None`: `hostNetwork`, the host's).
    namespace: Option<PathBuf>,
    /// `<name>, uid <uid>`.
    pod: String,
}

impl PodNetwork {
    pub(super) fn new(runtime: &Runtime, name: &str, pod: &FoundPod) -> PodNetwork {
        let namespace = (!pod.host_network)
            .then(|| netns::network_file(&runtime.pods_dir.join(&pod.uid).join("ns")));
        PodNetwork { namespace, pod: format!("{name}, uid {}", pod.uid) }
    }
}

impl PortDialer for PodNetwork {
    fn pod(&self) -> String {
        self.pod.clone()
    }

    fn dial(&self, port: u16) -> BoxFuture<'static, io::Result<tokio::net::TcpStream>> {
        let namespace = self.namespace.clone();
        async move {
            let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
            match dial(namespace.as_ref(), v4).await {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    // Not on 127.0.0.1: perhaps on ::1 only. The first refusal is the answer.
                    dial(namespace.as_ref(), v6).await.map_err(|_| e)
                }
                dialed => dialed,
            }
        }
        .boxed()
    }
}

async fn dial(namespace: Option<&PathBuf>, addr: SocketAddr) -> io::Result<tokio::net::TcpStream> {
    match namespace {
        None => tokio::net::TcpStream::connect(addr).await,
        Some(file) => netns::dial::connect(file, addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), describe(&e))),
    }
}

/// Completes the WebSocket upgrade for a port-forward `endpoint` and serves the session
/// on the upgraded connection's own task.
pub(super) fn upgrade(
    upgrade: WebSocketUpgrade,
    endpoint: Endpoint,
    limits: Limits,
    span: Span,
) -> Response {
    let status = crate::api::container_logs::status;
    let bad = axum::http::StatusCode::BAD_REQUEST;
    let Endpoint::PortForward { dialer, ports } = endpoint else {
        return status(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            "an exec endpoint was given to a port-forward session".to_owned(),
        );
    };
    if ports.len() > MAX_PORTS {
        let message =
            format!("{} ports asked for; one session forwards at most {MAX_PORTS}", ports.len());
        return status(bad, "BadRequest", message);
    }
    let upgrade = upgrade.protocols(PROTOCOLS);
    if let Err(refusal) = upgrade::protocol(&upgrade, &PROTOCOLS, true) {
        return axum::response::IntoResponse::into_response(refusal);
    }
    upgrade.on_upgrade(move |socket| serve(socket, dialer, ports, limits).instrument(span))
}

/// Serves one session on `socket` until every connection has ended or the client goes
/// away.
async fn serve(socket: WebSocket, dialer: Arc<dyn PortDialer>, ports: Vec<u16>, limits: Limits) {
    let count = ports.len();
    let route = move |message: Bytes| match message.first() {
        Some(&channel) => match port_index(channel, count) {
            Some(index) => Route::To(index, message.slice(1..)),
            None => Route::Nowhere,
        },
        None => Route::Nowhere,
    };
    let (client, inbound) = websocket::split(socket, count, route, limits.idle_timeout);
    info!(?ports, "port-forward started");
    let mut forwards = JoinSet::new();
    for ((index, &port), from_client) in ports.iter().enumerate().zip(inbound) {
        let (data, error) = (data_channel(index), error_channel(index));
        client.send(data, &port.to_le_bytes()).await;
        client.send(error, &port.to_le_bytes()).await;
        let forward = Forward {
            port,
            from_client: Box::new(from_client),
            to_client: Box::new(client.channel(data)),
            error: Box::new(client.channel(error)),
        };
        let forward = port_forward::forward(dialer.clone(), forward);
        forwards.spawn(forward.instrument(Span::current()));
    }
    drop(dialer);
    tokio::select! {
        () = async { while forwards.join_next().await.is_some() {} } => {
            info!("port-forward ended: every connection is closed");
        }
        () = client.gone.cancelled() => info!("the port-forward client went away"),
    }
    // The connections still open close with their tasks.
    forwards.shutdown().await;
    client.close().await;
}
