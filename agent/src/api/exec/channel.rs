//! The `channel.k8s.io` framing of kubelet's remote command streams over WebSocket, both
//! sides of it (the agent's `/exec` and `outpost exec`). Every binary message starts with
//! the byte of its channel: 0 stdin, 1 stdout, 2 stderr, 3 the error channel (one
//! `metav1.Status` when the command ends), 4 resize (`{"Width":..,"Height":..}`). The
//! `v5` protocol adds one message, `[255, channel]`: the client closed that stream (its
//! stdin reached end of file). The status and the terminal sizes themselves are
//! `streams::status`'s. No IO here.

use crate::api::streams::status::TerminalSize;

pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// `v5`: the stream of the channel that follows is closed.
pub const CLOSE: u8 = 255;

/// The subprotocols served, the preferred first.
pub const PROTOCOLS: [&str; 2] = [Protocol::V5.name(), Protocol::V4.name()];

/// The remote command subprotocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `v4.channel.k8s.io`: the error channel carries a JSON `metav1.Status`.
    V4,
    /// `v5.channel.k8s.io`: v4, and the client can close its stdin.
    V5,
}

impl Protocol {
    pub const fn name(self) -> &'static str {
        match self {
            Protocol::V4 => "v4.channel.k8s.io",
            Protocol::V5 => "v5.channel.k8s.io",
        }
    }

    pub fn from_name(name: &str) -> Option<Protocol> {
        [Protocol::V5, Protocol::V4].into_iter().find(|p| p.name() == name)
    }
}

/// What a client's message asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// Bytes for the command's stdin.
    Stdin(&'a [u8]),
    /// Terminal sizes: JSON objects, for the session's `ResizeDecoder` (a message may
    /// hold several).
    Resize(&'a [u8]),
    /// `v5`: the client closed the stream of this channel.
    Close(u8),
    /// An empty message, or one on a channel a client does not write.
    Ignored,
}

/// A client message the protocol does not allow ([`parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("a close-stream message holds exactly one channel byte; this one holds {0}")]
    Close(usize),
}

/// Reads one binary message from a client.
pub fn parse(protocol: Protocol, message: &[u8]) -> Result<Inbound<'_>, Error> {
    let Some((&channel, data)) = message.split_first() else { return Ok(Inbound::Ignored) };
    match channel {
        CLOSE if protocol == Protocol::V5 => match data {
            [stream] => Ok(Inbound::Close(*stream)),
            other => Err(Error::Close(other.len())),
        },
        STDIN => Ok(Inbound::Stdin(data)),
        RESIZE => Ok(Inbound::Resize(data)),
        _ => Ok(Inbound::Ignored),
    }
}

/// A message on `channel` carrying `data`.
pub fn frame(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(data.len() + 1);
    message.push(channel);
    message.extend_from_slice(data);
    message
}

/// The resize message for `size`.
pub fn resize(size: TerminalSize) -> Vec<u8> {
    // Two numbers: serializing cannot fail.
    frame(RESIZE, serde_json::to_vec(&size).unwrap_or_default().as_slice())
}

#[cfg(test)]
mod tests;
