//! What the agent and the node logger say to each other over the logger's Unix socket:
//! one request per line, fields separated by tabs, one answer line per request.
//!
//! - `register ID FIFOS LOG MAX_SIZE MAX_FILES`: log container `ID`, whose FIFOs are in
//!   the directory `FIFOS` (`stdout` and, without a TTY, `stderr`), into the CRI file
//!   `LOG`; answered `ok` or `error MESSAGE`. The logger holds a writer of its own on each
//!   FIFO until the connection that registered the container ends: the agent keeps it
//!   open until `Tasks.Create` has returned (see [`super`]).
//! - `ping`: answered `pong PID`, the logger's process id.
//! - `watch`: never answered; the connection ends when the logger does (the agent's
//!   supervision waits on it).
//!
//! A registration is also what the logger persists for each container (the same line,
//! one file per container), so a restarted logger goes on from it. No IO here.

use std::path::PathBuf;

use crate::rotation::Limits;

/// The answer to a request that succeeded.
pub const OK: &str = "ok";
/// The start of the answer to a request that failed; the message follows a tab.
pub const ERROR: &str = "error";
/// The answer to `ping`; the logger's pid follows a tab.
pub const PONG: &str = "pong";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("malformed request {0:?} (expected register, ping or watch, fields separated by tabs)")]
    Malformed(String),
    #[error(
        "container {id}: {field} holds a tab or a newline, which the node logger's protocol cannot carry"
    )]
    Unencodable { id: String, field: &'static str },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One container to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub id: String,
    /// The directory of the container's FIFOs (`<run-dir>/io/<id>`).
    pub fifos: PathBuf,
    /// The live CRI log file.
    pub log: PathBuf,
    pub limits: Limits,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Register(Registration),
    Ping,
    Watch,
}

impl Registration {
    /// The fields, tab-separated, without the verb (what the state file holds).
    pub fn to_fields(&self) -> Result<String> {
        let fields = [
            ("the id", self.id.clone()),
            ("the FIFO directory", self.fifos.to_string_lossy().into_owned()),
            ("the log path", self.log.to_string_lossy().into_owned()),
        ];
        for (field, value) in &fields {
            if value.contains(['\t', '\n']) || value.is_empty() {
                return Err(Error::Unencodable { id: self.id.clone(), field });
            }
        }
        let [(_, id), (_, fifos), (_, log)] = fields;
        Ok(format!("{id}\t{fifos}\t{log}\t{}\t{}", self.limits.max_size, self.limits.max_files))
    }

    /// The `register` request line, without its newline.
    pub fn to_request(&self) -> Result<String> {
        Ok(format!("register\t{}", self.to_fields()?))
    }

    /// Reads [`Registration::to_fields`] back.
    pub fn from_fields(fields: &str) -> Option<Registration> {
        let mut parts = fields.split('\t');
        let (Some(id), Some(fifos), Some(log), Some(size), Some(files), None) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let limits = Limits { max_size: size.parse().ok()?, max_files: files.parse().ok()? };
        if id.is_empty() || id.contains('/') || id.starts_with('.') || limits.max_files == 0 {
            return None;
        }
        Some(Registration { id: id.to_owned(), fifos: fifos.into(), log: log.into(), limits })
    }
}

impl Request {
    /// Parses one request line (without its newline).
    pub fn parse(line: &str) -> Result<Request> {
        let malformed = || Error::Malformed(line.chars().take(200).collect());
        match line.split_once('\t') {
            None if line == "ping" => Ok(Request::Ping),
            None if line == "watch" => Ok(Request::Watch),
            Some(("register", fields)) => {
                Registration::from_fields(fields).map(Request::Register).ok_or_else(malformed)
            }
            _ => Err(malformed()),
        }
    }
}
