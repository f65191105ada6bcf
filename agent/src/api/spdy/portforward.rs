//! kubelet's port-forward over SPDY/3.1 (`portforward.k8s.io`): each forwarded
//! connection is a pair of streams the client opens, a `data` and an `error` one, both
//! with the headers `port` and `requestID` (older clients send no `requestID`: the pair
//! is then told by stream IDs, the error stream's ID and the data stream's minus 2, as
//! kubelet does). A stream without a valid `port` or `streamType` is refused. Once both
//! streams of a pair are open (within [`STREAM_CREATION_TIMEOUT`]) the pair is one
//! forwarded connection ([`port_forward::forward`]); a pair that never completes is
//! told on its error stream as kubelet tells it. The session lasts as long as the
//! client's connection.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{Instrument, Span, debug, warn};

use super::connection::{Connection, Limits, Stream};
use super::remotecommand::STREAM_CREATION_TIMEOUT;
use crate::api::streams::PortDialer;
use crate::api::streams::port_forward::{self, Forward};
use outpost_formats::spdy::Headers;

/// Which stream of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamType {
    Data,
    Error,
}

/// Why a port-forward stream is refused, from its headers (kubelet's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("\"port\" header is required")]
    NoPort,
    #[error("unable to parse {port:?} as a port: {source}")]
    Port {
        port: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("port \"0\" must be > 0")]
    ZeroPort,
    #[error("\"streamType\" header is required")]
    NoStreamType,
    #[error("invalid stream type {0:?}")]
    StreamType(String),
}

/// A stream's port-forward headers, or why it is refused.
pub fn check(headers: &Headers) -> Result<(u16, StreamType), Error> {
    let port = headers.get("port").filter(|p| !p.is_empty()).ok_or(Error::NoPort)?;
    let port: u16 = port.parse().map_err(|source| Error::Port { port: port.to_owned(), source })?;
    if port == 0 {
        return Err(Error::ZeroPort);
    }
    let kind = match headers.get("streamType") {
        None | Some("") => return Err(Error::NoStreamType),
        Some("data") => StreamType::Data,
        Some("error") => StreamType::Error,
        Some(other) => return Err(Error::StreamType(other.to_owned())),
    };
    Ok((port, kind))
}

/// The pair a stream belongs to: its `requestID`, or for older clients one made from
/// its stream ID.
pub fn request_id(headers: &Headers, stream_id: u32, kind: StreamType) -> String {
    match headers.get("requestID").filter(|id| !id.is_empty()) {
        Some(id) => id.to_owned(),
        None => match kind {
            StreamType::Error => stream_id.to_string(),
            StreamType::Data => (i64::from(stream_id) - 2).to_string(),
        },
    }
}

/// A pair being opened.
#[derive(Debug, Default)]
struct Pair {
    data: Option<Stream>,
    error: Option<Stream>,
    deadline: Option<Instant>,
}

/// Serves port-forward streams on `io` until the client closes the connection.
pub async fn serve<T>(io: T, dialer: Arc<dyn PortDialer>, limits: Limits)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let accept: super::connection::Accept =
        Box::new(|headers| check(headers).map(|_| ()).map_err(Into::into));
    let mut connection = Connection::new(io, accept, limits);
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    let mut forwards = JoinSet::new();
    let span = Span::current();
    loop {
        let next_deadline = pairs.values().filter_map(|p| p.deadline).min();
        let expired = async {
            match next_deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            stream = connection.accept() => {
                let Some(stream) = stream else { break };
                // Checked when the client opened it.
                let Ok((_, kind)) = check(&stream.headers) else { continue };
                let id = request_id(&stream.headers, stream.id, kind);
                let pair = pairs.entry(id.clone()).or_default();
                pair.deadline.get_or_insert(Instant::now() + STREAM_CREATION_TIMEOUT);
                let slot = match kind {
                    StreamType::Data => &mut pair.data,
                    StreamType::Error => &mut pair.error,
                };
                if slot.is_some() {
                    let which = if kind == StreamType::Data { "data" } else { "error" };
                    let message = format!("error processing stream for request {id}: {which} stream already assigned");
                    warn!(%message);
                    if let Some(error) = &pair.error {
                        let _ = error.sender.send(message.as_bytes()).await;
                    }
                    // Reset, so that it does not count against the connection's streams.
                    stream.sender.reset(outpost_formats::spdy::frame::rst::REFUSED_STREAM).await;
                    continue;
                }
                *slot = Some(stream);
                if pair.data.is_some() && pair.error.is_some()
                    && let Some(Pair { data: Some(data), error: Some(error), .. }) = pairs.remove(&id)
                {
                    forwards.spawn(forward(dialer.clone(), id, data, error).instrument(span.clone()));
                }
            }
            () = expired => {
                let now = Instant::now();
                let late: Vec<String> = pairs.iter().filter(|(_, p)| p.deadline.is_some_and(|d| d <= now)).map(|(id, _)| id.clone()).collect();
                for id in late {
                    let Some(pair) = pairs.remove(&id) else { continue };
                    let message = format!("(request={id}) timed out waiting for streams");
                    warn!(%message);
                    if let Some(error) = pair.error {
                        let _ = error.sender.send(message.as_bytes()).await;
                        let _ = error.sender.finish().await;
                    }
                    if let Some(data) = pair.data {
                        let _ = data.sender.finish().await;
                    }
                }
            }
            Some(_) = forwards.join_next(), if !forwards.is_empty() => {}
        }
    }
    debug!("port-forward connection ended");
    forwards.abort_all();
    connection.close().await;
}

/// One forwarded connection: the pair's data stream joined to its port.
async fn forward(dialer: Arc<dyn PortDialer>, id: String, data: Stream, error: Stream) {
    let port = check(&data.headers).map(|(port, _)| port).unwrap_or_default();
    debug!(request = %id, port, "forwarding");
    let forward = Forward {
        port,
        from_client: Box::new(data.inbound),
        to_client: Box::new(data.sender),
        error: Box::new(error.sender),
    };
    port_forward::forward(dialer, forward).await;
}

#[cfg(test)]
mod tests;
