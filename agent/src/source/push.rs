//! The push source: manifests PUT to the local API under `/manifests`. SCAFFOLD.

use crate::checkpoint::Checkpoints;
use crate::source::EventStream;

#[derive(Debug, thiserror::Error)]
pub enum Error {}

#[derive(Debug, Clone)]
pub struct Config {
    pub node_name: String,
    pub checkpoints: Checkpoints,
}

/// What the HTTP handlers hold to change the pushed manifests.
#[derive(Debug, Clone)]
pub struct PushHandle {}

/// Loads the pushed manifests' checkpoint and returns the handle for the HTTP
/// handlers and the source's event stream (which starts with the checkpoint's SET).
pub fn open(_config: Config) -> Result<(PushHandle, EventStream), Error> {
    todo!()
}
