//! The manifest URL source (`--manifest-url`). SCAFFOLD: being written.

use std::path::PathBuf;
use std::time::Duration;

use crate::checkpoint::Checkpoints;
use crate::source::{EventStream, Refresh};

#[derive(Debug, thiserror::Error)]
pub enum Error {}

#[derive(Debug, Clone)]
pub struct Config {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub interval: Duration,
    pub ca_file: Option<PathBuf>,
    pub node_name: String,
    pub checkpoints: Checkpoints,
    pub refresh: Refresh,
}

#[derive(Debug)]
pub struct UrlSource {}

impl UrlSource {
    /// Checks the configuration (URL, headers, CA file) and builds the HTTP client.
    pub fn new(_config: Config) -> Result<UrlSource, Error> {
        todo!()
    }

    pub fn into_stream(self) -> EventStream {
        todo!()
    }
}
