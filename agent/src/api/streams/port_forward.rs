//! One forwarded connection of `/portForward`, over any transport's logical streams
//! ([`Forward`]): a TCP connection to the port on the pod's loopback ([`PortDialer`]),
//! the client's data stream joined to it both ways. A dial that fails is written on the
//! error stream in kubelet's words. When one direction ends, the other gets [`LINGER`]
//! to end too, as containerd's CRI port-forward gives it (the same for SPDY and
//! WebSocket, since upstream both reach the same runtime call); then both streams end.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{debug, info};

use super::PortDialer;
use super::logical::{Inbound, Outbound};

/// The most of a connection's bytes read at once (one frame or message to the client).
pub const CHUNK: usize = 32 * 1024;

/// How long the other direction of a forwarded connection may go on once one has ended
/// (containerd's CRI port-forward gives it a second, as socat does). kubectl 1.27 reads
/// the error stream to its end before it closes its local connection, so each of its
/// requests over a forward that the pod does not close waits this long (the book's
/// "Exec" page says so).
pub const LINGER: Duration = Duration::from_secs(1);

/// One connection to forward: its port and the client's streams for it.
pub struct Forward {
    pub port: u16,
    /// The client's bytes, for the pod.
    pub from_client: Box<dyn Inbound>,
    /// The pod's bytes, to the client.
    pub to_client: Box<dyn Outbound>,
    /// Where a failure is told.
    pub error: Box<dyn Outbound>,
}

impl std::fmt::Debug for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forward").field("port", &self.port).finish_non_exhaustive()
    }
}

/// Connects to the port and copies both ways until the connection ends; a failure goes
/// on the error stream. Both streams are ended (the data stream as soon as the pod ends
/// its side).
pub async fn forward(dialer: Arc<dyn PortDialer>, forward: Forward) {
    let Forward { port, from_client, to_client, error } = forward;
    let result = match dialer.dial(port).await {
        Ok(tcp) => {
            debug!(port, "port-forward connected");
            let (read, write) = tcp.into_split();
            copy_both_ways(to_pod(from_client, write), from_pod(read, &*to_client)).await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => debug!(port, "port-forward connection closed"),
        Err(e) => {
            let message = format!("error forwarding port {port} to pod {}: {e}", dialer.pod());
            info!(port, %message);
            let _ = error.send(message.as_bytes()).await;
        }
    }
    // A second end of the data stream (the pod ended it first) is no frame.
    to_client.finish().await;
    error.finish().await;
}

/// Runs both directions until one ends, then gives the other [`LINGER`] to end too.
async fn copy_both_ways(
    to_pod: impl Future<Output = std::io::Result<()>>,
    from_pod: impl Future<Output = std::io::Result<()>>,
) -> std::io::Result<()> {
    use futures::future::{Either, select};
    let (to_pod, from_pod) = (std::pin::pin!(to_pod), std::pin::pin!(from_pod));
    let (first, other) = match select(to_pod, from_pod).await {
        Either::Left((done, other)) => (done, Either::Left(other)),
        Either::Right((done, other)) => (done, Either::Right(other)),
    };
    let second = tokio::time::timeout(LINGER, other).await.unwrap_or(Ok(()));
    first.and(second)
}

/// The client's bytes to the pod; the client's end of its stream ends the pod's input.
async fn to_pod(
    mut from_client: Box<dyn Inbound>,
    mut write: tokio::net::tcp::OwnedWriteHalf,
) -> std::io::Result<()> {
    while let Some(chunk) = from_client.recv().await {
        write.write_all(&chunk).await?;
    }
    write.shutdown().await
}

/// The pod's bytes to the client, then the end of the client's data stream.
async fn from_pod(
    mut read: tokio::net::tcp::OwnedReadHalf,
    to_client: &dyn Outbound,
) -> std::io::Result<()> {
    let mut buffer = vec![0u8; CHUNK];
    loop {
        let n = read.read(&mut buffer).await?;
        if n == 0 {
            to_client.finish().await;
            return Ok(());
        }
        if let Err(e) = to_client.send(&buffer[..n]).await {
            return Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, e));
        }
    }
}
