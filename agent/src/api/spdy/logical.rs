//! SPDY/3.1 streams as the sessions' logical streams: a stream's [`Receiver`] is what the
//! client sends on it, its [`Sender`] this side's half.

use axum::body::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;

use super::connection::{Receiver, Sender};
use crate::api::streams::logical::{Closed, Inbound, Outbound};

impl Inbound for Receiver {
    fn recv(&mut self) -> BoxFuture<'_, Option<Bytes>> {
        Receiver::recv(self).boxed()
    }
}

impl Outbound for Sender {
    fn send<'a>(&'a self, data: &'a [u8]) -> BoxFuture<'a, Result<(), Closed>> {
        async move { Sender::send(self, data).await.map_err(|_| Closed) }.boxed()
    }

    fn finish(&self) -> BoxFuture<'_, ()> {
        // A stream already finished or reset has nothing more to end.
        async move { drop(Sender::finish(self).await) }.boxed()
    }
}
