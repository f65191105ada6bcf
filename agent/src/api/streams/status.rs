//! How a remote command ended, as kubelet tells it on the error stream (N3): one
//! `metav1.Status` ([`Status`]), `Success` or `NonZeroExitCode` with the exit code as its
//! `ExitCode` cause, or `InternalError` when the command cannot run; serialized as JSON
//! from `v4.channel.k8s.io` on and as the failure's message text before
//! ([`Encoding`]). Also the resize stream's terminal sizes ([`TerminalSize`],
//! [`ResizeDecoder`]). The same for SPDY and WebSocket, and for the agent and
//! `outpost exec`. No IO here.

use serde::{Deserialize, Serialize};

use super::Ended;
use crate::error_chain::describe;

/// A status that says the command failed, read back by a client ([`Status::exit_code`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failed {
    /// The status's message, the server's words for why.
    #[error("{message}")]
    Message { message: String },
    /// A status with a reason and no message.
    #[error("the command failed ({reason})")]
    Reason { reason: String },
    /// A status with neither message nor reason.
    #[error("the command failed (status {status:?})")]
    Status { status: String },
}

/// How the error stream carries the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `v4.channel.k8s.io` and later: the JSON `metav1.Status`, success included.
    Json,
    /// `channel.k8s.io` to `v3.channel.k8s.io` (SPDY): the failure's message as text,
    /// nothing on success.
    Text,
}

impl Encoding {
    /// What the error stream carries at the end of `command` (empty for an attach),
    /// if anything.
    pub fn status_bytes(self, command: &[String], ended: &Ended) -> Option<Vec<u8>> {
        let status = match ended {
            Ok(code) => Status::exited(command, *code),
            Err(error) => Status::internal_error(&describe(error)),
        };
        match self {
            Encoding::Json => Some(status.to_json()),
            Encoding::Text => (status.status != "Success").then(|| status.message.into_bytes()),
        }
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

    /// The status as JSON, as the error stream of `v4.channel.k8s.io` and later carries
    /// it.
    pub fn to_json(&self) -> Vec<u8> {
        // Strings and numbers only: serializing cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The exit code a client should exit with, or the failure's message: `Success` is 0,
    /// `NonZeroExitCode` the code of its `ExitCode` cause.
    pub fn exit_code(&self) -> Result<i32, Failed> {
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
            (false, _) => Failed::Message { message: self.message.clone() },
            (true, false) => Failed::Reason { reason: self.reason.clone() },
            (true, true) => Failed::Status { status: self.status.clone() },
        })
    }
}

/// The resize stream's JSON objects, as they arrive in pieces (a message or a frame may
/// hold several, or part of one). A stream that is not JSON terminal sizes stops being
/// read, as kubelet's decoder stops.
#[derive(Debug, Default)]
pub struct ResizeDecoder {
    buffer: Vec<u8>,
    failed: bool,
}

impl ResizeDecoder {
    /// The sizes complete with `chunk`.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<TerminalSize> {
        if self.failed {
            return Vec::new();
        }
        self.buffer.extend_from_slice(chunk);
        let mut sizes = Vec::new();
        let mut objects =
            serde_json::Deserializer::from_slice(&self.buffer).into_iter::<TerminalSize>();
        let mut used = 0;
        loop {
            match objects.next() {
                Some(Ok(size)) => {
                    sizes.push(size);
                    used = objects.byte_offset();
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(_)) => {
                    self.failed = true;
                    break;
                }
                None => {
                    used = objects.byte_offset();
                    break;
                }
            }
        }
        self.buffer.drain(..used);
        sizes
    }

    /// Whether the stream held something else than terminal sizes.
    pub fn failed(&self) -> bool {
        self.failed
    }
}

#[cfg(test)]
mod tests;
