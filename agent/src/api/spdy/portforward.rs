//! kubelet's port-forward over SPDY/3.1 (`portforward.k8s.io`): each forwarded
//! connection is a pair of streams the client opens, a `data` and an `error` one, both
//! with the headers `port` and `requestID` (older clients send no `requestID`: the pair
//! is then told by stream IDs, the error stream's ID and the data stream's minus 2, as
//! kubelet does). A stream without a valid `port` or `streamType` is refused. Once both
//! streams of a pair are open (within [`STREAM_CREATION_TIMEOUT`]) the data stream is
//! joined to a TCP connection to the port in the pod ([`PortDialer`]); an error (the
//! dial fails, the pair never completes) is written on the pair's error stream as
//! kubelet writes it. The session lasts as long as the client's connection.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{Instrument, Span, debug, warn};

use super::connection::{Connection, Receiver, Sender, Stream};
use super::remotecommand::STREAM_CREATION_TIMEOUT;
use crate::api::streams::PortDialer;
use outpost_formats::spdy::Headers;

/// The most of a connection's bytes read at once.
const CHUNK: usize = 32 * 1024;

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
pub async fn serve<T>(io: T, dialer: Arc<dyn PortDialer>)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let accept: super::connection::Accept =
        Box::new(|headers| check(headers).map(|_| ()).map_err(Into::into));
    let mut connection = Connection::new(io, accept, super::connection::Limits::default());
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

/// One forwarded connection: the data stream joined to a TCP connection to its port.
async fn forward(dialer: Arc<dyn PortDialer>, id: String, data: Stream, error: Stream) {
    let port = check(&data.headers).map(|(port, _)| port).unwrap_or_default();
    debug!(request = %id, port, "forwarding");
    match dialer.dial(port).await {
        Ok(tcp) => {
            let (read, write) = tcp.into_split();
            let to_pod = to_pod(data.inbound, write);
            let from_pod = from_pod(read, data.sender.clone());
            if let Err(e) = copy_both_ways(to_pod, from_pod).await {
                debug!(request = %id, port, error = %e, "forwarded connection ended with an error");
            }
        }
        Err(e) => {
            let message = format!("error forwarding port {port} to pod {}: {e}", dialer.pod());
            warn!(request = %id, %message);
            let _ = error.sender.send(message.as_bytes()).await;
            let _ = data.sender.finish().await;
        }
    }
    let _ = error.sender.finish().await;
}

/// How long the other direction of a forwarded connection may go on once one has ended
/// (containerd's CRI port-forward gives it a second, as socat does).
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs both directions until one ends, then gives the other [`LINGER`] to end too: the
/// pair's streams are then closed, which is what kubectl 1.27 waits for before it
/// closes its local connection (it reads the error stream to its end).
async fn copy_both_ways(
    to_pod: impl Future<Output = std::io::Result<()>>,
    from_pod: impl Future<Output = std::io::Result<()>>,
) -> std::io::Result<()> {
    let (to_pod, from_pod) = (std::pin::pin!(to_pod), std::pin::pin!(from_pod));
    let (first, other) = match futures::future::select(to_pod, from_pod).await {
        futures::future::Either::Left((done, other)) => {
            (done, futures::future::Either::Left(other))
        }
        futures::future::Either::Right((done, other)) => {
            (done, futures::future::Either::Right(other))
        }
    };
    let second = tokio::time::timeout(LINGER, other).await.unwrap_or(Ok(()));
    first.and(second)
}

/// The client's bytes to the pod; the client's FIN ends the pod's input.
async fn to_pod(
    mut inbound: Receiver,
    mut write: tokio::net::tcp::OwnedWriteHalf,
) -> std::io::Result<()> {
    while let Some(chunk) = inbound.recv().await {
        write.write_all(&chunk).await?;
    }
    write.shutdown().await
}

/// The pod's bytes to the client, then FIN.
async fn from_pod(mut read: tokio::net::tcp::OwnedReadHalf, sender: Sender) -> std::io::Result<()> {
    let mut buffer = vec![0u8; CHUNK];
    loop {
        let n = read.read(&mut buffer).await?;
        if n == 0 {
            break;
        }
        if let Err(e) = sender.send(&buffer[..n]).await {
            return Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, e));
        }
    }
    let _ = sender.finish().await;
    Ok(())
}

#[cfg(test)]
mod tests;
