//! The `channel.k8s.io` framing of kubelet's remote command streams over WebSocket, both
//! sides of it (the agent's `/exec` and `outpost exec`). Every binary message starts with
//! the byte of its channel: 0 stdin, 1 stdout, 2 stderr, 3 the error channel (one
//! `metav1.Status` when the command ends), 4 resize (`{"Width":..,"Height":..}`). The
//! `v5` protocol adds one message, `[255, channel]`: the client closed that stream (its
//! stdin reached end of file). No IO here.

use serde::{Deserialize, Serialize};

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

/// A terminal's size in characters, as the resize channel carries it (Go's decoder
/// matches the field names in any case; so does this one for the common spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    #[serde(rename = "Width", alias = "width")]
    pub width: u16,
    #[serde(rename = "Height", alias = "height")]
    pub height: u16,
}

/// What a client's message asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// Bytes for the command's stdin.
    Stdin(&'a [u8]),
    /// New terminal sizes (a message may hold several JSON objects).
    Resize(Vec<TerminalSize>),
    /// `v5`: the client closed the stream of this channel.
    Close(u8),
    /// An empty message, or one on a channel a client does not write.
    Ignored,
}

/// A client message the protocol does not allow ([`parse`]), or, to a client, an exit
/// status that tells no exit code ([`Status::exit_code`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the resize message is not a terminal size such as {{\"Width\":80,\"Height\":24}}")]
    Resize,
    #[error("a close-stream message holds exactly one channel byte; this one holds {0}")]
    Close(usize),
    /// The command failed: the status's message, the server's words for why.
    #[error("{message}")]
    Failed { message: String },
    /// The command failed, with a status that has a reason and no message.
    #[error("the command failed ({reason})")]
    FailedReason { reason: String },
    /// The command failed, with a status that has neither message nor reason.
    #[error("the command failed (status {status:?})")]
    FailedStatus { status: String },
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
        RESIZE => serde_json::Deserializer::from_slice(data)
            .into_iter::<TerminalSize>()
            .collect::<Result<Vec<_>, _>>()
            .map(Inbound::Resize)
            .map_err(|_| Error::Resize),
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

/// The `metav1.Status` on the error channel, serialized as kubelet's `json.Marshal` of it:
/// Go's field order, empty fields left out, no `kind`/`apiVersion`, `metadata: {}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Details>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Details {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// `remotecommand`'s reason for a command that exited non-zero, and its cause type.
pub const NON_ZERO_EXIT_CODE: &str = "NonZeroExitCode";
pub const EXIT_CODE: &str = "ExitCode";

impl Status {
    fn new(status: &str) -> Status {
        Status {
            metadata: serde_json::Map::new(),
            status: status.to_owned(),
            message: String::new(),
            reason: String::new(),
            details: None,
            code: 0,
        }
    }

    /// How the command ended, as kubelet reports it: `Success`, or `NonZeroExitCode` with
    /// the code as the `ExitCode` cause and the container runtime's text in the message.
    pub fn exited(command: &[String], exit_code: i32) -> Status {
        if exit_code == 0 {
            return Status::new("Success");
        }
        Status {
            message: format!(
                "command terminated with non-zero exit code: error executing command [{}], exit code {exit_code}",
                command.join(" ")
            ),
            reason: NON_ZERO_EXIT_CODE.to_owned(),
            details: Some(Details {
                causes: vec![Cause {
                    reason: EXIT_CODE.to_owned(),
                    message: exit_code.to_string(),
                }],
            }),
            ..Status::new("Failure")
        }
    }

    /// The command could not be run (or waited for): kubelet's `InternalError`.
    pub fn internal_error(error: &str) -> Status {
        let error = format!("error executing command in container: {error}");
        Status {
            message: format!("Internal error occurred: {error}"),
            reason: "InternalError".to_owned(),
            details: Some(Details {
                causes: vec![Cause { reason: String::new(), message: error }],
            }),
            code: 500,
            ..Status::new("Failure")
        }
    }

    /// The error channel's message.
    pub fn to_frame(&self) -> Vec<u8> {
        // Strings and numbers only: serializing cannot fail.
        frame(ERROR, serde_json::to_vec(self).unwrap_or_default().as_slice())
    }

    /// The exit code a client should exit with, or the failure's message: `Success` is 0,
    /// `NonZeroExitCode` the code of its `ExitCode` cause.
    pub fn exit_code(&self) -> Result<i32, Error> {
        if self.status == "Success" {
            return Ok(0);
        }
        if self.reason == NON_ZERO_EXIT_CODE
            && let Some(code) = self
                .details
                .iter()
                .flat_map(|d| &d.causes)
                .find(|c| c.reason == EXIT_CODE)
                .and_then(|c| c.message.parse().ok())
        {
            return Ok(code);
        }
        Err(match (self.message.is_empty(), self.reason.is_empty()) {
            (false, _) => Error::Failed { message: self.message.clone() },
            (true, false) => Error::FailedReason { reason: self.reason.clone() },
            (true, true) => Error::FailedStatus { status: self.status.clone() },
        })
    }
}

#[cfg(test)]
mod tests;
