//! A checkpoint a source could not read or write (SEMANTICS.md O1, O2), as the agent's
//! checkpoint store reported it: the path and what went wrong, in words. The machines
//! log it and report it ([`super::SourceEvent::Failed`]); the store's own error (with
//! its IO cause) stays in the agent, which makes this one from it.

use std::path::PathBuf;

/// What went wrong with a checkpoint file. The messages are the agent's store's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot write checkpoint {path}: {reason}; check that the state directory is writable and not full"
    )]
    Write { path: PathBuf, reason: String },
    #[error("cannot read checkpoint {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error(
        "checkpoint {path} is corrupt ({reason}); it is ignored and replaced by the next good update"
    )]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot encode checkpoint {path}: {reason}")]
    Encode { path: PathBuf, reason: String },
}
