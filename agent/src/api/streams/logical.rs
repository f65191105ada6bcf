//! The logical streams a session speaks over, whatever carries them: SPDY/3.1 streams
//! (one per std stream, or a data and an error stream per forwarded connection) and the
//! WebSocket `channel.k8s.io` channels (one byte of each message names its channel).
//! The remote-command and port-forward sessions are written once against these two
//! traits; each transport implements them.

use axum::body::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::mpsc;

/// The other side can no longer take data on a stream (it reset the stream, or the
/// connection ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the client can no longer take data on this stream (it reset it or went away)")]
pub struct Closed;

/// What the client sends on one stream.
pub trait Inbound: Send {
    /// The next chunk; `None` once the client ended the stream (or went away).
    fn recv(&mut self) -> BoxFuture<'_, Option<Bytes>>;
}

/// This side's half of one stream, to the client.
pub trait Outbound: Send + Sync {
    /// Sends `data`, waiting while the transport has no room for it.
    fn send<'a>(&'a self, data: &'a [u8]) -> BoxFuture<'a, Result<(), Closed>>;
    /// Ends this side of the stream (nothing on transports without a per-stream end).
    fn finish(&self) -> BoxFuture<'_, ()>;
}

/// A stream's inbound side fed by a channel, for transports that demultiplex one
/// connection into several streams (the WebSocket channels).
impl Inbound for mpsc::Receiver<Bytes> {
    fn recv(&mut self) -> BoxFuture<'_, Option<Bytes>> {
        mpsc::Receiver::recv(self).boxed()
    }
}
